// The ExecuTorch BackendInterface for CudaTritonBackend (the Python BackendDetails class of the same name
// writes the blobs this reads). Registered when the shared library is loaded.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <vector>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/platform/log.h>

#include "backend/cuda_triton_backend.h"
#include "backend/delegate.h"
#include "backend/device_runtime.h"
#include "backend/host_pins.h"
#include "backend/runtime_options.h"
#include "blob/blob.h"
#include "cuda/driver.h"

namespace cuda_triton {

using executorch::runtime::ArrayRef;
using executorch::runtime::Backend;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::BackendOption;
using executorch::runtime::BackendOptionContext;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;
using executorch::runtime::Span;

namespace {

std::mutex g_error_mutex;
std::string g_last_error;

void remember(const std::string& msg) {
  std::lock_guard<std::mutex> lock(g_error_mutex);
  g_last_error = msg;
}

Error to_error(Code code) {
  switch (code) {
    case Code::kOk:
      return Error::Ok;
    case Code::kInvalidProgram:
      return Error::InvalidProgram;
    case Code::kIncompatible:
      return Error::DelegateInvalidCompatibility;
    case Code::kNotSupported:
      return Error::NotSupported;
    case Code::kOutOfMemory:
      return Error::DelegateMemoryAllocationFailed;
    case Code::kInvalidArgument:
      return Error::InvalidArgument;
    case Code::kDriver:
    case Code::kDeviceFault:
    case Code::kInternal:
      return Error::Internal;
  }
  return Error::Internal;
}

Error report(const char* where, const Status& st) {
  const std::string msg = std::string("CudaTritonBackend ") + where + ": " + st.message();
  ET_LOG(Error, "%s", msg.c_str());
  remember(msg);
  return to_error(st.code());
}

// Host time of execute() calls, for cuda_triton_backend_execute_time.
struct ExecuteTime {
  static constexpr size_t kSamples = 1 << 16;  // the first ones after a reset, for the median
  std::atomic<uint64_t> calls{0}, total_ns{0}, min_ns{UINT64_MAX}, max_ns{0};
  std::array<uint32_t, kSamples> samples{};
  void add(uint64_t ns) {
    const uint64_t i = calls.fetch_add(1, std::memory_order_relaxed);
    if (i < kSamples) {
      samples[i] = static_cast<uint32_t>(std::min<uint64_t>(ns, UINT32_MAX));
    }
    total_ns.fetch_add(ns, std::memory_order_relaxed);
    for (uint64_t m = min_ns.load(); ns < m && !min_ns.compare_exchange_weak(m, ns);) {
    }
    for (uint64_t m = max_ns.load(); ns > m && !max_ns.compare_exchange_weak(m, ns);) {
    }
  }
};
ExecuteTime g_execute_time;

// The live delegates, for cuda_triton_backend_execution_summary.
std::mutex g_live_mutex;
std::set<const DelegateProgram*> g_live;

class CudaTritonBackendImpl final : public BackendInterface {
 public:
  bool is_available() const override {
    std::string why;
    if (!cuda_available(&why)) {
      remember("CudaTritonBackend is not available: " + why);
      ET_LOG(Error, "CudaTritonBackend is not available: %s", why.c_str());
      return false;
    }
    return true;
  }

  Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                               ArrayRef<CompileSpec> compile_specs) const override {
    try {
      if (processed == nullptr) {
        return report("init", Status(Code::kInvalidProgram, "no delegate blob"));
      }
      Blob blob;
      Status st = parse_blob(processed->data(), processed->size(), &blob);
      if (!st.ok()) {
        return report("init", st);
      }
      processed->Free();  // everything needed was copied out
      DelegateOptions options;
      st = delegate_options(compile_specs, context.runtime_specs(), &options);
      if (!st.ok()) {
        return report("init", st);
      }
      options.profile = options.profile_ops && context.event_tracer() != nullptr;
      std::unique_ptr<DelegateProgram> program;
      st = DelegateProgram::create(std::move(blob), context.get_named_data_map(), options, &program);
      if (!st.ok()) {
        return report("init", st);
      }
      std::lock_guard<std::mutex> lock(g_live_mutex);
      g_live.insert(program.get());
      return static_cast<DelegateHandle*>(program.release());
    } catch (const std::bad_alloc&) {
      return report("init", Status(Code::kOutOfMemory, "out of host memory"));
    } catch (const std::exception& e) {
      return report("init", Status(Code::kInternal, e.what()));
    }
  }

