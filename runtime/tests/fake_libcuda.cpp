// A fake CUDA driver (libcuda.so.1) for CPU-only tests of the runtime's init()/execute() paths.
//
// "Device" memory is host memory; modules accept any image that starts with the ELF magic; launches run
// nothing but are checked (block = multiple of 32, grid >= 1, params present) and logged. Streams can be
// captured into graphs (kernels and async copies become nodes, kernel parameters are copied at capture as the
// real driver does), graphs instantiated, updated and replayed. Never install or preload this anywhere near a
// real GPU: it is only put on LD_LIBRARY_PATH by the runtime tests (tests/test_runtime_*.py).
//
// Environment:
//   FAKE_CUDA_CC=9.0              compute capability of the single device (default 9.0)
//   FAKE_CUDA_DEVICES=1           number of devices (0: cuInit fails with CUDA_ERROR_NO_DEVICE)
//   FAKE_CUDA_MEMORY_BYTES=N      device memory size (default 16 GiB); cuMemGetInfo reports it minus what is
//                                 allocated, cuMemAlloc beyond it fails with CUDA_ERROR_OUT_OF_MEMORY
//   FAKE_CUDA_OOM_AFTER=N         cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY after N successful calls
//   FAKE_CUDA_ALLOC_FILL=B        every byte cuMemAlloc hands out is B (default 0), as a real GPU's memory holds
//                                 whatever was there: what must be zero has to be zeroed
//   FAKE_CUDA_FAULT_AT_LAUNCH=N   the N-th kernel to run (0-based, direct or replayed) faults: from then on every
//                                 call that touches the context returns CUDA_ERROR_ILLEGAL_ADDRESS (sticky)
//   FAKE_CUDA_FAIL_LAUNCH=N       the N-th launch call (0-based) fails at once with
//                                 CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (an error that leaves the context usable)
//   FAKE_CUDA_CAPTURE_FAIL=1      cuStreamEndCapture fails (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
//   FAKE_CUDA_GRAPH_UPDATE_FAIL=1 cuGraphExecKernelNodeSetParams fails (CUDA_ERROR_NOT_SUPPORTED)
//   FAKE_CUDA_KERNEL_NS=1000      GPU time each kernel takes on the fake clock that timing events read
//   FAKE_CUDA_PARAMS=k:n,...      number of kernel parameters per kernel name (for the launch log)
//   FAKE_CUDA_LOG=path            append one line per event:
//       LAUNCH <name> grid=x,y,z block=x,y,z shared=S cluster=C params=<p0>,<p1>,... [pdl=1] [via=graph]
//         each param is N (zero), D<hash> (an address inside a fake device allocation; hash of the first 16 bytes
//         there) or X<hex of the 8-byte slot>; pdl=1: launched with programmatic stream serialization
//       WAIT                      a stream waits on an event (a fence, e.g. for device-resident inputs)
//       COPY <HtoD|DtoH|DtoD> <bytes> [via=graph] [pinned]   an asynchronous copy (pinned: its host side lies in
//                                 memory page-locked with cuMemHostRegister)
//       MEMSET <bytes> <value> [via=graph]   cuMemsetD8Async
//       PIN <bytes>, UNPIN <bytes>   cuMemHostRegister, cuMemHostUnregister
//       SYNC                      cuStreamSynchronize
//       CAPTURE <ok|failed> <nodes>, GRAPH_LAUNCH, GRAPH_UPDATE <kernel name>
//       FAIL <function> <CUresult>   any call that returns an error
#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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

// Every error a function returns is logged, so tests can require runs without failing driver calls.
CUresult result(const char* function, CUresult r) {
  if (r != CUDA_SUCCESS) {
    append_to_log(std::string("FAIL ") + function + " " + std::to_string(static_cast<int>(r)));
  }
  return r;
}
#define RETURN(r) return result(__func__, (r))

const char* env(const char* k) {
  const char* v = std::getenv(k);
  return v ? v : "";
}

