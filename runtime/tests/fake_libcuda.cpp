// A fake CUDA driver (libcuda.so.1) for CPU-only tests of the runtime's init()/execute() paths.
//
// "Device" memory is host memory; modules accept any image that starts with the ELF magic; launches run
// nothing but are checked (block = multiple of 32, grid >= 1, params present) and logged. Never install or
// preload this anywhere near a real GPU: it is only put on LD_LIBRARY_PATH by tests/test_runtime_fake_driver.py.
//
// Environment:
//   FAKE_CUDA_CC=9.0            compute capability of the single device (default 9.0)
//   FAKE_CUDA_DEVICES=1         number of devices (0: cuInit fails with CUDA_ERROR_NO_DEVICE)
//   FAKE_CUDA_OOM_AFTER=N       cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY after N successful calls
//   FAKE_CUDA_PARAMS=k:n,...    number of kernel parameters per kernel name (for the launch log)
//   FAKE_CUDA_LOG=path          append one line per launch:
//       LAUNCH <name> grid=x,y,z block=x,y,z shared=S cluster=C params=<p0>,<p1>,...
//     and WAIT for each cuStreamWaitEvent (a stream waiting on a fence, e.g. for device-resident inputs)
//     each param is N (zero), D<hash> (an address inside a fake device allocation; hash of the first 16 bytes
//     there) or X<hex of the 8-byte slot>.
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace {

// One line appended to FAKE_CUDA_LOG (when set).
void append_to_log(const std::string& line) {
  if (const char* path = std::getenv("FAKE_CUDA_LOG")) {
    if (FILE* fp = std::fopen(path, "a")) {
      std::fprintf(fp, "%s\n", line.c_str());
      std::fclose(fp);
    }
  }
}

// Streams and events are opaque heap cells tagged with a number; only their identity matters.
template <typename Handle>
CUresult new_handle(Handle* out, int tag) {
  *out = reinterpret_cast<Handle>(new int(tag));
  return CUDA_SUCCESS;
}
template <typename Handle>
CUresult delete_handle(Handle h) {
  delete reinterpret_cast<int*>(h);
  return CUDA_SUCCESS;
}

std::mutex g_mu;
std::map<uintptr_t, size_t> g_allocs;  // base -> size
long g_alloc_calls = 0;
int g_ctx_dummy = 0;

struct FakeFunction {
  std::string name;
};

const char* env(const char* k) {
  const char* v = std::getenv(k);
  return v ? v : "";
}

int devices() {
  const char* v = std::getenv("FAKE_CUDA_DEVICES");
  return v ? std::atoi(v) : 1;
}

bool inside(uintptr_t p, size_t* avail) {
  auto it = g_allocs.upper_bound(p);
  if (it == g_allocs.begin()) return false;
  --it;
  if (p >= it->first && p < it->first + it->second) {
    if (avail) *avail = it->first + it->second - p;
    return true;
  }
  return false;
}

int param_count(const std::string& name) {
  std::string spec = env("FAKE_CUDA_PARAMS");
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t colon = item.rfind(':');
    if (colon != std::string::npos && item.substr(0, colon) == name) return std::atoi(item.c_str() + colon + 1);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return -1;
}

CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned shared, void** params, unsigned cluster) {
  if (f == nullptr || gx == 0 || gy == 0 || gz == 0 || bx == 0 || bx % 32 != 0 || by != 1 || bz != 1) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* fn = reinterpret_cast<FakeFunction*>(f);
  int n = param_count(fn->name);
  if (n >= 0 && params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::string line = "LAUNCH " + fn->name + " grid=" + std::to_string(gx) + "," + std::to_string(gy) + "," +
                     std::to_string(gz) + " block=" + std::to_string(bx) + ",1,1 shared=" + std::to_string(shared) +
                     " cluster=" + std::to_string(cluster) + " params=";
  std::lock_guard<std::mutex> lock(g_mu);
  for (int i = 0; i < n; ++i) {
    uint64_t slot = 0;
    std::memcpy(&slot, params[i], 8);
    char buf[64];
    size_t avail = 0;
    if (slot == 0) {
      std::snprintf(buf, sizeof buf, "N");
    } else if (inside(static_cast<uintptr_t>(slot), &avail)) {
      uint64_t h = 1469598103934665603ull;
      const uint8_t* p = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(slot));
      for (size_t k = 0; k < 16 && k < avail; ++k) h = (h ^ p[k]) * 1099511628211ull;
      std::snprintf(buf, sizeof buf, "D%016llx", static_cast<unsigned long long>(h));
    } else {
      std::snprintf(buf, sizeof buf, "X%016llx", static_cast<unsigned long long>(slot));
    }
    line += (i ? "," : "") + std::string(buf);
  }
  append_to_log(line);
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult CUDAAPI cuInit(unsigned int) {
  return devices() > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}
CUresult CUDAAPI cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorName(CUresult e, const char** s) {
  *s = e == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult e, const char** s) {
  *s = e == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory (fake driver)" : "fake driver error";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int* n) {
  *n = devices();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal < 0 || ordinal >= devices()) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  const char* cc = std::getenv("FAKE_CUDA_CC");
  int major = 9, minor = 0;
  if (cc) std::sscanf(cc, "%d.%d", &major, &minor);
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = minor; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    default: *v = 0;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice) {
  std::snprintf(name, static_cast<size_t>(len), "Fake GPU");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) {
  *c = reinterpret_cast<CUcontext>(&g_ctx_dummy);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxPushCurrent(CUcontext c) { return c ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }
CUresult CUDAAPI cuCtxPopCurrent(CUcontext* c) {
  if (c) *c = reinterpret_cast<CUcontext>(&g_ctx_dummy);
  return CUDA_SUCCESS;
}
// Like the real driver, which gets no size with the image: follows the ELF header's offsets and counts without
// bounds (section headers, then every section's bytes), so a corrupt cubin that reaches it reads out of bounds
// here too (a crash, or an AddressSanitizer report) instead of passing silently.
static uint64_t touch_elf(const uint8_t* p) {
  uint64_t shoff = 0;
  uint16_t shnum = 0;
  std::memcpy(&shoff, p + 40, 8);
  std::memcpy(&shnum, p + 60, 2);
  uint64_t sum = 0;
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint8_t* sh = p + shoff + 64ull * i;
    uint32_t type = 0;
    uint64_t off = 0, size = 0;
    std::memcpy(&type, sh + 4, 4);
    std::memcpy(&off, sh + 24, 8);
    std::memcpy(&size, sh + 32, 8);
    if (type == 8) continue;  // SHT_NOBITS
    for (uint64_t k = 0; k < size; k += 64) sum += p[off + k];
    if (size) sum += p[off + size - 1];
  }
  return sum;
}
CUresult CUDAAPI cuModuleLoadData(CUmodule* m, const void* image) {
  if (image == nullptr || std::memcmp(image, "\x7f" "ELF", 4) != 0) return CUDA_ERROR_INVALID_IMAGE;
  static volatile uint64_t sink = 0;
  sink = sink + touch_elf(static_cast<const uint8_t*>(image));
  *m = reinterpret_cast<CUmodule>(new int(1));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule m) {
  delete reinterpret_cast<int*>(m);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  static std::mutex mu;
  static std::map<std::string, FakeFunction*> fns;  // kept for the process lifetime
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = fns[name];
  if (!slot) slot = new FakeFunction{name};
  *f = reinterpret_cast<CUfunction>(slot);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute a, int v) {
  return (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && v > 232448) ? CUDA_ERROR_INVALID_VALUE
                                                                               : CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned shared, CUstream, void** params, void** extra) {
  if (extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  return launch(f, gx, gy, gz, bx, by, bz, shared, params, 1);
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* cfg, CUfunction f, void** params, void** extra) {
  if (cfg == nullptr || extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  unsigned cluster = 1;
  for (unsigned i = 0; i < cfg->numAttrs; ++i) {
    if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      cluster = cfg->attrs[i].value.clusterDim.x;
      if (cfg->gridDimX % cluster != 0) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
  }
  return launch(f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ,
                cfg->sharedMemBytes, params, cluster);
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t n) {
  std::lock_guard<std::mutex> lock(g_mu);
  const char* oom = std::getenv("FAKE_CUDA_OOM_AFTER");
  if (oom && g_alloc_calls >= std::atol(oom)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (n == 0) return CUDA_ERROR_INVALID_VALUE;
  ++g_alloc_calls;
  void* m = std::calloc(1, n);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  g_allocs[reinterpret_cast<uintptr_t>(m)] = n;
  *p = reinterpret_cast<CUdeviceptr>(m);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_allocs.find(static_cast<uintptr_t>(p));
  if (it == g_allocs.end()) return CUDA_ERROR_INVALID_VALUE;
  g_allocs.erase(it);
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemGetInfo(size_t* free_b, size_t* total) {
  *free_b = *total = size_t(1) << 34;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostAlloc(void** p, size_t n, unsigned int) {
  *p = std::calloc(1, n ? n : 1);
  return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuMemFreeHost(void* p) {
  std::free(p);
  return CUDA_SUCCESS;
}
static CUresult check_dev(CUdeviceptr p, size_t n) {
  std::lock_guard<std::mutex> lock(g_mu);
  size_t avail = 0;
  if (n == 0) return CUDA_SUCCESS;
  if (!inside(static_cast<uintptr_t>(p), &avail) || avail < n) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void* s, size_t n) {
  if (CUresult r = check_dev(d, n)) return r;
  std::memcpy(reinterpret_cast<void*>(d), s, n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoH(void* d, CUdeviceptr s, size_t n) {
  if (CUresult r = check_dev(s, n)) return r;
  std::memcpy(d, reinterpret_cast<void*>(s), n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream) { return cuMemcpyHtoD(d, s, n); }
CUresult CUDAAPI cuMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream) { return cuMemcpyDtoH(d, s, n); }
CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute a, CUdeviceptr p) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (a != CU_POINTER_ATTRIBUTE_MEMORY_TYPE || !inside(static_cast<uintptr_t>(p), nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int) { return new_handle(s, 2); }
CUresult CUDAAPI cuStreamDestroy(CUstream s) { return delete_handle(s); }
CUresult CUDAAPI cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamWaitEvent(CUstream, CUevent e, unsigned int) {
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  append_to_log("WAIT");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int) { return new_handle(e, 3); }
CUresult CUDAAPI cuEventDestroy(CUevent e) { return delete_handle(e); }
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream) { return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }

}  // extern "C"