  Error execute(BackendExecutionContext& context, DelegateHandle* handle, Span<EValue*> args) const override {
    if (handle == nullptr) {
      return report("execute", Status(Code::kInternal, "null delegate handle"));
    }
    try {
      const auto t0 = std::chrono::steady_clock::now();
      Status st = static_cast<DelegateProgram*>(handle)->execute(args, context.event_tracer());
      g_execute_time.add(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()));
      return st.ok() ? Error::Ok : report("execute", st);
    } catch (const std::bad_alloc&) {
      return report("execute", Status(Code::kOutOfMemory, "out of host memory"));
    } catch (const std::exception& e) {
      return report("execute", Status(Code::kInternal, e.what()));
    }
  }

  // The process-wide runtime options (runtime_options.h): "cuda_graph" (bool), "cuda_graph_io" (string).
  Error set_option(BackendOptionContext& /*context*/, const Span<BackendOption>& backend_options) override {
    const Status st =
        RuntimeOptions::get().apply(Span<const BackendOption>(backend_options.data(), backend_options.size()));
    return st.ok() ? Error::Ok : report("set_option", st);
  }

  void destroy(DelegateHandle* handle) const override {
    {
      std::lock_guard<std::mutex> lock(g_live_mutex);
      g_live.erase(static_cast<const DelegateProgram*>(handle));
    }
    delete static_cast<DelegateProgram*>(handle);
  }
};

CudaTritonBackendImpl g_backend;
Backend g_backend_entry{kBackendName, &g_backend};
const Error g_registration = executorch::runtime::register_backend(g_backend_entry);

}  // namespace

// Runs `f` (returning 0 or -1) with device `device`'s primary context current: the C entry points' shared
// preamble. -1 when the device cannot be used.
template <typename F>
int in_device_context(int device, F&& f) {
  DeviceRuntime* rt = nullptr;
  if (!DeviceRuntime::get(device, &rt).ok()) {
    return -1;
  }
  ScopedContext scope(rt->context());
  return scope.status().ok() ? f() : -1;
}

bool backend_registered() {
  return g_registration == Error::Ok;
}

void remember_backend_error(const std::string& message) {
  remember(message);
}

}  // namespace cuda_triton

