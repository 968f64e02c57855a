// A CUDA DeviceAllocator for programs exported with the "target_device" compile spec: ExecuTorch plans
// their delegate inputs/outputs in a CUDA arena and copies host<->device with et_copy kernels that call
// this allocator. Registered once, when the library loads, and only if no other CUDA allocator is
// registered (a second registration aborts the process).
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/platform/log.h>

#include <string>

#include "backend/cuda_triton_backend.h"
#include "backend/device_runtime.h"
#include "backend/host_pins.h"
#include "cuda/handles.h"

namespace cuda_triton {

namespace {

using executorch::runtime::DeviceAllocator;
using executorch::runtime::Error;
using executorch::runtime::Result;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;

class CudaDeviceAllocator final : public DeviceAllocator {
 public:
  Result<void*> allocate(size_t nbytes, DeviceIndex index, size_t alignment) override {
    CUcontext ctx = nullptr;
    if (Error e = context(index, &ctx); e != Error::Ok) {
      return e;
    }
    if (alignment > 256 || (alignment & (alignment - 1)) != 0) {
      ET_LOG(Error, "CudaDeviceAllocator: alignment %zu not supported (cuMemAlloc gives 256)", alignment);
      return Error::NotSupported;
    }
    ScopedContext scope(ctx);
    CUdeviceptr p = 0;
    CUresult r = Driver::get().cuMemAlloc(&p, nbytes == 0 ? 256 : nbytes);
    if (r != CUDA_SUCCESS) {
      ET_LOG(Error, "CudaDeviceAllocator: cuMemAlloc(%zu) failed: %s", nbytes, Driver::get().describe(r).c_str());
      return Error::MemoryAllocationFailed;
    }
    return reinterpret_cast<void*>(p);
  }

  void deallocate(void* ptr, DeviceIndex index) override {
    DeviceRuntime* rt = nullptr;
    if (ptr == nullptr || runtime(index, &rt, /*need_usable=*/false) != Error::Ok) {
      return;
    }
    ScopedContext scope(rt->context());
    (void)Driver::get().cuMemFree(reinterpret_cast<CUdeviceptr>(ptr));  // fails only once the context is unusable
  }

  // Both copies run on the device's shared stream, in order with the delegates' work: an H2D is seen by the
  // kernels of the delegate after it without a fence, and a D2H waits for the delegates before it, which therefore
  // need not synchronize themselves. ExecuTorch may reuse an H2D's source bytes once the call returns (the memory
  // plan gives a dead input's bytes to later tensors): for pageable memory the call returns once they are staged;
  // from page-locked memory (host_pins.h) the DMA reads them later, so the copy is waited for.
  Error copy_host_to_device(void* dst, const void* src, size_t nbytes, DeviceIndex index) override {
    DeviceRuntime* rt = nullptr;
    if (Error e = runtime(index, &rt); e != Error::Ok) {
      return e;
    }
    ScopedContext scope(rt->context());
    const Driver& d = Driver::get();
    Status st = check_cu(d.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src, nbytes, rt->stream()),
                         "cuMemcpyHtoDAsync (et_copy H2D)");
    if (st.ok() && host_range_pinned(src, nbytes)) {
      st = check_cu(d.cuStreamSynchronize(rt->stream()), "the et_copy H2D from page-locked memory");
    }
    return finish(rt, st);
  }

  Error copy_device_to_host(void* dst, const void* src, size_t nbytes, DeviceIndex index) override {
    DeviceRuntime* rt = nullptr;
    if (Error e = runtime(index, &rt); e != Error::Ok) {
      return e;
    }
    ScopedContext scope(rt->context());
    const Driver& d = Driver::get();
    Status st = check_cu(d.cuMemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src), nbytes, rt->stream()),
                         "cuMemcpyDtoHAsync (et_copy D2H)");
    if (st.ok()) {
      // A kernel fault of an earlier delegate execute surfaces here, so it is named as such.
      st = check_cu(d.cuStreamSynchronize(rt->stream()), "the delegates' work before et_copy D2H");
    }
    return finish(rt, st);
  }

  DeviceType device_type() const override {
    return DeviceType::CUDA;
  }

 private:
  // The device's shared runtime (primary context, stream, health), created on first use and kept for the life
  // of the process, so device memory handed to ExecuTorch never outlives its context.
  Error runtime(DeviceIndex index, DeviceRuntime** out, bool need_usable = true) {
    if (!Driver::get().ok()) {
      ET_LOG(Error, "CudaDeviceAllocator: %s", Driver::get().error().c_str());
      return Error::NotSupported;
    }
    Status st = DeviceRuntime::get(index, out);
    if (st.ok() && need_usable) {
      st = (*out)->health();
    }
    if (!st.ok()) {
      ET_LOG(Error, "CudaDeviceAllocator: %s", st.message().c_str());
      return st.code() == Code::kDeviceFault ? Error::Internal : Error::NotSupported;
    }
    return Error::Ok;
  }

  Error context(DeviceIndex index, CUcontext* out) {
    DeviceRuntime* rt = nullptr;
    if (Error e = runtime(index, &rt); e != Error::Ok) {
      return e;
    }
    *out = rt->context();
    return Error::Ok;
  }

  // Logs a failed copy and records it on the device (a fault makes the context unusable for every delegate).
  static Error finish(DeviceRuntime* rt, const Status& st) {
    if (st.ok()) {
      return Error::Ok;
    }
    rt->record_failure(st);
    const std::string msg = "CudaDeviceAllocator: " + st.message();
    ET_LOG(Error, "%s", msg.c_str());
    remember_backend_error(msg);
    return Error::Internal;
  }
};

bool register_once() {
  static CudaDeviceAllocator allocator;
  if (executorch::runtime::get_device_allocator(DeviceType::CUDA) != nullptr) {
    return false;  // someone (e.g. another CUDA backend) already provides one; use theirs
  }
  executorch::runtime::register_device_allocator(&allocator);
  return true;
}

const bool g_registered = register_once();

}  // namespace

bool device_allocator_registered_here() {
  return g_registered;
}

}  // namespace cuda_triton