long env_long(const char* k, long fallback) {
  const char* v = std::getenv(k);
  return v && *v ? std::atol(v) : fallback;
}

int devices() {
  return static_cast<int>(env_long("FAKE_CUDA_DEVICES", 1));
}

std::recursive_mutex g_mu;
std::map<uintptr_t, size_t> g_allocs;  // base -> size
size_t g_allocated = 0;
long g_alloc_calls = 0;
int g_ctx_dummy = 0;
std::atomic<int> g_sticky{CUDA_SUCCESS};  // a fault poisons the context: every later call returns it
long g_kernels_run = 0;
uint64_t g_gpu_clock_ns = 0;  // advanced by every kernel that runs

CUresult sticky() {
  return static_cast<CUresult>(g_sticky.load());
}

struct FakeFunction {
  std::string name;
};

struct FakeNode {
  enum Kind { kKernel, kCopy, kMemset } kind = kKernel;
  // kernel
  FakeFunction* fn = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared = 0;
  unsigned cluster = 1;
  bool pdl = false;
  std::vector<uint64_t> params;
  std::vector<void*> param_ptrs;  // into `params`, for cuGraphKernelNodeGetParams
  // copy (memset: dst, bytes and value)
  const char* direction = "";
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  unsigned char value = 0;
};

struct FakeGraph {
  std::vector<std::unique_ptr<FakeNode>> nodes;
};

struct FakeGraphExec {
  std::vector<FakeNode> nodes;  // copies of the graph's nodes, in capture order
  std::vector<const FakeNode*> sources;
};

struct FakeStream {
  FakeGraph* capture = nullptr;  // non-null while capturing
  CUgraphNode last = nullptr;    // the node the next captured one depends on
};

struct FakeEvent {
  unsigned flags = 0;
  bool recorded = false;
  uint64_t time_ns = 0;
};

std::map<CUstream, std::unique_ptr<FakeStream>> g_streams;  // CU_STREAM_LEGACY/PER_THREAD/0 are not in it

FakeStream* stream_of(CUstream s) {
  auto it = g_streams.find(s);
  return it == g_streams.end() ? nullptr : it->second.get();
}

FakeStream* capturing(CUstream s) {
  FakeStream* fs = stream_of(s);
  return fs != nullptr && fs->capture != nullptr ? fs : nullptr;
}

