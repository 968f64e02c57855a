// Integrity of what the program hands the GPU: every cubin is checked against its content address (its
// named-data key names the SHA-256 of the image) before the driver sees it, and every constant against the
// SHA-256 the blob records for it before it is uploaded, so a corrupted .pte is refused at init instead of
// faulting on the device or computing with wrong weights (docs/blob_format.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "blob/blob.h"
#include "common/status.h"

namespace cuda_triton {

// The content address of a cubin: "cuda_triton/cubin/sm<arch>/" + the first 40 hex digits of its SHA-256.
std::string cubin_content_address(uint32_t arch, const uint8_t* image, size_t size);

// Ok when `image` is the cubin `kernel.cubin_key` names; otherwise a kInvalidProgram error naming the kernel,
// its key and the digest found.
Status verify_cubin(const KernelRecord& kernel, const uint8_t* image, size_t size);

// Ok when `data` hashes to the SHA-256 the blob records for `constant`; otherwise a kInvalidProgram error naming
// the constant, the digest recorded and the digest found.
Status verify_constant(const ConstantRecord& constant, const void* data, size_t size);

}  // namespace cuda_triton
