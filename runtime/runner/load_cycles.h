// The runner's --load_cycles: the program loaded, its method initialised, executed once and destroyed, over and
// over, with device and host memory sampled along the way, so that a leak per load shows as growth
// (scripts/gpu_memory_cycles.py runs it on a GPU).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <executorch/runtime/backend/backend_options_map.h>
#include <executorch/runtime/core/evalue.h>

namespace cuda_triton::runner {

struct LoadCycleOptions {
  std::string model_path;
  std::string data_path;  // empty: none
  std::string method_name = "forward";
  int64_t cycles = 0;
  const executorch::runtime::LoadBackendOptionsMap* backend_options = nullptr;
};

// Runs the cycles, printing "load cycle <i>: device used <bytes> bytes, host rss <bytes> bytes" after the first
// cycle, every tenth of the way and after the last. False with `error` set when a cycle fails.
bool run_load_cycles(const LoadCycleOptions& options, const std::vector<executorch::runtime::EValue>& inputs,
                     std::string* error);

}  // namespace cuda_triton::runner
