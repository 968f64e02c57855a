// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1").
//
// Nothing here links against CUDA: the library builds and loads on machines with no GPU and no driver, and
// every entry point reports "no driver" as an ordinary error. Only the declarations of cuda.h are used (the
// header ships in the triton wheel); each function pointer is resolved by the exact symbol the header maps
// its name to (cuMemAlloc -> cuMemAlloc_v2, ...), so the table matches the prototypes it is typed with.
#pragma once

#include <cuda.h>

#include <string>

namespace cuda_triton {

// X-macro list of every driver function the runtime calls.
#define CUDA_TRITON_DRIVER_FUNCTIONS(X) \
  X(cuInit)                             \
  X(cuDriverGetVersion)                 \
  X(cuGetErrorName)                     \
  X(cuGetErrorString)                   \
  X(cuDeviceGet)                        \
  X(cuDeviceGetCount)                   \
  X(cuDeviceGetAttribute)               \
  X(cuDeviceGetName)                    \
  X(cuDevicePrimaryCtxRetain)           \
  X(cuDevicePrimaryCtxRelease)          \
  X(cuCtxPushCurrent)                   \
  X(cuCtxPopCurrent)                    \
  X(cuModuleLoadData)                   \
  X(cuModuleUnload)                     \
  X(cuModuleGetFunction)                \
  X(cuFuncSetAttribute)                 \
  X(cuLaunchKernel)                     \
  X(cuLaunchKernelEx)                   \
  X(cuMemAlloc)                         \
  X(cuMemFree)                          \
  X(cuMemGetInfo)                       \
  X(cuMemHostAlloc)                     \
  X(cuMemFreeHost)                      \
  X(cuMemcpyHtoD)                       \
  X(cuMemcpyDtoH)                       \
  X(cuMemcpyHtoDAsync)                  \
  X(cuMemcpyDtoHAsync)                  \
  X(cuMemcpyDtoDAsync)                  \
  X(cuMemsetD8Async)                    \
  X(cuStreamCreate)                     \
  X(cuStreamDestroy)                    \
  X(cuStreamSynchronize)                \
  X(cuStreamWaitEvent)                  \
  X(cuEventCreate)                      \
  X(cuEventDestroy)                     \
  X(cuEventRecord)

// Functions the runtime uses when the driver has them: CUDA graphs (stream capture, instantiation, replay, kernel
// node updates), event timing (per-op profiling) and page-locking of caller memory. Without them delegates launch
// directly, do not profile, and program I/O stays pageable.
#define CUDA_TRITON_OPTIONAL_DRIVER_FUNCTIONS(X) \
  X(cuStreamBeginCapture)                        \
  X(cuStreamEndCapture)                          \
  X(cuStreamGetCaptureInfo)                      \
  X(cuGraphInstantiate)                          \
  X(cuGraphUpload)                               \
  X(cuGraphLaunch)                               \
  X(cuGraphExecDestroy)                          \
  X(cuGraphDestroy)                              \
  X(cuGraphKernelNodeGetParams)                  \
  X(cuGraphExecKernelNodeSetParams)              \
  X(cuEventElapsedTime)                          \
  X(cuMemHostRegister)                           \
  X(cuMemHostUnregister)

// The function table. `ok()` is false when libcuda could not be loaded, a symbol is missing or cuInit
// failed; `error()` then says why in one sentence.
class Driver {
 public:
#define CUDA_TRITON_DECLARE(name) decltype(&::name) name = nullptr;
  CUDA_TRITON_DRIVER_FUNCTIONS(CUDA_TRITON_DECLARE)
  CUDA_TRITON_OPTIONAL_DRIVER_FUNCTIONS(CUDA_TRITON_DECLARE)
#undef CUDA_TRITON_DECLARE

  // The process-wide table, loaded on first use (thread-safe); never unloaded.
  static const Driver& get();

  bool ok() const {
    return ok_;
  }
  const std::string& error() const {
    return error_;
  }
  int driver_version() const {
    return driver_version_;
  }
  int device_count() const {
    return device_count_;
  }
  // Whether the driver has every function CUDA graph execution needs.
  bool has_graphs() const {
    return has_graphs_;
  }
  // Whether cuEventElapsedTime is there (per-op profiling).
  bool has_event_timing() const {
    return cuEventElapsedTime != nullptr;
  }

  // "CUDA_ERROR_X (description)" for a driver result.
  std::string describe(CUresult result) const;

 private:
  Driver();
  bool ok_ = false;
  std::string error_;
  int driver_version_ = 0;
  int device_count_ = 0;
  bool has_graphs_ = false;
};

// Whether the backend can run: a driver that initialises and at least one device. `reason` is set otherwise.
bool cuda_available(std::string* reason);

}  // namespace cuda_triton