void add_node(FakeStream* fs, std::unique_ptr<FakeNode> node) {
  fs->last = reinterpret_cast<CUgraphNode>(node.get());
  fs->capture->nodes.push_back(std::move(node));
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

std::string describe_param(uint64_t slot) {
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
  return buf;
}

// Runs (logs) one kernel node: the fake GPU clock advances and the launch may be the one that faults.
void run_kernel(const FakeNode& k, bool replayed) {
  std::string line = "LAUNCH " + k.fn->name + " grid=" + std::to_string(k.grid[0]) + "," + std::to_string(k.grid[1]) +
                     "," + std::to_string(k.grid[2]) + " block=" + std::to_string(k.block[0]) +
                     ",1,1 shared=" + std::to_string(k.shared) + " cluster=" + std::to_string(k.cluster) + " params=";
  for (size_t i = 0; i < k.params.size(); ++i) {
    line += (i ? "," : "") + describe_param(k.params[i]);
  }
  if (k.pdl) line += " pdl=1";
  if (replayed) line += " via=graph";
  append_to_log(line);
  g_gpu_clock_ns += static_cast<uint64_t>(env_long("FAKE_CUDA_KERNEL_NS", 1000));
  if (g_kernels_run++ == env_long("FAKE_CUDA_FAULT_AT_LAUNCH", -1)) {
    g_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
  }
}

CUresult check_dev(CUdeviceptr p, size_t n) {
  size_t avail = 0;
  if (n == 0) return CUDA_SUCCESS;
  if (!inside(static_cast<uintptr_t>(p), &avail) || avail < n) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// Host ranges page-locked with cuMemHostRegister: start -> bytes.
std::map<uintptr_t, size_t> g_registered;

bool registered(const void* p, size_t n) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = g_registered.upper_bound(a);
  if (it == g_registered.begin()) return false;
  --it;
  return a >= it->first && a + n <= it->first + it->second;
}

// An asynchronous copy: done at once, or recorded while the stream captures.
CUresult async_copy(const char* direction, void* dst, const void* src, size_t n, CUstream s) {
  if (FakeStream* fs = capturing(s)) {
    auto node = std::make_unique<FakeNode>();
    node->kind = FakeNode::kCopy;
    node->direction = direction;
    node->dst = dst;
    node->src = src;
    node->bytes = n;
    add_node(fs, std::move(node));
    return CUDA_SUCCESS;
  }
  std::memcpy(dst, src, n);
  const void* host = direction[0] == 'H' ? src : direction[3] == 'H' ? dst : nullptr;
  append_to_log(std::string("COPY ") + direction + " " + std::to_string(n) +
                (host != nullptr && registered(host, n) ? " pinned" : ""));
  return CUDA_SUCCESS;
}

CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned shared, void** params, unsigned cluster, CUstream s, bool pdl = false) {
  if (f == nullptr || gx == 0 || gy == 0 || gz == 0 || bx == 0 || bx % 32 != 0 || by != 1 || bz != 1) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  static long launch_calls = 0;
  if (launch_calls++ == env_long("FAKE_CUDA_FAIL_LAUNCH", -1)) {
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  }
  auto* fn = reinterpret_cast<FakeFunction*>(f);
  int n = param_count(fn->name);
  if (n >= 0 && params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto node = std::make_unique<FakeNode>();
  node->fn = fn;
  node->grid[0] = gx;
  node->grid[1] = gy;
  node->grid[2] = gz;
  node->block[0] = bx;
  node->shared = shared;
  node->cluster = cluster;
  node->pdl = pdl;
  for (int i = 0; i < n; ++i) {  // the values, as the driver copies them at the call
    uint64_t slot = 0;
    std::memcpy(&slot, params[i], 8);
    node->params.push_back(slot);
  }
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (FakeStream* fs = capturing(s)) {
    add_node(fs, std::move(node));
    return CUDA_SUCCESS;
  }
  run_kernel(*node, false);
  return CUDA_SUCCESS;
}

const char* error_name(CUresult e) {
  switch (e) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    default: return "CUDA_ERROR_FAKE";
  }
}

}  // namespace

