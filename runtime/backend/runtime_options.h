// How a delegate runs, decided at init from four sources:
//   1. the program's compile specs (written at export): "target_device" ("cuda[:N]": delegate inputs and outputs
//      are planned in device memory on that device) and "cuda_graph" ("0" turns CUDA graphs off for the program);
//   2. the environment: CUDA_TRITON_CUDA_GRAPH=0 turns graphs off, CUDA_TRITON_CUDA_GRAPH_IO=staging|update picks
//      how a graph meets inputs and outputs whose addresses change;
//   3. ExecuTorch's process-wide backend options (executorch::runtime::set_option("CudaTritonBackend", ...)) with
//      the keys "cuda_graph" (bool), "cuda_graph_io" (string) and "profile_ops" (bool: with an event tracer, time
//      every op with CUDA events; default true), which replace the environment's values;
//   4. ExecuTorch's load-time options of one program (Module::load(LoadBackendOptionsMap), the
//      BackendInitContext's runtime specs), same keys, which replace both for that program.
// Graphs run only when nothing turned them off.
#pragma once

#include <string>

#include <executorch/runtime/backend/options.h>
#include <executorch/runtime/core/array_ref.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/backend/interface.h>

#include "common/status.h"

namespace cuda_triton {

// How a captured graph reaches inputs and outputs in the caller's device memory (device-planned programs),
// whose addresses may change between executes:
//   kUpdate: the graph's kernels read and write them in place; when an address changes, the kernel nodes that
//            use it get their arguments rewritten (cuGraphExecKernelNodeSetParams) before the replay.
//   kStaging: the graph reads and writes fixed device buffers of its own; each execute copies the inputs in and
//            the outputs out around the replay (one device copy per tensor).
// Host-planned inputs and outputs are always staged through fixed pinned and device buffers, inside the graph.
enum class GraphIo { kUpdate, kStaging };

const char* graph_io_name(GraphIo io);

struct DelegateOptions {
  int device = 0;             // CUDA device ordinal
  bool io_on_device = false;  // delegate inputs/outputs are planned in device memory
  bool cuda_graph = true;     // capture the launch sequence once and replay it
  GraphIo graph_io = GraphIo::kUpdate;
  bool profile_ops = true;    // time every op with CUDA events when an event tracer is attached
  bool profile = false;       // an event tracer was attached at init and profile_ops: timing events are made
};

// The process-wide defaults (source 2, then 3), changed by set_option.
class RuntimeOptions {
 public:
  static RuntimeOptions& get();
  // Applies ExecuTorch backend options; unknown keys are ignored, a bad value is an error.
  Status apply(executorch::runtime::Span<const executorch::runtime::BackendOption> options);
  bool cuda_graph() const {
    return cuda_graph_;
  }
  GraphIo graph_io() const {
    return graph_io_;
  }
  bool profile_ops() const {
    return profile_ops_;
  }

 private:
  RuntimeOptions();
  bool cuda_graph_ = true;
  GraphIo graph_io_ = GraphIo::kUpdate;
  bool profile_ops_ = true;
};

// The options of one delegate: the compile specs, the process-wide defaults, then the load-time `runtime_specs`.
Status delegate_options(executorch::runtime::ArrayRef<executorch::runtime::CompileSpec> compile_specs,
                        executorch::runtime::Span<const executorch::runtime::BackendOption> runtime_specs,
                        DelegateOptions* out);

}  // namespace cuda_triton
