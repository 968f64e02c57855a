#include "backend/delegate.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include <executorch/runtime/core/exec_aten/exec_aten.h>

#include "backend/integrity.h"

namespace cuda_triton {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::NamedDataMap;
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

uint64_t round_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
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

// "1.5 MiB", for messages.
std::string format_bytes(uint64_t n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

const char* kind_name(ValueKind k) {
  return k == ValueKind::kInput ? "input" : (k == ValueKind::kOutput ? "output" : "intermediate");
}

}  // namespace

Status DelegateProgram::create(Blob blob, const NamedDataMap* data_map, const DelegateOptions& options,
                               std::unique_ptr<DelegateProgram>* out) {
  std::unique_ptr<DelegateProgram> p(new DelegateProgram());
  p->blob_ = std::move(blob);
  p->io_on_device_ = options.io_on_device;
  const Driver& d = Driver::get();
  if (!d.ok()) {
    return Status(Code::kNotSupported, d.error());
  }
  CT_RETURN_IF_ERROR(DeviceRuntime::get(options.device, &p->device_));
  CT_RETURN_IF_ERROR(p->device_->health());
  ScopedContext scope(p->device_->context());
  CT_RETURN_IF_ERROR(scope.status());

  int smem_optin = 0;
  CT_RETURN_IF_ERROR(p->select_arch(&smem_optin));
  CT_RETURN_IF_ERROR(Stream::create(&p->stream_));
  CT_RETURN_IF_ERROR(Event::create(&p->inputs_ready_));
  CT_RETURN_IF_ERROR(p->load_kernels(data_map, smem_optin));
  CT_RETURN_IF_ERROR(p->check_layouts());
  CT_RETURN_IF_ERROR(p->check_device_memory());
  CT_RETURN_IF_ERROR(p->upload_constants(data_map));
  CT_RETURN_IF_ERROR(p->allocate_values());
  CT_RETURN_IF_ERROR(p->prepare_launches());
  *out = std::move(p);
  return Status::Ok();
}

Status DelegateProgram::select_arch(int* smem_optin) {
  const Driver& d = Driver::get();
  int major = 0, minor = 0;
  CT_RETURN_IF_ERROR(check_cu(
      d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_->device()),
      "cuDeviceGetAttribute(major)"));
  CT_RETURN_IF_ERROR(check_cu(
      d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_->device()),
      "cuDeviceGetAttribute(minor)"));
  CT_RETURN_IF_ERROR(check_cu(
      d.cuDeviceGetAttribute(smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device_->device()),
      "cuDeviceGetAttribute(shared optin)"));
  arch_ = pick_arch(blob_.archs, major, minor);
  if (arch_ == 0) {
    std::string have;
    for (uint32_t a : blob_.archs) {
      have += (have.empty() ? "sm_" : ", sm_") + std::to_string(a);
    }
    return Status(Code::kIncompatible, "this program has cubins for " + have + " only; the GPU is compute capability " +
                                           std::to_string(major) + "." + std::to_string(minor) +
                                           ". Re-export with a matching target arch (e.g. archs=[" +
                                           std::to_string(major * 10 + minor) + "]).");
  }
  return Status::Ok();
}

uint32_t DelegateProgram::kernel_of(const LaunchRecord& launch) const {
  for (const auto& [arch, index] : launch.kernels) {
    if (arch == arch_) {
      return index;
    }
  }
  return 0;  // unreachable: the reader checked that every launch has a kernel for every arch of the blob
}

