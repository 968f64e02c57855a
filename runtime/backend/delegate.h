// One initialised delegate (the DelegateHandle ExecuTorch passes back to execute()): the parsed blob, the
// loaded kernels of the device's arch, the weights on the device, intermediates, staging buffers and a
// stream. Everything is owned by RAII members; deleting the object frees it all.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/core/span.h>

#include "backend/device_runtime.h"
#include "backend/launch.h"
#include "blob/blob.h"
#include "common/status.h"
#include "cuda/handles.h"

namespace cuda_triton {

// What the program's compile specs say about how a delegate runs (cuda_triton_backend.cpp decodes them).
struct DelegateOptions {
  int device = 0;             // CUDA device ordinal ("target_device": "cuda:N")
  bool io_on_device = false;  // delegate inputs/outputs are planned in device memory ("target_device" present)
};

class DelegateProgram {
 public:
  // Loads the kernels of the device's arch, checks that the program fits in free device memory, uploads the
  // constants from `data_map` and allocates the intermediates, scratch and staging buffers.
  static Status create(Blob blob, const executorch::runtime::NamedDataMap* data_map, const DelegateOptions& options,
                       std::unique_ptr<DelegateProgram>* out);

  // Checks every delegate input/output against the plan, runs the launches on the program's stream and
  // returns when the results are in the output tensors (host-planned) or on the device (device-planned). After
  // CUDA work of an execute failed, every later execute fails at once (the context is unusable).
  Status execute(executorch::runtime::Span<executorch::runtime::EValue*> args);

  ~DelegateProgram();

 private:
  DelegateProgram() = default;

  struct LoadedKernel {
    Module module;
    CUfunction function = nullptr;
  };
  struct ValueState {
    DeviceBuffer device;   // intermediates, and staging for host-planned inputs/outputs
    PinnedBuffer pinned;   // host staging for host-planned inputs/outputs
    CUdeviceptr address = 0;
    void* host = nullptr;  // set per execute: the host tensor data to stage (inputs) or copy back (outputs)
    bool in_caller_device_memory = false;  // set per execute: the tensor's own device memory is used in place
  };

  // The stages of create(), in order.
  Status select_arch(int* smem_optin);
  Status load_kernels(const executorch::runtime::NamedDataMap* data_map, int smem_optin);
  Status check_layouts() const;
  Status check_device_memory() const;
  Status upload_constants(const executorch::runtime::NamedDataMap* data_map);
  Status allocate_values();
  Status prepare_launches();

  // Bytes of global / profile scratch the launches need (one buffer each, shared by all launches).
  void scratch_bytes(uint64_t* global_bytes, uint64_t* profile_bytes) const;
  // The kernel index of a launch for the device's arch.
  uint32_t kernel_of(const LaunchRecord& launch) const;

  // Checks one delegate input/output against the plan and records where its bytes are; no CUDA calls.
  Status bind_value(size_t v, executorch::runtime::EValue* ev, bool is_output);
  // The CUDA work of one execute: staging copies, launches, synchronization.
  Status run();

  Blob blob_;
  uint32_t arch_ = 0;
  DeviceRuntime* device_ = nullptr;
  bool io_on_device_ = false;
  std::string failure_;  // the first failure of CUDA work at execute; empty while usable
  Stream stream_;
  Event inputs_ready_;  // fence: device-resident inputs written on a default stream before execute()
  std::vector<LoadedKernel> kernels_;  // indexed like blob_.kernels; only the device's arch is loaded
  std::vector<DeviceBuffer> constants_;
  std::vector<ValueState> values_;
  DeviceBuffer global_scratch_;
  DeviceBuffer profile_scratch_;
  std::vector<PreparedLaunch> launches_;
};

}  // namespace cuda_triton
