// A delegate's launch sequence as one CUDA graph: captured once at init from a private stream, instantiated, and
// replayed with one cuGraphLaunch per execute. Kernel nodes whose arguments must change (tensors whose addresses
// differ from the captured ones) are rewritten in the executable graph, which is cheaper than a new capture.
#pragma once

#include <functional>
#include <vector>

#include "common/status.h"
#include "cuda/handles.h"

namespace cuda_triton {

class LaunchGraph {
 public:
  // Enqueues the whole sequence on `stream`; after each kernel launch it appends that launch's graph node
  // (LaunchGraph::captured_node) to `kernel_nodes`.
  using Enqueue = std::function<Status(CUstream stream, std::vector<CUgraphNode>* kernel_nodes)>;

  // Captures `enqueue` and instantiates the graph, uploading it on `stream`. On failure the capture is ended and
  // everything released: the object stays empty (ready() is false) and the error says why.
  Status capture(const Enqueue& enqueue, CUstream stream);

  // The node the last call captured on `stream` (a kernel launch, for Enqueue).
  static Status captured_node(CUstream stream, CUgraphNode* node);

  bool ready() const {
    return exec_.get() != nullptr;
  }
  size_t kernel_count() const {
    return kernel_nodes_.size();
  }
  // Rewrites the arguments of kernel `index` (in launch order) to `params`, keeping what was captured otherwise.
  Status update_kernel(size_t index, void** params);
  Status launch(CUstream stream) const;
  // Drops the graph (the delegate launches directly from then on).
  void reset();

 private:
  Graph graph_;
  GraphExec exec_;
  std::vector<CUgraphNode> kernel_nodes_;
  std::vector<CUDA_KERNEL_NODE_PARAMS> kernel_params_;  // as captured; kernelParams replaced at each update
};

}  // namespace cuda_triton
