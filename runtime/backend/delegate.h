// One initialised delegate (the DelegateHandle ExecuTorch passes back to execute()): the parsed blob, the
// loaded kernels of the device's arch, the weights on the device, intermediates, state, staging buffers, the prepared
// launches and, when the driver allows it, their CUDA graph. Everything is owned by RAII members; deleting the
// object frees it all.
//
// Built by delegate_init.cpp (create and its stages), run by delegate.cpp (execute).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/event_tracer.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/core/span.h>

#include "backend/device_runtime.h"
#include "backend/launch.h"
#include "backend/launch_graph.h"
#include "backend/op_profiler.h"
#include "backend/runtime_options.h"
#include "blob/blob.h"
#include "common/status.h"
#include "cuda/handles.h"

namespace cuda_triton {

class DelegateProgram {
 public:
  // Loads the kernels of the device's arch, checks that the program fits in free device memory, uploads the
  // constants from `data_map`, allocates the intermediates, the state buffer (zeroed), scratch and staging
  // buffers, prepares every launch's
  // arguments and captures the launch sequence as a CUDA graph (falling back to direct launches, with a log line,
  // when that fails).
  static Status create(Blob blob, const executorch::runtime::NamedDataMap* data_map, const DelegateOptions& options,
                       std::unique_ptr<DelegateProgram>* out);

  // Checks every delegate input/output against the plan and runs the delegate on the device's stream: one graph
  // replay (or the launches one by one), with host-planned inputs and outputs staged through pinned memory. A
  // host-planned delegate returns with its outputs in place (one synchronization); a device-planned one returns
  // at once, ordered before the allocator's et_copy D2H that reads its results. With `tracer` (and timing events
  // made at init) every op's GPU time is logged to it. After CUDA work of an execute failed, every later execute
  // fails at once (the context is unusable).
  Status execute(executorch::runtime::Span<executorch::runtime::EValue*> args,
                 executorch::runtime::EventTracer* tracer);

  // Whether executes replay a CUDA graph, and how it meets device-resident inputs and outputs.
  bool uses_graph() const {
    return graph_.ready();
  }
  GraphIo graph_io() const {
    return options_.graph_io;
  }

  ~DelegateProgram();

 private:
  DelegateProgram() = default;

  struct LoadedKernel {
    Module module;
    CUfunction function = nullptr;
  };
  struct ValueState {
    DeviceBuffer device;  // staging of host-planned I/O; the graph's own buffer of device-planned I/O (kStaging)
    PinnedBuffer pinned;  // host staging of host-planned inputs/outputs
    CUdeviceptr address = 0;        // what the kernels' arguments hold now
    CUdeviceptr graph_address = 0;  // what the graph's kernel nodes hold (GraphIo::kUpdate)
    uint64_t root_offset = 0;  // a view: bytes from its root's address (intermediate / state: from the buffer's)
    // Set per execute by bind_value:
    void* host = nullptr;    // host tensor data to stage (inputs) or copy back (outputs)
    CUdeviceptr caller = 0;  // the tensor's own device memory
  };

  // ---- create() and its stages, in order (delegate_init.cpp) ----
  Status select_arch(int* smem_optin);
  Status load_kernels(const executorch::runtime::NamedDataMap* data_map, int smem_optin);
  Status check_layouts() const;
  Status check_device_memory() const;
  Status upload_constants(const executorch::runtime::NamedDataMap* data_map);
  Status allocate_values();
  Status allocate_state();  // the state buffer, zeroed (allocate_values)
  Status prepare_launches();
  void prepare_profiling();
  void capture_graph();

  // Bytes of global / profile scratch the launches need (one buffer each, shared by all launches).
  void scratch_bytes(uint64_t* global_bytes, uint64_t* profile_bytes) const;
  // The kernel index of a launch for the device's arch.
  uint32_t kernel_of(const LaunchRecord& launch) const;
  // Whether the value is a delegate input or output (not a view of one) whose bytes are in the caller's device
  // memory.
  bool device_io(uint32_t v) const;
  // Whether the value is a delegate input or output staged through pinned memory.
  bool host_io(uint32_t v) const;

  // ---- execute() (delegate.cpp) ----
  // Checks one delegate input/output against the plan and records where its bytes are; no CUDA calls, no
  // allocation.
  Status bind_value(uint32_t v, executorch::runtime::EValue* ev, bool is_output);
  // The CUDA work of one execute.
  Status run(executorch::runtime::EventTracer* tracer);
  // Enqueues the sequence: host-planned inputs in, every launch (its arguments from the values' addresses),
  // host-planned outputs out. With `kernel_nodes` it is being captured; with `profiler` every op is timed.
  Status enqueue_work(CUstream stream, std::vector<CUgraphNode>* kernel_nodes, OpProfiler* profiler);
  // Views of inputs and outputs follow their roots' current addresses.
  void refresh_io_views();
  // One graph replay, with the device-resident inputs/outputs brought to it. False in `replayed` when the graph
  // could not take the new addresses (it is dropped: the caller launches directly).
  Status replay(CUstream stream, bool* replayed);

  Blob blob_;
  DelegateOptions options_;
  uint32_t arch_ = 0;
  DeviceRuntime* device_ = nullptr;
  bool sync_each_execute_ = true;  // false: device-planned, ordered before the allocator's D2H on the stream
  std::string failure_;            // the first failure of CUDA work at execute; empty while usable
  Event inputs_ready_;             // fence: device-resident inputs written on a default stream before execute()
  std::vector<LoadedKernel> kernels_;  // indexed like blob_.kernels; only the device's arch is loaded
  std::vector<DeviceBuffer> constants_;
  std::vector<ValueState> values_;
  std::vector<uint32_t> inputs_, outputs_;  // value indices of the delegate's inputs and outputs
  std::vector<uint32_t> io_views_;          // views whose root is an input or output
  DeviceBuffer arena_;                      // every intermediate, at its planned offset
  DeviceBuffer state_;                      // every state value, at its planned offset; zeroed once at init
  DeviceBuffer global_scratch_;
  DeviceBuffer profile_scratch_;
  std::vector<PreparedLaunch> launches_;
  std::vector<size_t> io_launches_;  // launches with an argument that is a delegate input or output
  LaunchGraph graph_;
  OpProfiler profiler_;
  std::string name_;  // "CudaTritonBackend#<n>", the delegate's name in profiles
  std::vector<std::string> op_names_, op_metadata_;
};

}  // namespace cuda_triton
