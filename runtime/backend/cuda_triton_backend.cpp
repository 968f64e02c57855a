// The ExecuTorch BackendInterface for CudaTritonBackend (the Python BackendDetails class of the same name
// writes the blobs this reads). Registered when the shared library is loaded.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/platform/log.h>

#include "backend/cuda_triton_backend.h"
#include "backend/delegate.h"
#include "backend/device_runtime.h"
#include "blob/blob.h"
#include "cuda/driver.h"

namespace cuda_triton {

using executorch::runtime::ArrayRef;
using executorch::runtime::Backend;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;
using executorch::runtime::Span;

namespace {

std::mutex g_error_mutex;
std::string g_last_error;

void remember(const std::string& msg) {
  std::lock_guard<std::mutex> lock(g_error_mutex);
  g_last_error = msg;
}

Error to_error(Code code) {
  switch (code) {
    case Code::kOk:
      return Error::Ok;
    case Code::kInvalidProgram:
      return Error::InvalidProgram;
    case Code::kIncompatible:
      return Error::DelegateInvalidCompatibility;
    case Code::kNotSupported:
      return Error::NotSupported;
    case Code::kOutOfMemory:
      return Error::DelegateMemoryAllocationFailed;
    case Code::kInvalidArgument:
      return Error::InvalidArgument;
    case Code::kDriver:
    case Code::kDeviceFault:
    case Code::kInternal:
      return Error::Internal;
  }
  return Error::Internal;
}

Error report(const char* where, const Status& st) {
  const std::string msg = std::string("CudaTritonBackend ") + where + ": " + st.message();
  ET_LOG(Error, "%s", msg.c_str());
  remember(msg);
  return to_error(st.code());
}

// ExecuTorch 1.5.1 hands over a compile spec whose key or value is missing from a (corrupted) program as the
// address of a field of a null flatbuffer object: a small non-null number. Such a spec is skipped.
bool plausible_pointer(const void* p) {
  return reinterpret_cast<uintptr_t>(p) >= 4096;
}

// The delegate's options from the program's compile specs: "target_device" ("cuda" or "cuda:N") means its inputs
// and outputs are planned in device memory on that device; absent, they are host memory and device 0 runs it.
DelegateOptions options_from_specs(ArrayRef<CompileSpec> specs) {
  DelegateOptions options;
  for (const CompileSpec& s : specs) {
    if (!plausible_pointer(s.key) || std::strcmp(s.key, "target_device") != 0 || !plausible_pointer(s.value.buffer)) {
      continue;
    }
    const std::string v(static_cast<const char*>(s.value.buffer), s.value.nbytes);
    if (v.rfind("cuda", 0) != 0) {
      continue;
    }
    options.io_on_device = true;
    const size_t colon = v.find(':');
    if (colon != std::string::npos) {
      char* end = nullptr;
      const long n = std::strtol(v.c_str() + colon + 1, &end, 10);
      if (end != v.c_str() + colon + 1 && n >= 0 && n < 1024) {
        options.device = static_cast<int>(n);
      }
    }
  }
  return options;
}

class CudaTritonBackendImpl final : public BackendInterface {
 public:
  bool is_available() const override {
    std::string why;
    if (!cuda_available(&why)) {
      remember("CudaTritonBackend is not available: " + why);
      ET_LOG(Error, "CudaTritonBackend is not available: %s", why.c_str());
      return false;
    }
    return true;
  }

  Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                               ArrayRef<CompileSpec> compile_specs) const override {
    try {
      if (processed == nullptr) {
        return report("init", Status(Code::kInvalidProgram, "no delegate blob"));
      }
      Blob blob;
      Status st = parse_blob(processed->data(), processed->size(), &blob);
      if (!st.ok()) {
        return report("init", st);
      }
      processed->Free();  // everything needed was copied out
      std::unique_ptr<DelegateProgram> program;
      st = DelegateProgram::create(std::move(blob), context.get_named_data_map(), options_from_specs(compile_specs),
                                   &program);
      if (!st.ok()) {
        return report("init", st);
      }
      return static_cast<DelegateHandle*>(program.release());
    } catch (const std::bad_alloc&) {
      return report("init", Status(Code::kOutOfMemory, "out of host memory"));
    } catch (const std::exception& e) {
      return report("init", Status(Code::kInternal, e.what()));
    }
  }

  Error execute(BackendExecutionContext& /*context*/, DelegateHandle* handle, Span<EValue*> args) const override {
    if (handle == nullptr) {
      return report("execute", Status(Code::kInternal, "null delegate handle"));
    }
    try {
      Status st = static_cast<DelegateProgram*>(handle)->execute(args);
      return st.ok() ? Error::Ok : report("execute", st);
    } catch (const std::bad_alloc&) {
      return report("execute", Status(Code::kOutOfMemory, "out of host memory"));
    } catch (const std::exception& e) {
      return report("execute", Status(Code::kInternal, e.what()));
    }
  }

  void destroy(DelegateHandle* handle) const override {
    delete static_cast<DelegateProgram*>(handle);
  }
};

CudaTritonBackendImpl g_backend;
Backend g_backend_entry{kBackendName, &g_backend};
const Error g_registration = executorch::runtime::register_backend(g_backend_entry);

}  // namespace

bool backend_registered() {
  return g_registration == Error::Ok;
}

}  // namespace cuda_triton

extern "C" {

const char* cuda_triton_backend_status(void) {
  static std::string status;
  std::string why;
  if (!cuda_triton::backend_registered()) {
    status = "CudaTritonBackend could not be registered (a backend with that name exists or the registry is full)";
  } else if (!cuda_triton::cuda_available(&why)) {
    status = why;
  } else {
    status = "ok";
  }
  return status.c_str();
}

const char* cuda_triton_backend_last_error(void) {
  static std::string copy;
  std::lock_guard<std::mutex> lock(cuda_triton::g_error_mutex);
  copy = cuda_triton::g_last_error;
  return copy.c_str();
}

int cuda_triton_backend_registered(void) {
  return cuda_triton::backend_registered() ? 1 : 0;
}

int cuda_triton_backend_device_memory(int device, unsigned long long* free_bytes, unsigned long long* total_bytes) {
  cuda_triton::DeviceRuntime* rt = nullptr;
  if (!cuda_triton::DeviceRuntime::get(device, &rt).ok()) {
    return -1;
  }
  cuda_triton::ScopedContext scope(rt->context());
  size_t free_b = 0, total_b = 0;
  if (!scope.status().ok() || cuda_triton::Driver::get().cuMemGetInfo(&free_b, &total_b) != CUDA_SUCCESS) {
    return -1;
  }
  *free_bytes = free_b;
  *total_bytes = total_b;
  return 0;
}

}  // extern "C"
