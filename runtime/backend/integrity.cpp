#include "backend/integrity.h"

#include <algorithm>

#include "common/sha256.h"

namespace cuda_triton {

namespace {
constexpr const char* kCubinKeyPrefix = "cuda_triton/cubin/sm";
constexpr size_t kAddressHexDigits = 40;
}  // namespace

std::string cubin_content_address(uint32_t arch, const uint8_t* image, size_t size) {
  return kCubinKeyPrefix + std::to_string(arch) + "/" +
         Sha256::hex(Sha256::of(image, size)).substr(0, kAddressHexDigits);
}

Status verify_cubin(const KernelRecord& kernel, const uint8_t* image, size_t size) {
  const std::string found = cubin_content_address(kernel.arch, image, size);
  if (found == kernel.cubin_key) {
    return Status::Ok();
  }
  return Status(Code::kInvalidProgram,
                "kernel " + kernel.name + " (sm_" + std::to_string(kernel.arch) + "): cubin " + kernel.cubin_key +
                    " fails its integrity check: its bytes hash to " + found +
                    " (SHA-256); the program is corrupted, so the kernel is not loaded");
}

Status verify_constant(const ConstantRecord& constant, const void* data, size_t size) {
  const Sha256::Digest found = Sha256::of(data, size);
  if (std::equal(found.begin(), found.end(), constant.sha256.begin())) {
    return Status::Ok();
  }
  Sha256::Digest recorded;
  std::copy(constant.sha256.begin(), constant.sha256.end(), recorded.begin());
  return Status(Code::kInvalidProgram, "constant " + constant.key + " fails its integrity check: its " +
                                           std::to_string(size) + " bytes hash to " + Sha256::hex(found) +
                                           " (SHA-256), the blob records " + Sha256::hex(recorded) +
                                           "; the program or its weights file is corrupted, so it is not uploaded");
}

}  // namespace cuda_triton
