#include "cuda/driver.h"

#include <dlfcn.h>

#include <cstdio>

namespace cuda_triton {

namespace {
// Two-level stringification so that a name cuda.h #defines (cuMemAlloc -> cuMemAlloc_v2) yields the
// versioned symbol the prototype belongs to.
#define CUDA_TRITON_STR2(x) #x
#define CUDA_TRITON_STR(x) CUDA_TRITON_STR2(x)
}  // namespace

Driver::Driver() {
  // The handle is deliberately never closed: function pointers outlive any object that could own it.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    error_ = std::string("no CUDA driver: dlopen(\"libcuda.so.1\") failed: ") + (why ? why : "unknown error");
    return;
  }
#define CUDA_TRITON_LOAD(name)                                                                  \
  name = reinterpret_cast<decltype(name)>(dlsym(lib, CUDA_TRITON_STR(name)));                 \
  if (name == nullptr) {                                                                        \
    error_ = std::string("CUDA driver too old: libcuda.so.1 has no symbol ") + CUDA_TRITON_STR(name); \
    return;                                                                                     \
  }
  CUDA_TRITON_DRIVER_FUNCTIONS(CUDA_TRITON_LOAD)
#undef CUDA_TRITON_LOAD
#define CUDA_TRITON_LOAD_OPTIONAL(name) name = reinterpret_cast<decltype(name)>(dlsym(lib, CUDA_TRITON_STR(name)));
  CUDA_TRITON_OPTIONAL_DRIVER_FUNCTIONS(CUDA_TRITON_LOAD_OPTIONAL)
#undef CUDA_TRITON_LOAD_OPTIONAL
  if (cuEventElapsedTime == nullptr) {  // drivers before the versioned symbol have the same function unversioned
    cuEventElapsedTime = reinterpret_cast<decltype(cuEventElapsedTime)>(dlsym(lib, "cuEventElapsedTime"));
  }
  has_graphs_ = cuStreamBeginCapture && cuStreamEndCapture && cuStreamGetCaptureInfo && cuGraphInstantiate &&
                cuGraphUpload && cuGraphLaunch && cuGraphExecDestroy && cuGraphDestroy &&
                cuGraphKernelNodeGetParams && cuGraphExecKernelNodeSetParams;

  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) {
    error_ = "cuInit failed: " + describe(r) + " (no usable GPU or driver)";
    return;
  }
  cuDriverGetVersion(&driver_version_);
  r = cuDeviceGetCount(&device_count_);
  if (r != CUDA_SUCCESS) {
    error_ = "cuDeviceGetCount failed: " + describe(r);
    return;
  }
  if (device_count_ <= 0) {
    error_ = "the CUDA driver reports no devices";
    return;
  }
  ok_ = true;
}

const Driver& Driver::get() {
  static const Driver driver;
  return driver;
}

std::string Driver::describe(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName != nullptr) {
    cuGetErrorName(result, &name);
  }
  if (cuGetErrorString != nullptr) {
    cuGetErrorString(result, &text);
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "CUresult %d", static_cast<int>(result));
  std::string out = name ? name : buf;
  if (text != nullptr) {
    out += std::string(" (") + text + ")";
  }
  return out;
}

bool cuda_available(std::string* reason) {
  const Driver& d = Driver::get();
  if (!d.ok() && reason != nullptr) {
    *reason = d.error();
  }
  return d.ok();
}

}  // namespace cuda_triton
