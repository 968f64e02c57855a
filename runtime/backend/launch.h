// One kernel launch of a delegate, prepared at init: the function, grid, block, shared memory, launch
// attributes, and an argument buffer whose constant slots (weights, scalars, scratch) are filled once. Execute
// only writes the value slots (tensor addresses) and enqueues it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "blob/blob.h"
#include "common/status.h"
#include "cuda/driver.h"

namespace cuda_triton {

struct PreparedLaunch {
  uint32_t op = 0;  // index of the op it belongs to
  const KernelRecord* kernel = nullptr;
  CUfunction function = nullptr;
  uint32_t grid[3] = {1, 1, 1};  // before the num_ctas multiply
  std::vector<uint64_t> slots;   // one 8-byte slot per kernel parameter (+ 2 scratch pointers)
  std::vector<void*> params;     // pointers into `slots`, what the driver reads
  std::vector<std::pair<size_t, uint32_t>> value_slots;  // (slot, value index): tensor addresses

  // Fills `params` from `slots` (call once `slots` has its final size).
  void bind_params();
};

// Enqueues `launch` on `stream` with the arguments in its slots (grid x num_ctas with a cluster when num_ctas > 1,
// the cooperative / PDL attributes when the kernel is flagged). Allocates nothing.
Status enqueue(const PreparedLaunch& launch, CUstream stream);

}  // namespace cuda_triton
