// DelegateProgram::execute: what a delegate does per execute. Nothing here allocates on success.
#include <cstring>
#include <string>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/platform/log.h>
#include <executorch/runtime/platform/platform.h>

#include "backend/delegate.h"

namespace cuda_triton {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::runtime::EValue;
using executorch::runtime::EventTracer;
using executorch::runtime::Span;

namespace {

ScalarType scalar_type_of(DType t) {
  switch (t) {
    case DType::kF16:
      return ScalarType::Half;
    case DType::kBF16:
      return ScalarType::BFloat16;
    case DType::kF32:
      return ScalarType::Float;
    case DType::kF64:
      return ScalarType::Double;
    case DType::kI32:
      return ScalarType::Int;
    case DType::kI64:
      return ScalarType::Long;
    case DType::kBool:
      return ScalarType::Bool;
  }
  return ScalarType::Float;
}

template <typename T>
std::vector<int64_t> to_i64(executorch::runtime::ArrayRef<T> a) {
  return std::vector<int64_t>(a.begin(), a.end());
}

// The tensor's sizes equal the plan's, and so do its strides on every dim of size > 1 (same_layout, without
// copying the tensor's dims).
bool same_planned_layout(const Tensor& t, const ValueRecord& vr) {
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  if (sizes.size() != vr.sizes.size() || strides.size() != vr.strides.size()) {
    return false;
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] != vr.sizes[i] || (sizes[i] > 1 && strides[i] != vr.strides[i])) {
      return false;
    }
  }
  return true;
}

const char* kind_name(ValueKind k) {
  return k == ValueKind::kInput ? "input" : "output";
}

}  // namespace

Status DelegateProgram::bind_value(uint32_t v, EValue* ev, bool is_output) {
  const ValueRecord& vr = blob_.values[v];
  // Messages are built only on failure: a successful check allocates nothing.
  const auto what = [&vr]() { return std::string("delegate ") + kind_name(vr.kind) + " " + std::to_string(vr.index); };
  if (ev == nullptr || !ev->isTensor()) {
    return Status(Code::kInvalidArgument, what() + " is not a tensor");
  }
  const Tensor& t = ev->toTensor();
  if (t.scalar_type() != scalar_type_of(vr.dtype)) {
    return Status(Code::kInvalidArgument, what() + ": dtype " + std::to_string(static_cast<int>(t.scalar_type())) +
                                              " does not match the plan's " + dtype_name(vr.dtype));
  }
  if (!same_planned_layout(t, vr)) {
    return Status(Code::kInvalidArgument, what() + ": sizes " + dims_to_string(to_i64(t.sizes())) + " strides " +
                                              dims_to_string(to_i64(t.strides())) + " do not match the plan's sizes " +
                                              dims_to_string(vr.sizes) + " strides " + dims_to_string(vr.strides));
  }
  if (t.nbytes() < vr.storage_bytes) {
    return Status(Code::kInvalidArgument, what() + ": tensor storage is smaller than the plan's");
  }
  ValueState& vs = values_[v];
  vs.host = nullptr;
  vs.caller = 0;
  if (vr.storage_bytes == 0) {
    return Status::Ok();
  }
  void* data = is_output ? t.mutable_data_ptr() : const_cast<void*>(t.const_data_ptr());
  if (data == nullptr) {
    return Status(Code::kInvalidArgument, what() + " has no data");
  }
  // Where the bytes live is known from the plan and the tensor's metadata, never probed: a device-planned
  // program's delegate I/O is in ExecuTorch's CUDA arena; a host-planned one's is host memory unless the caller
  // handed over a CUDA tensor.
  const bool cuda_tensor = t.device_type() == executorch::runtime::etensor::DeviceType::CUDA;
  if (options_.io_on_device && !cuda_tensor) {
    return Status(Code::kInvalidArgument, what() + " is a host tensor, but the program planned the delegate's inputs "
                                                   "and outputs in device memory (target_device compile spec)");
  }
  if (cuda_tensor) {
    vs.caller = reinterpret_cast<CUdeviceptr>(data);
  } else {
    vs.host = data;
  }
  return Status::Ok();
}

