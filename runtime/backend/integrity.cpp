#include "backend/integrity.h"

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

}  // namespace cuda_triton
