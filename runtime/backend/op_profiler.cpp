#include "backend/op_profiler.h"

#include <cmath>

#include <executorch/runtime/platform/platform.h>

namespace cuda_triton {

using executorch::runtime::EventTracer;

namespace {

// GPU milliseconds to ExecuTorch ticks (the unit of its timestamps).
et_timestamp_t ms_to_ticks(double ms) {
  const et_tick_ratio_t ratio = et_pal_ticks_to_ns_multiplier();
  return static_cast<et_timestamp_t>(
      std::llround(ms * 1e6 * static_cast<double>(ratio.denominator) / static_cast<double>(ratio.numerator)));
}

}  // namespace

Status OpProfiler::create(size_t ops) {
  events_.clear();
  events_.resize(ops + 3);
  for (Event& e : events_) {
    CT_RETURN_IF_ERROR(Event::create(&e, /*timing=*/true));
  }
  return Status::Ok();
}

Status OpProfiler::mark(size_t event, CUstream stream) {
  return check_cu(Driver::get().cuEventRecord(events_[event].get(), stream), "cuEventRecord (profiling)");
}

Status OpProfiler::begin(CUstream stream) {
  return mark(0, stream);
}

Status OpProfiler::op(size_t op, CUstream stream) {
  return mark(1 + op, stream);
}

Status OpProfiler::ops_done(CUstream stream) {
  return mark(events_.size() - 2, stream);
}

Status OpProfiler::end(CUstream stream) {
  return mark(events_.size() - 1, stream);
}

Status OpProfiler::report(EventTracer* tracer, et_timestamp_t host_start, const std::string& delegate_name,
                          const std::vector<std::string>& op_names, const std::vector<std::string>& op_metadata) const {
  if (tracer == nullptr) {
    return Status::Ok();
  }
  const Driver& d = Driver::get();
  std::vector<float> at(events_.size(), 0.0f);  // ms from the start of the work
  for (size_t i = 1; i < events_.size(); ++i) {
    CT_RETURN_IF_ERROR(
        check_cu(d.cuEventElapsedTime(&at[i], events_[0].get(), events_[i].get()), "cuEventElapsedTime"));
  }
  // Events named by string carry no debug id (kUnsetDelegateDebugIntId), as ExecuTorch's ETDump requires.
  const auto log = [&](const std::string& name, double from_ms, double to_ms, const std::string& metadata) {
    tracer->log_profiling_delegate(name.c_str(), executorch::runtime::kUnsetDelegateDebugIntId,
                                   host_start + ms_to_ticks(from_ms), host_start + ms_to_ticks(to_ms),
                                   metadata.data(), metadata.size());
  };

  log(delegate_name, 0.0, at.back(), "");
  for (size_t i = 0; i < op_names.size(); ++i) {
    log(op_names[i], at[1 + i], at[2 + i], op_metadata[i]);
  }
  return Status::Ok();
}

}  // namespace cuda_triton