Status DelegateProgram::execute(Span<EValue*> args, EventTracer* tracer) {
  const Blob& b = blob_;
  CT_RETURN_IF_ERROR(device_->health());
  if (!failure_.empty()) {
    return Status(Code::kDeviceFault, "the CUDA context is unusable for this delegate: an earlier execute failed "
                                      "on the device (" + failure_ + "); it does not run again in this process");
  }
  if (args.size() != static_cast<size_t>(b.num_inputs) + b.num_outputs) {
    return Status(Code::kInvalidArgument, "execute() got " + std::to_string(args.size()) + " arguments, the plan has " +
                                              std::to_string(b.num_inputs) + " inputs and " +
                                              std::to_string(b.num_outputs) + " outputs");
  }
  for (uint32_t v : inputs_) {
    CT_RETURN_IF_ERROR(bind_value(v, args[b.values[v].index], false));
  }
  for (uint32_t v : outputs_) {
    CT_RETURN_IF_ERROR(bind_value(v, args[b.num_inputs + b.values[v].index], true));
  }
  Status st = run(tracer);
  if (!st.ok()) {
    failure_ = st.message();
    device_->record_failure(st);
  }
  return st;
}

Status DelegateProgram::run(EventTracer* tracer) {
  const et_timestamp_t host_start = tracer != nullptr ? et_pal_current_ticks() : 0;
  ScopedContext scope(device_->context());
  CT_RETURN_IF_ERROR(scope.status());
  const CUstream stream = device_->stream();
  const bool profiling = tracer != nullptr && profiler_.ready();

  // Host tensors into the pinned staging buffers; tensors in the caller's device memory are used in place. A
  // CUDA tensor handed to a host-planned delegate was written on any stream: fence on the default streams.
  bool caller_device_tensors = false;
  for (uint32_t v : inputs_) {
    ValueState& vs = values_[v];
    if (vs.host != nullptr) {
      std::memcpy(vs.pinned.get(), vs.host, blob_.values[v].storage_bytes);
    }
    caller_device_tensors |= vs.caller != 0 && !options_.io_on_device;
  }
  for (uint32_t v : outputs_) {
    caller_device_tensors |= values_[v].caller != 0 && !options_.io_on_device;
  }
  if (caller_device_tensors || (options_.io_on_device && sync_each_execute_)) {
    CT_RETURN_IF_ERROR(Stream::wait_for_default_streams(stream, inputs_ready_.get()));
  }

  bool replayed = false;
  if (graph_.ready() && !profiling && !caller_device_tensors) {
    CT_RETURN_IF_ERROR(replay(stream, &replayed));
  }
  if (!replayed) {
    for (uint32_t v : inputs_) {
      values_[v].address = values_[v].caller != 0 ? values_[v].caller : values_[v].device.get();
    }
    for (uint32_t v : outputs_) {
      values_[v].address = values_[v].caller != 0 ? values_[v].caller : values_[v].device.get();
    }
    refresh_io_views();
    if (profiling) {
      CT_RETURN_IF_ERROR(profiler_.begin(stream));
    }
    CT_RETURN_IF_ERROR(enqueue_work(stream, nullptr, profiling ? &profiler_ : nullptr));
    if (profiling) {
      CT_RETURN_IF_ERROR(profiler_.end(stream));
    }
  }

  // The one synchronization: host-planned outputs are read right after execute() returns.
  if (sync_each_execute_ || profiling) {
    CT_RETURN_IF_ERROR(check_cu(Driver::get().cuStreamSynchronize(stream), "cuStreamSynchronize"));
    for (uint32_t v : outputs_) {
      ValueState& vs = values_[v];
      if (vs.host != nullptr) {
        std::memcpy(vs.host, vs.pinned.get(), blob_.values[v].storage_bytes);
      }
    }
  }
  if (profiling) {
    CT_RETURN_IF_ERROR(profiler_.report(tracer, host_start, name_, op_names_, op_metadata_));
  }
  return Status::Ok();
}

