#include "backend/launch.h"

#include <cstring>
#include <string>

#include "cuda/handles.h"

namespace cuda_triton {

void PreparedLaunch::bind_params() {
  params.resize(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    params[i] = &slots[i];
  }
}

Status enqueue(const PreparedLaunch& pl, CUstream stream) {
  const Driver& d = Driver::get();
  const KernelRecord& k = *pl.kernel;
  const unsigned int block = 32u * k.num_warps;
  CUresult r;
  if (k.num_ctas > 1 || k.cooperative || k.pdl) {
    CUlaunchAttribute attrs[4];
    unsigned int n = 0;
    if (k.num_ctas > 1) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[n].value.clusterDim.x = k.num_ctas;
      attrs[n].value.clusterDim.y = 1;
      attrs[n].value.clusterDim.z = 1;
      ++n;
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
      attrs[n].value.clusterSchedulingPolicyPreference = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
      ++n;
    }
    if (k.cooperative) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      attrs[n].value.cooperative = 1;
      ++n;
    }
    if (k.pdl) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[n].value.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    CUlaunchConfig cfg;
    std::memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = pl.grid[0] * k.num_ctas;
    cfg.gridDimY = pl.grid[1];
    cfg.gridDimZ = pl.grid[2];
    cfg.blockDimX = block;
    cfg.blockDimY = 1;
    cfg.blockDimZ = 1;
    cfg.sharedMemBytes = k.shared;
    cfg.hStream = stream;
    cfg.attrs = attrs;
    cfg.numAttrs = n;
    r = d.cuLaunchKernelEx(&cfg, pl.function, const_cast<void**>(pl.params.data()), nullptr);
  } else {
    r = d.cuLaunchKernel(pl.function, pl.grid[0], pl.grid[1], pl.grid[2], block, 1, 1, k.shared, stream,
                         const_cast<void**>(pl.params.data()), nullptr);
  }
  if (r != CUDA_SUCCESS) {
    return Status(code_of(r), "launching " + k.name + " (op " + std::to_string(pl.op) + ") failed: " + d.describe(r));
  }
  return Status::Ok();
}

}  // namespace cuda_triton
