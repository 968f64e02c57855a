// The host memory page-locked through cuda_triton_backend_pin_host_memory, remembered so that the CUDA allocator's
// copies know when their host side is pinned. A copy from pinned memory is truly asynchronous (the DMA reads the
// bytes after the call returns), unlike one from pageable memory, whose bytes are staged before it returns; the
// allocator then waits for the copy, so ExecuTorch may reuse or overwrite the source bytes as soon as it returns.
#pragma once

#include <cstddef>

namespace cuda_triton {

// Records [ptr, ptr + bytes) as pinned (called after a successful cuMemHostRegister).
void add_host_pin(const void* ptr, size_t bytes);
// Forgets the pinned range that starts at `ptr`; false if there is none.
bool remove_host_pin(const void* ptr);
// Whether [ptr, ptr + bytes) lies inside one pinned range.
bool host_range_pinned(const void* ptr, size_t bytes);

}  // namespace cuda_triton