extern "C" {

const char* cuda_triton_backend_status(void) {
  static std::string status;
  std::string why;
  if (!cuda_triton::backend_registered()) {
    status = "CudaTritonBackend could not be registered (a backend with that name exists or the registry is full)";
  } else if (!cuda_triton::cuda_available(&why)) {
    status = why;
  } else {
    status = "ok";
  }
  return status.c_str();
}

const char* cuda_triton_backend_last_error(void) {
  static std::string copy;
  std::lock_guard<std::mutex> lock(cuda_triton::g_error_mutex);
  copy = cuda_triton::g_last_error;
  return copy.c_str();
}

int cuda_triton_backend_registered(void) {
  return cuda_triton::backend_registered() ? 1 : 0;
}

void cuda_triton_backend_execute_time(unsigned long long* calls, unsigned long long* median_ns,
                                      unsigned long long* min_ns, unsigned long long* max_ns) {
  const auto& t = cuda_triton::g_execute_time;
  *calls = t.calls.load();
  std::vector<uint32_t> kept(t.samples.begin(),
                             t.samples.begin() + std::min<size_t>(*calls, cuda_triton::ExecuteTime::kSamples));
  std::nth_element(kept.begin(), kept.begin() + kept.size() / 2, kept.end());
  *median_ns = kept.empty() ? 0 : kept[kept.size() / 2];
  *min_ns = *calls ? t.min_ns.load() : 0;
  *max_ns = t.max_ns.load();
}

void cuda_triton_backend_reset_execute_time(void) {
  auto& t = cuda_triton::g_execute_time;
  t.calls = 0;
  t.total_ns = 0;
  t.min_ns = UINT64_MAX;
  t.max_ns = 0;
}

const char* cuda_triton_backend_execution_summary(void) {
  static std::string summary;
  size_t graphs = 0, direct = 0;
  std::string io;
  {
    std::lock_guard<std::mutex> lock(cuda_triton::g_live_mutex);
    for (const cuda_triton::DelegateProgram* p : cuda_triton::g_live) {
      if (p->uses_graph()) {
        ++graphs;
        io = cuda_triton::graph_io_name(p->graph_io());
      } else {
        ++direct;
      }
    }
  }
  summary = std::to_string(graphs + direct) + " delegates: " + std::to_string(graphs) + " replay a CUDA graph" +
            (graphs ? " (" + io + ")" : std::string()) + ", " + std::to_string(direct) + " launch directly";
  return summary.c_str();
}

int cuda_triton_backend_synchronize(int device) {
  cuda_triton::DeviceRuntime* rt = nullptr;
  cuda_triton::Status st = cuda_triton::DeviceRuntime::get(device, &rt);
  if (st.ok()) {
    st = rt->health();
  }
  if (st.ok()) {
    cuda_triton::ScopedContext scope(rt->context());
    st = scope.status();
    if (st.ok()) {
      st = cuda_triton::check_cu(cuda_triton::Driver::get().cuStreamSynchronize(rt->stream()),
                                 "cuStreamSynchronize (the delegates' work)");
      if (!st.ok()) {
        rt->record_failure(st);
      }
    }
  }
  if (!st.ok()) {
    cuda_triton::remember_backend_error("CudaTritonBackend: " + st.message());
    return -1;
  }
  return 0;
}

int cuda_triton_backend_device_memory(int device, unsigned long long* free_bytes, unsigned long long* total_bytes) {
  return cuda_triton::in_device_context(device, [&] {
    size_t free_b = 0, total_b = 0;
    if (cuda_triton::Driver::get().cuMemGetInfo(&free_b, &total_b) != CUDA_SUCCESS) {
      return -1;
    }
    *free_bytes = free_b;
    *total_bytes = total_b;
    return 0;
  });
}

int cuda_triton_backend_pin_host_memory(void* ptr, unsigned long long bytes) {
  const cuda_triton::Driver& d = cuda_triton::Driver::get();
  if (ptr == nullptr || bytes == 0 || !d.ok() || d.cuMemHostRegister == nullptr) {
    return -1;
  }
  return cuda_triton::in_device_context(0, [&] {
    const CUresult r = d.cuMemHostRegister(ptr, static_cast<size_t>(bytes), CU_MEMHOSTREGISTER_PORTABLE);
    if (r != CUDA_SUCCESS) {
      ET_LOG(Info, "CudaTritonBackend: cannot page-lock %llu bytes of host memory (%s); copies from it stay pageable",
             bytes, d.describe(r).c_str());
      return -1;
    }
    cuda_triton::add_host_pin(ptr, static_cast<size_t>(bytes));
    return 0;
  });
}

int cuda_triton_backend_unpin_host_memory(void* ptr) {
  const cuda_triton::Driver& d = cuda_triton::Driver::get();
  if (ptr == nullptr || !d.ok() || d.cuMemHostUnregister == nullptr) {
    return -1;
  }
  return cuda_triton::in_device_context(0, [&] {
    if (!cuda_triton::remove_host_pin(ptr)) {
      return -1;
    }
    return d.cuMemHostUnregister(ptr) == CUDA_SUCCESS ? 0 : -1;
  });
}

}  // extern "C"