Status DelegateProgram::load_kernels(const NamedDataMap* data_map, int smem_optin) {
  const Driver& d = Driver::get();
  const Blob& b = blob_;
  kernels_.resize(b.kernels.size());
  std::vector<bool> needed(b.kernels.size(), false);
  for (const OpRecord& op : b.ops) {
    for (const LaunchRecord& l : op.launches) {
      needed[kernel_of(l)] = true;
    }
  }
  for (size_t k = 0; k < b.kernels.size(); ++k) {
    if (!needed[k]) {
      continue;
    }
    const KernelRecord& kr = b.kernels[k];
    const std::string kw = "kernel " + kr.name + " (sm_" + std::to_string(kr.arch) + ")";
    if (kr.shared > static_cast<uint32_t>(smem_optin)) {
      return Status(Code::kIncompatible, "kernel " + kr.name + " needs " + std::to_string(kr.shared) +
                                             " bytes of shared memory, the GPU allows " + std::to_string(smem_optin));
    }
    // The cubin is the program's named data (stored once per .pte however many partitions use it).
    if (data_map == nullptr) {
      return Status(Code::kInvalidProgram, kw + ": the program has no named data, where its cubin " + kr.cubin_key +
                                               " is stored");
    }
    auto cubin = data_map->get_data(kr.cubin_key.c_str());
    if (!cubin.ok()) {
      return Status(Code::kInvalidProgram, kw + ": cubin " + kr.cubin_key + " is not in the program's named data (error " +
                                               std::to_string(static_cast<int>(cubin.error())) + ")");
    }
    FreeableBuffer cubin_buf = std::move(cubin.get());
    if (cubin_buf.size() != kr.cubin_size || cubin_buf.data() == nullptr) {
      return Status(Code::kInvalidProgram, kw + ": cubin " + kr.cubin_key + " has " + std::to_string(cubin_buf.size()) +
                                               " bytes, the blob expects " + std::to_string(kr.cubin_size));
    }
    const uint8_t* cubin_bytes = static_cast<const uint8_t*>(cubin_buf.data());
    // The key is the image's content address: corrupted code is refused here, before the driver sees it.
    CT_RETURN_IF_ERROR(verify_cubin(kr, cubin_bytes, cubin_buf.size()));
    // cuModuleLoadData takes no size and follows the image's own offsets: check them too (a program written to
    // match its own addresses is still not trusted to be well-formed), on the very bytes that are loaded.
    Status st = check_cubin(cubin_bytes, cubin_buf.size());
    if (!st.ok()) {
      return Status(st.code(), kw + ": " + st.message());
    }
    // The cubin is copied into 8-byte aligned storage: cuModuleLoadData reads an ELF image in place.
    std::vector<uint64_t> image((cubin_buf.size() + 7) / 8 + 1, 0);
    std::memcpy(image.data(), cubin_bytes, cubin_buf.size());
    cubin_buf.Free();
    st = Module::load(image.data(), &kernels_[k].module);
    if (!st.ok()) {
      return Status(st.code(), "loading kernel " + kr.name + " (sm_" + std::to_string(kr.arch) + ", triton " +
                                   b.triton_version + "): " + st.message());
    }
    CT_RETURN_IF_ERROR(kernels_[k].module.function(kr.name.c_str(), &kernels_[k].function));
    if (kr.shared > 48 * 1024) {
      CT_RETURN_IF_ERROR(check_cu(d.cuFuncSetAttribute(kernels_[k].function,
                                                       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                       static_cast<int>(kr.shared)),
                                  "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"));
    }
  }
  return Status::Ok();
}

Status DelegateProgram::check_layouts() const {
  // Every op's output layout, recomputed with its kind's generated shape rule from its planned inputs, must be
  // the planned output (execute checks the tensors ExecuTorch hands over against the plan).
  for (size_t o = 0; o < blob_.ops.size(); ++o) {
    CT_RETURN_IF_ERROR(check_op_output_layout(blob_, o));
  }
  return Status::Ok();
}

void DelegateProgram::scratch_bytes(uint64_t* global_bytes, uint64_t* profile_bytes) const {
  *global_bytes = *profile_bytes = 0;
  for (const OpRecord& op : blob_.ops) {
    for (const LaunchRecord& l : op.launches) {
      const KernelRecord& k = blob_.kernels[kernel_of(l)];
      const uint64_t ctas = uint64_t(l.grid[0]) * l.grid[1] * l.grid[2] * k.num_ctas;
      *global_bytes = std::max(*global_bytes, round_up(ctas * k.global_scratch_size, 256));
      *profile_bytes = std::max(*profile_bytes, round_up(ctas * k.profile_scratch_size, 256));
    }
  }
}

