// A small error type for the parts of the runtime that do not depend on ExecuTorch (blob reader, driver
// wrappers). The backend maps `Code` to an ExecuTorch `Error` and logs `message`.
#pragma once

#include <string>
#include <utility>

namespace cuda_triton {

enum class Code {
  kOk = 0,
  kInvalidProgram,    // malformed or inconsistent blob
  kIncompatible,      // wrong format version, no cubin for this GPU
  kNotSupported,      // no driver / no device
  kOutOfMemory,       // device or pinned host allocation failed
  kInvalidArgument,   // tensors handed to execute() do not match the plan
  kDriver,            // any other CUDA driver failure
  kDeviceFault,       // a fault that leaves the CUDA context unusable for the rest of the process (illegal
                      // address or instruction, kernel assert, uncorrectable ECC error, ...)
  kInternal,
};

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() {
    return Status();
  }
  bool ok() const {
    return code_ == Code::kOk;
  }
  Code code() const {
    return code_;
  }
  const std::string& message() const {
    return message_;
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

#define CT_RETURN_IF_ERROR(expr)            \
  do {                                      \
    ::cuda_triton::Status _ct_st = (expr);  \
    if (!_ct_st.ok()) {                     \
      return _ct_st;                        \
    }                                       \
  } while (0)

}  // namespace cuda_triton