Status DelegateProgram::enqueue_work(CUstream stream, std::vector<CUgraphNode>* kernel_nodes, OpProfiler* profiler) {
  const Driver& d = Driver::get();
  for (uint32_t v : inputs_) {
    if (host_io(v) && values_[v].caller == 0 && blob_.values[v].storage_bytes > 0) {
      CT_RETURN_IF_ERROR(check_cu(d.cuMemcpyHtoDAsync(values_[v].device.get(), values_[v].pinned.get(),
                                                      blob_.values[v].storage_bytes, stream),
                                  "cuMemcpyHtoDAsync (input)"));
    }
  }
  uint32_t op = UINT32_MAX;
  for (PreparedLaunch& pl : launches_) {
    if (profiler != nullptr && pl.op != op) {
      CT_RETURN_IF_ERROR(profiler->op(pl.op, stream));
    }
    op = pl.op;
    for (const auto& [slot, value] : pl.value_slots) {
      pl.slots[slot] = values_[value].address;
    }
    CT_RETURN_IF_ERROR(enqueue(pl, stream));
    if (kernel_nodes != nullptr) {
      CUgraphNode node = nullptr;
      CT_RETURN_IF_ERROR(LaunchGraph::captured_node(stream, &node));
      kernel_nodes->push_back(node);
    }
  }
  if (profiler != nullptr) {
    CT_RETURN_IF_ERROR(profiler->ops_done(stream));
  }
  for (uint32_t v : outputs_) {
    if (host_io(v) && values_[v].caller == 0 && blob_.values[v].storage_bytes > 0) {
      CT_RETURN_IF_ERROR(check_cu(d.cuMemcpyDtoHAsync(values_[v].pinned.get(), values_[v].device.get(),
                                                      blob_.values[v].storage_bytes, stream),
                                  "cuMemcpyDtoHAsync (output)"));
    }
  }
  return Status::Ok();
}

Status DelegateProgram::replay(CUstream stream, bool* replayed) {
  const Driver& d = Driver::get();
  *replayed = false;
  if (options_.io_on_device && options_.graph_io == GraphIo::kStaging) {
    for (uint32_t v : inputs_) {
      if (values_[v].caller != 0) {
        CT_RETURN_IF_ERROR(check_cu(d.cuMemcpyDtoDAsync(values_[v].device.get(), values_[v].caller,
                                                        blob_.values[v].storage_bytes, stream),
                                    "cuMemcpyDtoDAsync (input into the graph's buffer)"));
      }
    }
    CT_RETURN_IF_ERROR(graph_.launch(stream));
    for (uint32_t v : outputs_) {
      if (values_[v].caller != 0) {
        CT_RETURN_IF_ERROR(check_cu(d.cuMemcpyDtoDAsync(values_[v].caller, values_[v].device.get(),
                                                        blob_.values[v].storage_bytes, stream),
                                    "cuMemcpyDtoDAsync (output out of the graph's buffer)"));
      }
    }
    *replayed = true;
    return Status::Ok();
  }
  if (options_.io_on_device) {
    // In place: the kernel nodes that use an input or output whose address changed get their arguments rewritten.
    bool moved = false;
    for (uint32_t v : inputs_) {
      moved |= values_[v].caller != values_[v].graph_address;
    }
    for (uint32_t v : outputs_) {
      moved |= values_[v].caller != values_[v].graph_address;
    }
    if (moved) {
      for (uint32_t v : inputs_) {
        values_[v].address = values_[v].caller;
      }
      for (uint32_t v : outputs_) {
        values_[v].address = values_[v].caller;
      }
      refresh_io_views();
      for (size_t l : io_launches_) {
        PreparedLaunch& pl = launches_[l];
        for (const auto& [slot, value] : pl.value_slots) {
          pl.slots[slot] = values_[value].address;
        }
        const Status st = graph_.update_kernel(l, pl.params.data());
        if (!st.ok()) {
          ET_LOG(Info, "CudaTritonBackend: %s: the CUDA graph cannot take new tensor addresses (%s); it launches "
                 "its kernels directly from now on", name_.c_str(), st.message().c_str());
          graph_.reset();
          return Status::Ok();
        }
      }
      for (uint32_t v : inputs_) {
        values_[v].graph_address = values_[v].caller;
      }
      for (uint32_t v : outputs_) {
        values_[v].graph_address = values_[v].caller;
      }
    }
  }
  CT_RETURN_IF_ERROR(graph_.launch(stream));
  *replayed = true;
  return Status::Ok();
}

void DelegateProgram::refresh_io_views() {
  for (uint32_t v : io_views_) {
    values_[v].address = values_[blob_.values[v].root].address + values_[v].root_offset;
  }
}

}  // namespace cuda_triton
