// A CUDA DeviceAllocator for programs exported with the "target_device" compile spec: ExecuTorch plans
// their delegate inputs/outputs in a CUDA arena and copies host<->device with et_copy kernels that call
// this allocator. Registered once, when the library loads, and only if no other CUDA allocator is
// registered (a second registration aborts the process).
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/platform/log.h>

#include "backend/device_runtime.h"
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
    CUcontext ctx = nullptr;
    if (ptr == nullptr || context(index, &ctx) != Error::Ok) {
      return;
    }
    ScopedContext scope(ctx);
    Driver::get().cuMemFree(reinterpret_cast<CUdeviceptr>(ptr));
  }

  Error copy_host_to_device(void* dst, const void* src, size_t nbytes, DeviceIndex index) override {
    CUcontext ctx = nullptr;
    if (Error e = context(index, &ctx); e != Error::Ok) {
      return e;
    }
    ScopedContext scope(ctx);
    CUresult r = Driver::get().cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, nbytes);
    if (r != CUDA_SUCCESS) {
      ET_LOG(Error, "CudaDeviceAllocator: cuMemcpyHtoD failed: %s", Driver::get().describe(r).c_str());
      return Error::Internal;
    }
    return Error::Ok;
  }

  Error copy_device_to_host(void* dst, const void* src, size_t nbytes, DeviceIndex index) override {
    CUcontext ctx = nullptr;
    if (Error e = context(index, &ctx); e != Error::Ok) {
      return e;
    }
    ScopedContext scope(ctx);
    CUresult r = Driver::get().cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), nbytes);
    if (r != CUDA_SUCCESS) {
      ET_LOG(Error, "CudaDeviceAllocator: cuMemcpyDtoH failed: %s", Driver::get().describe(r).c_str());
      return Error::Internal;
    }
    return Error::Ok;
  }

  DeviceType device_type() const override {
    return DeviceType::CUDA;
  }

 private:
  // The device's shared runtime (primary context, health), created on first use and kept for the life of the
  // process, so device memory handed to ExecuTorch never outlives its context.
  Error context(DeviceIndex index, CUcontext* out) {
    if (!Driver::get().ok()) {
      ET_LOG(Error, "CudaDeviceAllocator: %s", Driver::get().error().c_str());
      return Error::NotSupported;
    }
    DeviceRuntime* rt = nullptr;
    Status st = DeviceRuntime::get(index, &rt);
    if (!st.ok()) {
      ET_LOG(Error, "CudaDeviceAllocator: %s", st.message().c_str());
      return Error::NotSupported;
    }
    *out = rt->context();
    return Error::Ok;
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
