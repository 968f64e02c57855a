// DelegateProgram::create and its stages: everything a delegate does once, at init.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include <executorch/runtime/platform/log.h>

#include "backend/cuda_triton_backend.h"
#include "backend/delegate.h"
#include "backend/integrity.h"

namespace cuda_triton {

using executorch::runtime::FreeableBuffer;
using executorch::runtime::NamedDataMap;

namespace {

uint64_t round_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
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

std::atomic<uint64_t> g_delegates_created{0};

}  // namespace

Status DelegateProgram::create(Blob blob, const NamedDataMap* data_map, const DelegateOptions& options,
                               std::unique_ptr<DelegateProgram>* out) {
  std::unique_ptr<DelegateProgram> p(new DelegateProgram());
  p->blob_ = std::move(blob);
  p->options_ = options;
  p->name_ = "CudaTritonBackend#" + std::to_string(g_delegates_created++);
  const Driver& d = Driver::get();
  if (!d.ok()) {
    return Status(Code::kNotSupported, d.error());
  }
  CT_RETURN_IF_ERROR(DeviceRuntime::get(options.device, &p->device_));
  CT_RETURN_IF_ERROR(p->device_->health());
  ScopedContext scope(p->device_->context());
  CT_RETURN_IF_ERROR(scope.status());
  // A device-planned delegate need not wait for its work when ExecuTorch's copies out of device memory go
  // through our allocator, which synchronizes the shared stream first (device_runtime.h).
  p->sync_each_execute_ = !options.io_on_device || !device_allocator_registered_here();
  for (uint32_t v = 0; v < p->blob_.values.size(); ++v) {
    const ValueKind k = p->blob_.values[v].kind;
    if (k == ValueKind::kInput) {
      p->inputs_.push_back(v);
    } else if (k == ValueKind::kOutput) {
      p->outputs_.push_back(v);
    }
  }

  int smem_optin = 0;
  CT_RETURN_IF_ERROR(p->select_arch(&smem_optin));
  CT_RETURN_IF_ERROR(Event::create(&p->inputs_ready_));
  CT_RETURN_IF_ERROR(p->load_kernels(data_map, smem_optin));
  CT_RETURN_IF_ERROR(p->check_layouts());
  CT_RETURN_IF_ERROR(p->check_device_memory());
  CT_RETURN_IF_ERROR(p->upload_constants(data_map));
  CT_RETURN_IF_ERROR(p->allocate_values());
  CT_RETURN_IF_ERROR(p->prepare_launches());
  p->prepare_profiling();
  if (options.cuda_graph) {
    p->capture_graph();
  }
  *out = std::move(p);
  return Status::Ok();
}

namespace {
bool is_io(ValueKind k) {
  return k == ValueKind::kInput || k == ValueKind::kOutput;
}
}  // namespace

bool DelegateProgram::device_io(uint32_t v) const {
  return is_io(blob_.values[v].kind) && options_.io_on_device;
}

bool DelegateProgram::host_io(uint32_t v) const {
  return is_io(blob_.values[v].kind) && !options_.io_on_device;
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
  // Every op's output layout, recomputed with its kind's shape rule from its planned inputs, must be the planned
  // output (execute checks the tensors ExecuTorch hands over against the plan).
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
  uint64_t weights = 0, staging = 0, global_scratch = 0, profile_scratch = 0;
  const uint64_t intermediates = round_up(blob_.arena_size, 256);
  const uint64_t state = round_up(blob_.state_size, 256);
  for (const ConstantRecord& c : blob_.constants) {
    weights += round_up(c.nbytes, 256);
  }
  for (const ValueRecord& v : blob_.values) {
    if (is_io(v.kind) &&
        (!options_.io_on_device || (options_.cuda_graph && options_.graph_io == GraphIo::kStaging))) {
      staging += round_up(v.storage_bytes, 256);
    }
  }
  scratch_bytes(&global_scratch, &profile_scratch);
  const uint64_t needed = weights + intermediates + state + staging + global_scratch + profile_scratch;
  size_t free_bytes = 0, total_bytes = 0;
  CT_RETURN_IF_ERROR(check_cu(Driver::get().cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo"));
  if (needed <= free_bytes) {
    return Status::Ok();
  }
  return Status(Code::kOutOfMemory,
                "out of device memory: this delegate needs " + format_bytes(needed) + " (weights " +
                    format_bytes(weights) + ", intermediates " + format_bytes(intermediates) + ", state " +
                    format_bytes(state) + ", scratch " +
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
    if (buf.size() != cr.nbytes || (cr.nbytes > 0 && buf.data() == nullptr)) {
      return Status(Code::kInvalidProgram, "constant " + cr.key + " has " + std::to_string(buf.size()) +
                                               " bytes, the plan expects " + std::to_string(cr.nbytes));
    }
    CT_RETURN_IF_ERROR(verify_constant(cr, buf.data(), buf.size()));
    CT_RETURN_IF_ERROR(DeviceBuffer::allocate(cr.nbytes, &constants_[c]));
    if (cr.nbytes > 0) {
      CT_RETURN_IF_ERROR(check_cu(d.cuMemcpyHtoD(constants_[c].get(), buf.data(), cr.nbytes), "cuMemcpyHtoD"));
    }
    buf.Free();
  }
  return Status::Ok();
}

Status DelegateProgram::allocate_values() {
  // Intermediates live in one arena for the program's lifetime, at their planned offsets; state values in the state
  // buffer, zeroed here once (the launches that use them leave them zero: docs/blob_format.md); views alias their
  // root's bytes; host-planned inputs and outputs are staged through a device buffer and a pinned host buffer each;
  // device-planned ones get a device buffer of the graph's own when it stages them (GraphIo::kStaging).
  CT_RETURN_IF_ERROR(DeviceBuffer::allocate(blob_.arena_size, &arena_));
  CT_RETURN_IF_ERROR(allocate_state());
  values_.resize(blob_.values.size());
  for (uint32_t v = 0; v < blob_.values.size(); ++v) {
    const ValueRecord& vr = blob_.values[v];
    ValueState& vs = values_[v];
    if (vr.kind == ValueKind::kIntermediate) {
      vs.root_offset = vr.offset;
      vs.address = arena_.get() + vr.offset;
    } else if (vr.kind == ValueKind::kState) {
      vs.root_offset = vr.offset;
      vs.address = state_.get() + vr.offset;
    } else if (vr.kind == ValueKind::kView) {
      // Bases come before their views, so the base's offset from the root is known already.
      const ValueRecord& base = blob_.values[vr.index];
      vs.root_offset = (base.kind == ValueKind::kView ? values_[vr.index].root_offset : 0) + vr.offset;
      if (blob_.values[vr.root].kind == ValueKind::kIntermediate) {
        vs.address = arena_.get() + blob_.values[vr.root].offset + vs.root_offset;
      } else {
        io_views_.push_back(v);
      }
    } else if (host_io(v)) {
      CT_RETURN_IF_ERROR(DeviceBuffer::allocate(vr.storage_bytes, &vs.device));
      CT_RETURN_IF_ERROR(PinnedBuffer::allocate(vr.storage_bytes, &vs.pinned));
      vs.address = vs.device.get();
    } else if (options_.cuda_graph && options_.graph_io == GraphIo::kStaging) {
      CT_RETURN_IF_ERROR(DeviceBuffer::allocate(vr.storage_bytes, &vs.device));
    }
  }
  refresh_io_views();
  return Status::Ok();
}

Status DelegateProgram::allocate_state() {
  // Zero bytes before the first execute and before the graph is captured: filled on the delegate's stream (the
  // launches run there, and it does not order itself after the legacy stream a synchronous memset would use), then
  // waited for.
  CT_RETURN_IF_ERROR(DeviceBuffer::allocate(blob_.state_size, &state_));
  if (blob_.state_size == 0) {
    return Status::Ok();
  }
  const Driver& d = Driver::get();
  const CUstream stream = device_->stream();
  CT_RETURN_IF_ERROR(check_cu(d.cuMemsetD8Async(state_.get(), 0, blob_.state_size, stream), "cuMemsetD8Async"));
  return check_cu(d.cuStreamSynchronize(stream), "cuStreamSynchronize (zeroing the state buffer)");
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
      bool touches_io = false;
      for (const auto& [slot, value] : pl.value_slots) {
        touches_io |= is_io(b.values[b.values[value].root].kind);
      }
      if (touches_io) {
        io_launches_.push_back(launches_.size());
      }
      launches_.push_back(std::move(pl));
    }
  }
  return Status::Ok();
}

void DelegateProgram::prepare_profiling() {
  for (uint32_t o = 0; o < blob_.ops.size(); ++o) {
    const OpRecord& op = blob_.ops[o];
    op_names_.push_back(name_ + "/op" + std::to_string(o) + " " + (op.name.empty() ? op_kind_name(op.kind) : op.name));
    op_metadata_.push_back(std::string(op_kind_name(op.kind)) + " " + op.template_name + " " + op.schedule);
  }
  if (!options_.profile) {
    return;
  }
  Status st = Driver::get().has_event_timing() ? profiler_.create(blob_.ops.size())
                                               : Status(Code::kNotSupported, "the driver has no cuEventElapsedTime");
  if (!st.ok()) {
    ET_LOG(Info, "CudaTritonBackend: %s does not time its ops: %s", name_.c_str(), st.message().c_str());
    profiler_ = OpProfiler();
  }
}

void DelegateProgram::capture_graph() {
  // The graph holds the addresses of every argument as captured: fixed buffers for host-planned inputs and
  // outputs (and for device-planned ones it stages), none yet for device-planned ones it updates in place.
  for (uint32_t v = 0; v < values_.size(); ++v) {
    if (device_io(v)) {
      values_[v].address = values_[v].device.get();  // the graph's own buffer, or 0
      values_[v].graph_address = values_[v].address;
    }
  }
  refresh_io_views();
  const Status st = graph_.capture(
      [this](CUstream stream, std::vector<CUgraphNode>* nodes) { return enqueue_work(stream, nodes, nullptr); },
      device_->stream());
  if (!st.ok()) {
    ET_LOG(Info, "CudaTritonBackend: %s could not be captured as a CUDA graph (%s); it launches its %zu kernels "
           "directly", name_.c_str(), st.message().c_str(), launches_.size());
  }
}

DelegateProgram::~DelegateProgram() {
  if (device_ == nullptr) {
    return;
  }
  ScopedContext scope(device_->context());
  // Work of this delegate may still be queued (device-planned executes return before it finished).
  (void)Driver::get().cuStreamSynchronize(device_->stream());
  graph_.reset();
  profiler_ = OpProfiler();
  launches_.clear();
  inputs_ready_ = Event();
  global_scratch_ = DeviceBuffer();
  profile_scratch_ = DeviceBuffer();
  values_.clear();
  arena_ = DeviceBuffer();
  state_ = DeviceBuffer();
  constants_.clear();
  kernels_.clear();
}

}  // namespace cuda_triton
