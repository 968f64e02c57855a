#include "backend/delegate.h"

#include <algorithm>
#include <cstring>
#include <string>

#include <executorch/runtime/core/exec_aten/exec_aten.h>

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

const char* kind_name(ValueKind k) {
  return k == ValueKind::kInput ? "input" : (k == ValueKind::kOutput ? "output" : "intermediate");
}

}  // namespace

Status DelegateProgram::create(Blob blob, const NamedDataMap* data_map, int device,
                               std::unique_ptr<DelegateProgram>* out) {
  std::unique_ptr<DelegateProgram> p(new DelegateProgram());
  p->blob_ = std::move(blob);
  const Blob& b = p->blob_;
  const Driver& d = Driver::get();
  if (!d.ok()) {
    return Status(Code::kNotSupported, d.error());
  }
  CT_RETURN_IF_ERROR(PrimaryContext::retain(device, &p->context_));
  ScopedContext scope(p->context_.get());
  CT_RETURN_IF_ERROR(scope.status());

  // The device and the cubins for it.
  int major = 0, minor = 0, smem_optin = 0;
  CT_RETURN_IF_ERROR(check_cu(
      d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, p->context_.device()),
      "cuDeviceGetAttribute(major)"));
  CT_RETURN_IF_ERROR(check_cu(
      d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, p->context_.device()),
      "cuDeviceGetAttribute(minor)"));
  CT_RETURN_IF_ERROR(check_cu(d.cuDeviceGetAttribute(&smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                                     p->context_.device()),
                              "cuDeviceGetAttribute(shared optin)"));
  p->arch_ = pick_arch(b.archs, major, minor);
  if (p->arch_ == 0) {
    std::string have;
    for (uint32_t a : b.archs) {
      have += (have.empty() ? "sm_" : ", sm_") + std::to_string(a);
    }
    return Status(Code::kIncompatible, "this program has cubins for " + have + " only; the GPU is compute capability " +
                                           std::to_string(major) + "." + std::to_string(minor) +
                                           ". Re-export with a matching target arch (e.g. archs=[" +
                                           std::to_string(major * 10 + minor) + "]).");
  }
  CT_RETURN_IF_ERROR(Stream::create(&p->stream_));
  CT_RETURN_IF_ERROR(Event::create(&p->inputs_ready_));

  p->kernels_.resize(b.kernels.size());
  std::vector<bool> needed(b.kernels.size(), false);
  for (const OpRecord& op : b.ops) {
    for (const LaunchRecord& l : op.launches) {
      for (const auto& [arch, ki] : l.kernels) {
        if (arch == p->arch_) {
          needed[ki] = true;
        }
      }
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
    // cuModuleLoadData takes no size and follows the image's own offsets: check them first, on the very bytes
    // that are loaded.
    Status st = check_cubin(cubin_bytes, cubin_buf.size());
    if (!st.ok()) {
      return Status(st.code(), kw + ": " + st.message());
    }
    // The cubin is copied into 8-byte aligned storage: cuModuleLoadData reads an ELF image in place.
    std::vector<uint64_t> image((cubin_buf.size() + 7) / 8 + 1, 0);
    std::memcpy(image.data(), cubin_bytes, cubin_buf.size());
    cubin_buf.Free();
    st = Module::load(image.data(), &p->kernels_[k].module);
    if (!st.ok()) {
      return Status(st.code(), "loading kernel " + kr.name + " (sm_" + std::to_string(kr.arch) + ", triton " +
                                   b.triton_version + "): " + st.message());
    }
    CT_RETURN_IF_ERROR(p->kernels_[k].module.function(kr.name.c_str(), &p->kernels_[k].function));
    if (kr.shared > 48 * 1024) {
      CT_RETURN_IF_ERROR(check_cu(d.cuFuncSetAttribute(p->kernels_[k].function,
                                                       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                       static_cast<int>(kr.shared)),
                                  "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"));
    }
  }

  // Constants: uploaded once from the named data map.
  p->constants_.resize(b.constants.size());
  for (size_t c = 0; c < b.constants.size(); ++c) {
    const ConstantRecord& cr = b.constants[c];
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
    CT_RETURN_IF_ERROR(DeviceBuffer::allocate(cr.nbytes, &p->constants_[c]));
    if (cr.nbytes > 0) {
      CT_RETURN_IF_ERROR(check_cu(d.cuMemcpyHtoD(p->constants_[c].get(), buf.data(), cr.nbytes), "cuMemcpyHtoD"));
    }
    buf.Free();
  }

  // Intermediates live on the device for the program's lifetime.
  p->values_.resize(b.values.size());
  for (size_t v = 0; v < b.values.size(); ++v) {
    if (b.values[v].kind == ValueKind::kIntermediate) {
      CT_RETURN_IF_ERROR(DeviceBuffer::allocate(b.values[v].storage_bytes, &p->values_[v].device));
      p->values_[v].address = p->values_[v].device.get();
    }
  }

  // Launches, with every argument slot that does not change between executions filled in now.
  uint64_t gscratch = 0, pscratch = 0;
  for (uint32_t o = 0; o < b.ops.size(); ++o) {
    for (const LaunchRecord& l : b.ops[o].launches) {
      PreparedLaunch pl;
      pl.op = o;
      uint32_t ki = 0;
      for (const auto& [arch, index] : l.kernels) {
        if (arch == p->arch_) {
          ki = index;
        }
      }
      pl.kernel = &b.kernels[ki];
      pl.function = p->kernels_[ki].function;
      std::copy(l.grid, l.grid + 3, pl.grid);
      const uint64_t ctas = uint64_t(l.grid[0]) * l.grid[1] * l.grid[2] * pl.kernel->num_ctas;
      gscratch = std::max(gscratch, round_up(ctas * pl.kernel->global_scratch_size, 256));
      pscratch = std::max(pscratch, round_up(ctas * pl.kernel->profile_scratch_size, 256));
      pl.slots.assign(l.args.size() + 2, 0);
      for (size_t a = 0; a < l.args.size(); ++a) {
        const ArgRecord& ar = l.args[a];
        uint64_t& slot = pl.slots[a];
        switch (ar.kind) {
          case ArgKind::kValue:
            pl.value_slots.emplace_back(a, static_cast<uint32_t>(ar.ref));
            break;
          case ArgKind::kConstant:
            slot = p->constants_[ar.ref].get();
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
      p->launches_.push_back(std::move(pl));
    }
  }
  if (gscratch > 0) {
    CT_RETURN_IF_ERROR(DeviceBuffer::allocate(gscratch, &p->global_scratch_));
  }
  if (pscratch > 0) {
    CT_RETURN_IF_ERROR(DeviceBuffer::allocate(pscratch, &p->profile_scratch_));
  }
  for (PreparedLaunch& pl : p->launches_) {
    const size_t n = pl.slots.size();
    pl.slots[n - 2] = pl.kernel->global_scratch_size ? p->global_scratch_.get() : 0;
    pl.slots[n - 1] = pl.kernel->profile_scratch_size ? p->profile_scratch_.get() : 0;
    pl.params.resize(n);
    for (size_t i = 0; i < n; ++i) {
      pl.params[i] = &pl.slots[i];
    }
  }
  *out = std::move(p);
  return Status::Ok();
}

DelegateProgram::~DelegateProgram() {
  if (context_.get() == nullptr) {
    return;
  }
  ScopedContext scope(context_.get());
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

Status DelegateProgram::prepare_value(size_t v, EValue* ev, bool is_output) {
  const ValueRecord& vr = blob_.values[v];
  const std::string w = std::string("delegate ") + kind_name(vr.kind) + " " + std::to_string(vr.index);
  if (ev == nullptr || !ev->isTensor()) {
    return Status(Code::kInvalidArgument, w + " is not a tensor");
  }
  const Tensor& t = ev->toTensor();
  if (t.scalar_type() != scalar_type_of(vr.dtype)) {
    return Status(Code::kInvalidArgument, w + ": dtype " + std::to_string(static_cast<int>(t.scalar_type())) +
                                              " does not match the plan's " + dtype_name(vr.dtype));
  }
  const std::vector<int64_t> sizes = to_i64(t.sizes());
  const std::vector<int64_t> strides = to_i64(t.strides());
  if (!same_layout(sizes, strides, vr.sizes, vr.strides)) {
    return Status(Code::kInvalidArgument, w + ": sizes " + dims_to_string(sizes) + " strides " +
                                              dims_to_string(strides) + " do not match the plan's sizes " +
                                              dims_to_string(vr.sizes) + " strides " + dims_to_string(vr.strides));
  }
  if (t.nbytes() < vr.storage_bytes) {
    return Status(Code::kInvalidArgument, w + ": tensor storage is smaller than the plan's");
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
    return Status(Code::kInvalidArgument, w + " has no data");
  }
  bool on_device = t.device_type() == executorch::runtime::etensor::DeviceType::CUDA;
  if (!on_device) {
    // A tensor not marked as CUDA may still live in device memory (e.g. a caller's own allocation).
    unsigned int mem_type = 0;
    CUresult r = Driver::get().cuPointerGetAttribute(&mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                                     reinterpret_cast<CUdeviceptr>(data));
    on_device = r == CUDA_SUCCESS && mem_type == CU_MEMORYTYPE_DEVICE;
  }
  if (on_device) {
    vs.address = reinterpret_cast<CUdeviceptr>(data);
    vs.in_caller_device_memory = true;
    return Status::Ok();
  }
  // Host-planned: stage through pinned memory (allocated on first use, kept for later executions).
  if (vs.device.bytes() < vr.storage_bytes) {
    CT_RETURN_IF_ERROR(DeviceBuffer::allocate(vr.storage_bytes, &vs.device));
    CT_RETURN_IF_ERROR(PinnedBuffer::allocate(vr.storage_bytes, &vs.pinned));
  }
  vs.address = vs.device.get();
  if (is_output) {
    vs.host = data;
  } else {
    std::memcpy(vs.pinned.get(), data, vr.storage_bytes);
    CT_RETURN_IF_ERROR(check_cu(
        Driver::get().cuMemcpyHtoDAsync(vs.address, vs.pinned.get(), vr.storage_bytes, stream_.get()),
        "cuMemcpyHtoDAsync (input)"));
  }
  return Status::Ok();
}

Status DelegateProgram::execute(Span<EValue*> args) {
  const Blob& b = blob_;
  if (args.size() != static_cast<size_t>(b.num_inputs) + b.num_outputs) {
    return Status(Code::kInvalidArgument, "execute() got " + std::to_string(args.size()) + " arguments, the plan has " +
                                              std::to_string(b.num_inputs) + " inputs and " +
                                              std::to_string(b.num_outputs) + " outputs");
  }
  ScopedContext scope(context_.get());
  CT_RETURN_IF_ERROR(scope.status());
  const Driver& d = Driver::get();

  for (size_t v = 0; v < b.values.size(); ++v) {
    const ValueRecord& vr = b.values[v];
    if (vr.kind == ValueKind::kInput) {
      CT_RETURN_IF_ERROR(prepare_value(v, args[vr.index], false));
    } else if (vr.kind == ValueKind::kOutput) {
      CT_RETURN_IF_ERROR(prepare_value(v, args[b.num_inputs + vr.index], true));
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

  uint32_t checked_op = UINT32_MAX;
  for (PreparedLaunch& pl : launches_) {
    if (pl.op != checked_op) {
      // The output layout, recomputed with the op's generated shape rule from the recorded inputs (which
      // prepare_value checked against the tensors ExecuTorch handed over); it must equal the planned output.
      checked_op = pl.op;
      CT_RETURN_IF_ERROR(check_op_output_layout(b, pl.op));
    }
    for (const auto& [slot, value] : pl.value_slots) {
      pl.slots[slot] = values_[value].address;
    }
    const KernelRecord& k = *pl.kernel;
    const unsigned int block = 32u * k.num_warps;
    CUresult r;
    if (k.num_ctas > 1 || k.cooperative || k.pdl) {
      CUlaunchAttribute attrs[4];
      unsigned int n = 0;
      if (k.num_ctas > 1) {
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attrs[n].value.clusterDim.x = k.num_ctas;
        attrs[n].value.clusterDim.y = 1;
        attrs[n].value.clusterDim.z = 1;
        ++n;
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
        attrs[n].value.clusterSchedulingPolicyPreference = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
        ++n;
      }
      if (k.cooperative) {
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attrs[n].value.cooperative = 1;
        ++n;
      }
      if (k.pdl) {
        attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attrs[n].value.programmaticStreamSerializationAllowed = 1;
        ++n;
      }
      CUlaunchConfig cfg;
      std::memset(&cfg, 0, sizeof(cfg));
      cfg.gridDimX = pl.grid[0] * k.num_ctas;
      cfg.gridDimY = pl.grid[1];
      cfg.gridDimZ = pl.grid[2];
      cfg.blockDimX = block;
      cfg.blockDimY = 1;
      cfg.blockDimZ = 1;
      cfg.sharedMemBytes = k.shared;
      cfg.hStream = stream_.get();
      cfg.attrs = attrs;
      cfg.numAttrs = n;
      r = d.cuLaunchKernelEx(&cfg, pl.function, pl.params.data(), nullptr);
    } else {
      r = d.cuLaunchKernel(pl.function, pl.grid[0], pl.grid[1], pl.grid[2], block, 1, 1, k.shared, stream_.get(),
                           pl.params.data(), nullptr);
    }
    if (r != CUDA_SUCCESS) {
      return Status(r == CUDA_ERROR_OUT_OF_MEMORY ? Code::kOutOfMemory : Code::kDriver,
                    "launching " + k.name + " (op " + std::to_string(pl.op) + ") failed: " + d.describe(r));
    }
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
