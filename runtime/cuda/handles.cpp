#include "cuda/handles.h"

#include <string>

namespace cuda_triton {

Code code_of(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS:
      return Code::kOk;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return Code::kOutOfMemory;
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return Code::kIncompatible;
    // The driver documents these as leaving the process's context in an inconsistent state: every later call
    // on it fails with the same error.
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_EXTERNAL_DEVICE:
      return Code::kDeviceFault;
    default:
      return Code::kDriver;
  }
}

Status check_cu(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) {
    return Status::Ok();
  }
  return Status(code_of(result), std::string(what) + " failed: " + Driver::get().describe(result));
}

namespace {
Status need_driver() {
  const Driver& d = Driver::get();
  if (!d.ok()) {
    return Status(Code::kNotSupported, d.error());
  }
  return Status::Ok();
}
}  // namespace

Status PrimaryContext::retain(int ordinal, PrimaryContext* out) {
  CT_RETURN_IF_ERROR(need_driver());
  const Driver& d = Driver::get();
  if (ordinal < 0 || ordinal >= d.device_count()) {
    return Status(Code::kNotSupported, "CUDA device " + std::to_string(ordinal) + " does not exist (" +
                                           std::to_string(d.device_count()) + " device(s) present)");
  }
  PrimaryContext ctx;
  CT_RETURN_IF_ERROR(check_cu(d.cuDeviceGet(&ctx.device_, ordinal), "cuDeviceGet"));
  CT_RETURN_IF_ERROR(check_cu(d.cuDevicePrimaryCtxRetain(&ctx.ctx_, ctx.device_), "cuDevicePrimaryCtxRetain"));
  *out = std::move(ctx);
  return Status::Ok();
}

void PrimaryContext::reset() {
  if (ctx_ != nullptr) {
    Driver::get().cuDevicePrimaryCtxRelease(device_);
    ctx_ = nullptr;
  }
}

ScopedContext::ScopedContext(CUcontext ctx) {
  const Driver& d = Driver::get();
  if (!d.ok()) {
    status_ = Status(Code::kNotSupported, d.error());
    return;
  }
  status_ = check_cu(d.cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
  pushed_ = status_.ok();
}

ScopedContext::~ScopedContext() {
  if (pushed_) {
    CUcontext popped = nullptr;
    Driver::get().cuCtxPopCurrent(&popped);
  }
}

Status Module::load(const void* image, Module* out) {
  CT_RETURN_IF_ERROR(need_driver());
  Module m;
  CT_RETURN_IF_ERROR(check_cu(Driver::get().cuModuleLoadData(&m.h_, image), "cuModuleLoadData"));
  *out = std::move(m);
  return Status::Ok();
}

Status Module::function(const char* name, CUfunction* out) const {
  return check_cu(Driver::get().cuModuleGetFunction(out, h_, name),
                  (std::string("cuModuleGetFunction(") + name + ")").c_str());
}

void Module::release(CUmodule m) {
  Driver::get().cuModuleUnload(m);
}

Status Stream::create(Stream* out) {
  CT_RETURN_IF_ERROR(need_driver());
  Stream s;
  CT_RETURN_IF_ERROR(check_cu(Driver::get().cuStreamCreate(&s.h_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  *out = std::move(s);
  return Status::Ok();
}

Status Stream::synchronize() const {
  return check_cu(Driver::get().cuStreamSynchronize(h_), "cuStreamSynchronize");
}

Status Stream::wait_for_default_streams(CUstream stream, CUevent marker) {
  const Driver& d = Driver::get();
  for (CUstream source : {CU_STREAM_LEGACY, CU_STREAM_PER_THREAD}) {
    CT_RETURN_IF_ERROR(check_cu(d.cuEventRecord(marker, source), "cuEventRecord (default stream)"));
    CT_RETURN_IF_ERROR(check_cu(d.cuStreamWaitEvent(stream, marker, 0), "cuStreamWaitEvent"));
  }
  return Status::Ok();
}

Status Event::create(Event* out, bool timing) {
  CT_RETURN_IF_ERROR(need_driver());
  Event e;
  CT_RETURN_IF_ERROR(
      check_cu(Driver::get().cuEventCreate(&e.h_, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
  *out = std::move(e);
  return Status::Ok();
}

void Event::release(CUevent e) {
  Driver::get().cuEventDestroy(e);
}

void Graph::release(CUgraph g) {
  Driver::get().cuGraphDestroy(g);
}

Status GraphExec::instantiate(CUgraph graph, GraphExec* out) {
  GraphExec e;
  CT_RETURN_IF_ERROR(check_cu(Driver::get().cuGraphInstantiate(&e.h_, graph, 0), "cuGraphInstantiate"));
  *out = std::move(e);
  return Status::Ok();
}

void GraphExec::release(CUgraphExec e) {
  Driver::get().cuGraphExecDestroy(e);
}

void Stream::release(CUstream s) {
  Driver::get().cuStreamDestroy(s);
}

Status DeviceBuffer::allocate(size_t bytes, DeviceBuffer* out) {
  DeviceBuffer b;
  if (bytes > 0) {
    CT_RETURN_IF_ERROR(need_driver());
    CUresult r = Driver::get().cuMemAlloc(&b.ptr_, bytes);
    if (r != CUDA_SUCCESS) {
      return Status(code_of(r),
                    "cuMemAlloc(" + std::to_string(bytes) + " bytes) failed: " + Driver::get().describe(r));
    }
    b.bytes_ = bytes;
  }
  *out = std::move(b);
  return Status::Ok();
}

void DeviceBuffer::reset() {
  if (ptr_ != 0) {
    Driver::get().cuMemFree(ptr_);
    ptr_ = 0;
    bytes_ = 0;
  }
}

Status PinnedBuffer::allocate(size_t bytes, PinnedBuffer* out) {
  PinnedBuffer b;
  if (bytes > 0) {
    CT_RETURN_IF_ERROR(need_driver());
    CUresult r = Driver::get().cuMemHostAlloc(&b.ptr_, bytes, 0);
    if (r != CUDA_SUCCESS) {
      return Status(code_of(r),
                    "cuMemHostAlloc(" + std::to_string(bytes) + " bytes) failed: " + Driver::get().describe(r));
    }
    b.bytes_ = bytes;
  }
  *out = std::move(b);
  return Status::Ok();
}

void PinnedBuffer::reset() {
  if (ptr_ != nullptr) {
    Driver::get().cuMemFreeHost(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
}

}  // namespace cuda_triton