Status DelegateProgram::check_device_memory() const {
  // Everything this delegate allocates on the device, counted before any of it is: a program too large for the
  // GPU fails here with the sizes, not halfway through its uploads with a bare CUDA_ERROR_OUT_OF_MEMORY.
  uint64_t weights = 0, intermediates = 0, staging = 0, global_scratch = 0, profile_scratch = 0;
  for (const ConstantRecord& c : blob_.constants) {
    weights += round_up(c.nbytes, 256);
  }
  for (const ValueRecord& v : blob_.values) {
    if (v.kind == ValueKind::kIntermediate) {
      intermediates += round_up(v.storage_bytes, 256);
    } else if (!io_on_device_) {
      staging += round_up(v.storage_bytes, 256);
    }
  }
  scratch_bytes(&global_scratch, &profile_scratch);
  const uint64_t needed = weights + intermediates + staging + global_scratch + profile_scratch;
  size_t free_bytes = 0, total_bytes = 0;
  CT_RETURN_IF_ERROR(check_cu(Driver::get().cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo"));
  if (needed <= free_bytes) {
    return Status::Ok();
  }
  return Status(Code::kOutOfMemory,
                "out of device memory: this delegate needs " + format_bytes(needed) + " (weights " +
                    format_bytes(weights) + ", intermediates " + format_bytes(intermediates) + ", scratch " +
                    format_bytes(global_scratch + profile_scratch) + ", input/output staging " +
                    format_bytes(staging) + ") but device " + std::to_string(device_->ordinal()) + " has " +
                    format_bytes(free_bytes) + " free of " + format_bytes(total_bytes));
}

Status DelegateProgram::upload_constants(const NamedDataMap* data_map) {
  const Driver& d = Driver::get();
  constants_.resize(blob_.constants.size());
  for (size_t c = 0; c < blob_.constants.size(); ++c) {
    const ConstantRecord& cr = blob_.constants[c];
    if (data_map == nullptr) {
      return Status(Code::kInvalidProgram, "constant " + cr.key +
                                               ": the program has no named data (weights); if they were exported "
                                               "to a .ptd file, pass it (--data_path)");
    }
    auto data = data_map->get_data(cr.key.c_str());
    if (!data.ok()) {
      return Status(Code::kInvalidProgram, "constant " + cr.key + " is not in the program's named data (error " +
                                               std::to_string(static_cast<int>(data.error())) +
                                               "); if the weights are in a .ptd file, pass it (--data_path)");
    }
    FreeableBuffer buf = std::move(data.get());
    if (buf.size() != cr.nbytes) {
      return Status(Code::kInvalidProgram, "constant " + cr.key + " has " + std::to_string(buf.size()) +
                                               " bytes, the plan expects " + std::to_string(cr.nbytes));
    }
    CT_RETURN_IF_ERROR(DeviceBuffer::allocate(cr.nbytes, &constants_[c]));
    if (cr.nbytes > 0) {
      CT_RETURN_IF_ERROR(check_cu(d.cuMemcpyHtoD(constants_[c].get(), buf.data(), cr.nbytes), "cuMemcpyHtoD"));
    }
    buf.Free();
  }
  return Status::Ok();
}

Status DelegateProgram::allocate_values() {
  // Intermediates live on the device for the program's lifetime; host-planned inputs and outputs are staged
  // through a device buffer and a pinned host buffer each.
  values_.resize(blob_.values.size());
  for (size_t v = 0; v < blob_.values.size(); ++v) {
    const ValueRecord& vr = blob_.values[v];
    ValueState& vs = values_[v];
    if (vr.kind == ValueKind::kIntermediate) {
      CT_RETURN_IF_ERROR(DeviceBuffer::allocate(vr.storage_bytes, &vs.device));
      vs.address = vs.device.get();
    } else if (!io_on_device_) {
      CT_RETURN_IF_ERROR(DeviceBuffer::allocate(vr.storage_bytes, &vs.device));
      CT_RETURN_IF_ERROR(PinnedBuffer::allocate(vr.storage_bytes, &vs.pinned));
    }
  }
  return Status::Ok();
}

Status DelegateProgram::prepare_launches() {
  // Every argument slot that does not change between executions is filled in now.
  uint64_t gscratch = 0, pscratch = 0;
  scratch_bytes(&gscratch, &pscratch);
  CT_RETURN_IF_ERROR(DeviceBuffer::allocate(gscratch, &global_scratch_));
  CT_RETURN_IF_ERROR(DeviceBuffer::allocate(pscratch, &profile_scratch_));
  const Blob& b = blob_;
  for (uint32_t o = 0; o < b.ops.size(); ++o) {
    for (const LaunchRecord& l : b.ops[o].launches) {
      PreparedLaunch pl;
      pl.op = o;
      const uint32_t ki = kernel_of(l);
      pl.kernel = &b.kernels[ki];
      pl.function = kernels_[ki].function;
      std::copy(l.grid, l.grid + 3, pl.grid);
      pl.slots.assign(l.args.size() + 2, 0);
      for (size_t a = 0; a < l.args.size(); ++a) {
        const ArgRecord& ar = l.args[a];
        uint64_t& slot = pl.slots[a];
        switch (ar.kind) {
          case ArgKind::kValue:
            pl.value_slots.emplace_back(a, static_cast<uint32_t>(ar.ref));
            slot = values_[ar.ref].address;
            break;
          case ArgKind::kConstant:
            slot = constants_[ar.ref].get();
            break;
          case ArgKind::kNull:
            slot = 0;
            break;
          case ArgKind::kI32: {
            const int32_t v = static_cast<int32_t>(ar.integer);
            std::memcpy(&slot, &v, sizeof(v));
            break;
          }
          case ArgKind::kI64:
            std::memcpy(&slot, &ar.integer, sizeof(ar.integer));
            break;
          case ArgKind::kF32:
            std::memcpy(&slot, &ar.fp32, sizeof(ar.fp32));
            break;
        }
      }
      const size_t n = pl.slots.size();
      pl.slots[n - 2] = pl.kernel->global_scratch_size ? global_scratch_.get() : 0;
      pl.slots[n - 1] = pl.kernel->profile_scratch_size ? profile_scratch_.get() : 0;
      pl.bind_params();
      launches_.push_back(std::move(pl));
    }
  }
  return Status::Ok();
}

DelegateProgram::~DelegateProgram() {
  if (device_ == nullptr) {
    return;
  }
  ScopedContext scope(device_->context());
  if (stream_.get() != nullptr) {
    (void)stream_.synchronize();
  }
  launches_.clear();
  inputs_ready_ = Event();
  global_scratch_ = DeviceBuffer();
  profile_scratch_ = DeviceBuffer();
  values_.clear();
  constants_.clear();
  kernels_.clear();
  stream_ = Stream();
}

Status DelegateProgram::bind_value(size_t v, EValue* ev, bool is_output) {
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
  vs.in_caller_device_memory = false;
  if (vr.storage_bytes == 0) {
    vs.address = 0;
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
  if (io_on_device_ && !cuda_tensor) {
    return Status(Code::kInvalidArgument, what() + " is a host tensor, but the program planned the delegate's inputs "
                                                   "and outputs in device memory (target_device compile spec)");
  }
  if (cuda_tensor) {
    vs.address = reinterpret_cast<CUdeviceptr>(data);
    vs.in_caller_device_memory = true;
    return Status::Ok();
  }
  vs.address = vs.device.get();  // the staging buffers allocated at init
  vs.host = data;
  return Status::Ok();
}

Status DelegateProgram::execute(Span<EValue*> args) {
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
  for (size_t v = 0; v < b.values.size(); ++v) {
    const ValueRecord& vr = b.values[v];
    if (vr.kind == ValueKind::kInput) {
      CT_RETURN_IF_ERROR(bind_value(v, args[vr.index], false));
    } else if (vr.kind == ValueKind::kOutput) {
      CT_RETURN_IF_ERROR(bind_value(v, args[b.num_inputs + vr.index], true));
    }
  }
  Status st = run();
  if (!st.ok()) {
    failure_ = st.message();
    device_->record_failure(st);
  }
  return st;
}

Status DelegateProgram::run() {
  const Blob& b = blob_;
  ScopedContext scope(device_->context());
  CT_RETURN_IF_ERROR(scope.status());
  const Driver& d = Driver::get();

  // Host-planned inputs go through the pinned staging buffers.
  for (size_t v = 0; v < b.values.size(); ++v) {
    ValueState& vs = values_[v];
    if (b.values[v].kind == ValueKind::kInput && vs.host != nullptr) {
      std::memcpy(vs.pinned.get(), vs.host, b.values[v].storage_bytes);
      CT_RETURN_IF_ERROR(check_cu(d.cuMemcpyHtoDAsync(vs.address, vs.pinned.get(), b.values[v].storage_bytes,
                                                      stream_.get()),
                                  "cuMemcpyHtoDAsync (input)"));
      vs.host = nullptr;
    }
  }

  // Our stream does not synchronize with the default streams. A device-planned input was written just before
  // this call by ExecuTorch's et_copy H2D (a cudaMemcpy, which for pageable host memory may return before its DMA
  // has landed) or by the caller: wait for that work before any kernel reads it.
  bool device_inputs = false;
  for (size_t v = 0; v < b.values.size(); ++v) {
    device_inputs |= b.values[v].kind == ValueKind::kInput && values_[v].in_caller_device_memory;
  }
  if (device_inputs) {
    CT_RETURN_IF_ERROR(stream_.wait_for_default_streams(inputs_ready_.get()));
  }

  for (PreparedLaunch& pl : launches_) {
    for (const auto& [slot, value] : pl.value_slots) {
      pl.slots[slot] = values_[value].address;
    }
    CT_RETURN_IF_ERROR(enqueue(pl, stream_.get()));
  }

  // Host-planned outputs come back through the pinned staging buffers.
  for (size_t v = 0; v < b.values.size(); ++v) {
    ValueState& vs = values_[v];
    if (b.values[v].kind == ValueKind::kOutput && vs.host != nullptr) {
      CT_RETURN_IF_ERROR(check_cu(
          d.cuMemcpyDtoHAsync(vs.pinned.get(), vs.address, b.values[v].storage_bytes, stream_.get()),
          "cuMemcpyDtoHAsync (output)"));
    }
  }
  // Finished before returning: ExecuTorch (and its et_copy D2H for device-planned programs) reads the
  // results as soon as execute() returns.
  CT_RETURN_IF_ERROR(stream_.synchronize());
  for (size_t v = 0; v < b.values.size(); ++v) {
    ValueState& vs = values_[v];
    if (b.values[v].kind == ValueKind::kOutput && vs.host != nullptr) {
      std::memcpy(vs.host, vs.pinned.get(), b.values[v].storage_bytes);
      vs.host = nullptr;
    }
  }
  return Status::Ok();
}

}  // namespace cuda_triton
