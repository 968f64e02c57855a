// The runner's page-locked program I/O: the host tensors ExecuTorch's host<->device copies read and write (a
// device-planned program's inputs and outputs), registered with the CUDA driver so those copies run as DMA at full
// bus speed instead of through the driver's pageable staging. A batch-32 224x224 fp16 input (9.6 MB) copies
// several times faster this way. Best effort: a range that cannot be pinned stays pageable, which is correct.
#pragma once

#include <cstddef>
#include <vector>

#include <executorch/runtime/executor/method.h>

namespace cuda_triton::runner {

class PinnedIo {
 public:
  PinnedIo() = default;
  ~PinnedIo();
  PinnedIo(const PinnedIo&) = delete;
  PinnedIo& operator=(const PinnedIo&) = delete;

  // Pins the storage of every tensor input and output of `method` (memory the method owns: planned tensors keep
  // their addresses for the method's life). Call again only after the previous pins were released. Returns the
  // bytes pinned.
  size_t pin(const executorch::runtime::Method& method);
  // Unpins everything pinned; also done by the destructor, which must run before the method's memory is freed.
  void release();

 private:
  std::vector<void*> pinned_;
};

}  // namespace cuda_triton::runner