extern "C" {

CUresult CUDAAPI cuInit(unsigned int) {
  RETURN(devices() > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE);
}
CUresult CUDAAPI cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorName(CUresult e, const char** s) {
  *s = error_name(e);
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
  if (ordinal < 0 || ordinal >= devices()) RETURN(CUDA_ERROR_INVALID_DEVICE);
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
CUresult CUDAAPI cuCtxPushCurrent(CUcontext c) { RETURN(c ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT); }
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
  if (sticky()) RETURN(sticky());
  if (image == nullptr || std::memcmp(image, "\x7f" "ELF", 4) != 0) RETURN(CUDA_ERROR_INVALID_IMAGE);
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
  RETURN((a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && v > 232448) ? CUDA_ERROR_INVALID_VALUE
                                                                               : CUDA_SUCCESS);
}
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
  if (sticky()) RETURN(sticky());
  if (extra != nullptr) RETURN(CUDA_ERROR_INVALID_VALUE);
  RETURN(launch(f, gx, gy, gz, bx, by, bz, shared, params, 1, s));
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* cfg, CUfunction f, void** params, void** extra) {
  if (sticky()) RETURN(sticky());
  if (cfg == nullptr || extra != nullptr) RETURN(CUDA_ERROR_INVALID_VALUE);
  unsigned cluster = 1;
  bool pdl = false;
  for (unsigned i = 0; i < cfg->numAttrs; ++i) {
    if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      cluster = cfg->attrs[i].value.clusterDim.x;
      if (cfg->gridDimX % cluster != 0) RETURN(CUDA_ERROR_INVALID_CLUSTER_SIZE);
    }
    if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) {
      pdl = cfg->attrs[i].value.programmaticStreamSerializationAllowed != 0;
    }
  }
  RETURN(launch(f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ,
                cfg->sharedMemBytes, params, cluster, cfg->hStream, pdl));
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t n) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (sticky()) RETURN(sticky());
  const char* oom = std::getenv("FAKE_CUDA_OOM_AFTER");
  if (oom && g_alloc_calls >= std::atol(oom)) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
  if (n == 0) RETURN(CUDA_ERROR_INVALID_VALUE);
  const size_t total = static_cast<size_t>(env_long("FAKE_CUDA_MEMORY_BYTES", 1L << 34));
  if (n > total - std::min(total, g_allocated)) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
  ++g_alloc_calls;
  void* m = std::malloc(n);
  if (!m) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
  std::memset(m, static_cast<int>(env_long("FAKE_CUDA_ALLOC_FILL", 0) & 0xff), n);
  g_allocs[reinterpret_cast<uintptr_t>(m)] = n;
  g_allocated += n;
  *p = reinterpret_cast<CUdeviceptr>(m);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  auto it = g_allocs.find(static_cast<uintptr_t>(p));
  if (it == g_allocs.end()) RETURN(CUDA_ERROR_INVALID_VALUE);
  g_allocated -= it->second;
  g_allocs.erase(it);
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemGetInfo(size_t* free_b, size_t* total) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  *total = static_cast<size_t>(env_long("FAKE_CUDA_MEMORY_BYTES", 1L << 34));
  *free_b = *total - std::min(*total, g_allocated);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostAlloc(void** p, size_t n, unsigned int) {
  *p = std::calloc(1, n ? n : 1);
  RETURN(*p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY);
}
CUresult CUDAAPI cuMemFreeHost(void* p) {
  std::free(p);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostRegister_v2(void* p, size_t n, unsigned int) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (p == nullptr || n == 0) RETURN(CUDA_ERROR_INVALID_VALUE);
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (const auto& [start, bytes] : g_registered) {
    if (a < start + bytes && start < a + n) RETURN(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  }
  g_registered[a] = n;
  append_to_log("PIN " + std::to_string(n));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostUnregister(void* p) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  auto it = g_registered.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_registered.end()) RETURN(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  append_to_log("UNPIN " + std::to_string(it->second));
  g_registered.erase(it);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void* s, size_t n) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (sticky()) RETURN(sticky());
  if (CUresult r = check_dev(d, n)) RETURN(r);
  std::memcpy(reinterpret_cast<void*>(d), s, n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoH(void* d, CUdeviceptr s, size_t n) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (sticky()) RETURN(sticky());
  if (CUresult r = check_dev(s, n)) RETURN(r);
  std::memcpy(d, reinterpret_cast<void*>(s), n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream st) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (sticky()) RETURN(sticky());
  if (CUresult r = check_dev(d, n)) RETURN(r);
  RETURN(async_copy("HtoD", reinterpret_cast<void*>(d), s, n, st));
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream st) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (sticky()) RETURN(sticky());
  if (CUresult r = check_dev(s, n)) RETURN(r);
  RETURN(async_copy("DtoH", d, reinterpret_cast<const void*>(s), n, st));
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (sticky()) RETURN(sticky());
  if (CUresult r = check_dev(s, n)) RETURN(r);
  if (CUresult r = check_dev(d, n)) RETURN(r);
  RETURN(async_copy("DtoD", reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), n, st));
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char value, size_t n, CUstream st) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (sticky()) RETURN(sticky());
  if (CUresult r = check_dev(d, n)) RETURN(r);
  if (FakeStream* fs = capturing(st)) {
    auto node = std::make_unique<FakeNode>();
    node->kind = FakeNode::kMemset;
    node->dst = reinterpret_cast<void*>(d);
    node->bytes = n;
    node->value = value;
    add_node(fs, std::move(node));
    return CUDA_SUCCESS;
  }
  std::memset(reinterpret_cast<void*>(d), value, n);
  append_to_log("MEMSET " + std::to_string(n) + " " + std::to_string(value));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  auto fs = std::make_unique<FakeStream>();
  *s = reinterpret_cast<CUstream>(fs.get());
  g_streams[*s] = std::move(fs);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (g_streams.erase(s) == 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (FakeStream* fs = capturing(s)) {  // illegal while capturing: the capture is invalidated
    fs->capture->nodes.clear();
    RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  }
  append_to_log("SYNC");
  RETURN(sticky());
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream, CUevent e, unsigned int) {
  if (sticky()) RETURN(sticky());
  if (e == nullptr) RETURN(CUDA_ERROR_INVALID_HANDLE);
  append_to_log("WAIT");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int flags) {
  auto* ev = new FakeEvent();
  ev->flags = flags;
  *e = reinterpret_cast<CUevent>(ev);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy(CUevent e) {
  delete reinterpret_cast<FakeEvent*>(e);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (sticky()) RETURN(sticky());
  if (e == nullptr) RETURN(CUDA_ERROR_INVALID_HANDLE);
  if (capturing(s) == nullptr) {
    auto* ev = reinterpret_cast<FakeEvent*>(e);
    ev->recorded = true;
    ev->time_ns = g_gpu_clock_ns;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  if (e == nullptr) RETURN(CUDA_ERROR_INVALID_HANDLE);
  RETURN(sticky());
}
CUresult CUDAAPI cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  if (sticky()) RETURN(sticky());
  auto* a = reinterpret_cast<FakeEvent*>(start);
  auto* b = reinterpret_cast<FakeEvent*>(end);
  if (a == nullptr || b == nullptr || (a->flags & CU_EVENT_DISABLE_TIMING) || (b->flags & CU_EVENT_DISABLE_TIMING)) {
    RETURN(CUDA_ERROR_INVALID_HANDLE);
  }
  if (!a->recorded || !b->recorded) RETURN(CUDA_ERROR_NOT_READY);
  *ms = static_cast<float>(static_cast<double>(b->time_ns) - static_cast<double>(a->time_ns)) / 1e6f;
  return CUDA_SUCCESS;
}

// ---- stream capture and graphs ----
CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  FakeStream* fs = stream_of(s);
  if (fs == nullptr) RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);  // the legacy/default streams
  if (fs->capture != nullptr) RETURN(CUDA_ERROR_ILLEGAL_STATE);
  fs->capture = new FakeGraph();
  fs->last = nullptr;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph* graph) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  FakeStream* fs = capturing(s);
  if (fs == nullptr) RETURN(CUDA_ERROR_ILLEGAL_STATE);
  std::unique_ptr<FakeGraph> g(fs->capture);
  fs->capture = nullptr;
  fs->last = nullptr;
  if (env_long("FAKE_CUDA_CAPTURE_FAIL", 0) != 0) {
    *graph = nullptr;
    append_to_log("CAPTURE failed 0");
    RETURN(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  }
  append_to_log("CAPTURE ok " + std::to_string(g->nodes.size()));
  *graph = reinterpret_cast<CUgraph>(g.release());
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  *status = capturing(s) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id,
                                           CUgraph* graph, const CUgraphNode** deps, const CUgraphEdgeData** edges,
                                           size_t* num_deps) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  FakeStream* fs = capturing(s);
  if (status) *status = fs ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  if (id) *id = fs ? reinterpret_cast<uintptr_t>(fs->capture) : 0;
  if (graph) *graph = fs ? reinterpret_cast<CUgraph>(fs->capture) : nullptr;
  if (deps) *deps = fs && fs->last ? &fs->last : nullptr;
  if (edges) *edges = nullptr;
  if (num_deps) *num_deps = fs && fs->last ? 1 : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
  delete reinterpret_cast<FakeGraph*>(g);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* p) {
  auto* n = reinterpret_cast<FakeNode*>(node);
  if (n == nullptr || n->kind != FakeNode::kKernel || p == nullptr) RETURN(CUDA_ERROR_INVALID_VALUE);
  n->param_ptrs.clear();
  for (uint64_t& v : n->params) n->param_ptrs.push_back(&v);
  std::memset(p, 0, sizeof(*p));
  p->func = reinterpret_cast<CUfunction>(n->fn);
  p->gridDimX = n->grid[0];
  p->gridDimY = n->grid[1];
  p->gridDimZ = n->grid[2];
  p->blockDimX = n->block[0];
  p->blockDimY = 1;
  p->blockDimZ = 1;
  p->sharedMemBytes = n->shared;
  p->kernelParams = n->param_ptrs.data();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  auto* g = reinterpret_cast<FakeGraph*>(graph);
  if (g == nullptr) RETURN(CUDA_ERROR_INVALID_VALUE);
  auto* e = new FakeGraphExec();
  for (const auto& n : g->nodes) {
    e->nodes.push_back(*n);
    e->sources.push_back(n.get());
  }
  *exec = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec exec) {
  delete reinterpret_cast<FakeGraphExec*>(exec);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphUpload(CUgraphExec exec, CUstream) {
  RETURN(exec ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}
CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                   const CUDA_KERNEL_NODE_PARAMS* p) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  auto* e = reinterpret_cast<FakeGraphExec*>(exec);
  if (e == nullptr || p == nullptr) RETURN(CUDA_ERROR_INVALID_VALUE);
  if (env_long("FAKE_CUDA_GRAPH_UPDATE_FAIL", 0) != 0) RETURN(CUDA_ERROR_NOT_SUPPORTED);
  for (size_t i = 0; i < e->sources.size(); ++i) {
    if (reinterpret_cast<CUgraphNode>(const_cast<FakeNode*>(e->sources[i])) != node) continue;
    FakeNode& n = e->nodes[i];
    if (n.kind != FakeNode::kKernel || reinterpret_cast<CUfunction>(n.fn) != p->func) {
      RETURN(CUDA_ERROR_INVALID_VALUE);  // the real driver cannot change a node's kernel across contexts either
    }
    for (size_t k = 0; k < n.params.size(); ++k) std::memcpy(&n.params[k], p->kernelParams[k], 8);
    n.grid[0] = p->gridDimX;
    n.grid[1] = p->gridDimY;
    n.grid[2] = p->gridDimZ;
    n.shared = p->sharedMemBytes;
    append_to_log("GRAPH_UPDATE " + n.fn->name);
    return CUDA_SUCCESS;
  }
  RETURN(CUDA_ERROR_INVALID_VALUE);
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec exec, CUstream s) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (sticky()) RETURN(sticky());
  auto* e = reinterpret_cast<FakeGraphExec*>(exec);
  if (e == nullptr) RETURN(CUDA_ERROR_INVALID_VALUE);
  if (capturing(s)) RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  append_to_log("GRAPH_LAUNCH");
  for (const FakeNode& n : e->nodes) {
    if (n.kind == FakeNode::kKernel) {
      run_kernel(n, true);
    } else if (n.kind == FakeNode::kMemset) {
      std::memset(n.dst, n.value, n.bytes);
      append_to_log("MEMSET " + std::to_string(n.bytes) + " " + std::to_string(n.value) + " via=graph");
    } else {
      std::memcpy(n.dst, n.src, n.bytes);
      append_to_log(std::string("COPY ") + n.direction + " " + std::to_string(n.bytes) + " via=graph");
    }
  }
  return CUDA_SUCCESS;
}

}  // extern "C"
