#include "backend/launch_graph.h"

#include <string>

namespace cuda_triton {

Status LaunchGraph::captured_node(CUstream stream, CUgraphNode* node) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUgraphNode* deps = nullptr;
  // Asked for too: without it the query fails (CUDA_ERROR_LOSSY_QUERY) where a dependency carries edge data, as
  // programmatic dependent launches may give it.
  const CUgraphEdgeData* edges = nullptr;
  size_t num_deps = 0;
  CT_RETURN_IF_ERROR(check_cu(
      Driver::get().cuStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &deps, &edges, &num_deps),
      "cuStreamGetCaptureInfo"));
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || num_deps != 1 || deps == nullptr) {
    return Status(Code::kDriver, "the stream capture lost track of the launch sequence (" +
                                     std::to_string(num_deps) + " dependencies after a launch)");
  }
  *node = deps[0];
  return Status::Ok();
}

Status LaunchGraph::capture(const Enqueue& enqueue, CUstream stream) {
  reset();
  const Driver& d = Driver::get();
  if (!d.has_graphs()) {
    return Status(Code::kNotSupported, "the CUDA driver has no graph API");
  }
  Stream capture_stream;
  CT_RETURN_IF_ERROR(Stream::create(&capture_stream));
  // Thread-local mode: only this thread's calls that may not run during a capture invalidate it.
  CT_RETURN_IF_ERROR(check_cu(d.cuStreamBeginCapture(capture_stream.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                              "cuStreamBeginCapture"));
  std::vector<CUgraphNode> nodes;
  const Status enqueued = enqueue(capture_stream.get(), &nodes);
  CUgraph raw = nullptr;
  const CUresult ended = d.cuStreamEndCapture(capture_stream.get(), &raw);  // always ends the capture
  Graph graph = Graph::adopt(raw);
  CT_RETURN_IF_ERROR(enqueued);
  CT_RETURN_IF_ERROR(check_cu(ended, "cuStreamEndCapture"));
  if (graph.get() == nullptr) {
    return Status(Code::kDriver, "cuStreamEndCapture returned no graph");
  }
  std::vector<CUDA_KERNEL_NODE_PARAMS> params(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    CT_RETURN_IF_ERROR(check_cu(d.cuGraphKernelNodeGetParams(nodes[i], &params[i]), "cuGraphKernelNodeGetParams"));
  }
  GraphExec exec;
  CT_RETURN_IF_ERROR(GraphExec::instantiate(graph.get(), &exec));
  CT_RETURN_IF_ERROR(check_cu(d.cuGraphUpload(exec.get(), stream), "cuGraphUpload"));
  graph_ = std::move(graph);
  exec_ = std::move(exec);
  kernel_nodes_ = std::move(nodes);
  kernel_params_ = std::move(params);
  return Status::Ok();
}

Status LaunchGraph::update_kernel(size_t index, void** params) {
  CUDA_KERNEL_NODE_PARAMS p = kernel_params_[index];
  p.kernelParams = params;
  p.extra = nullptr;
  return check_cu(Driver::get().cuGraphExecKernelNodeSetParams(exec_.get(), kernel_nodes_[index], &p),
                  "cuGraphExecKernelNodeSetParams");
}

Status LaunchGraph::launch(CUstream stream) const {
  return check_cu(Driver::get().cuGraphLaunch(exec_.get(), stream), "cuGraphLaunch");
}

void LaunchGraph::reset() {
  exec_ = GraphExec();
  graph_ = Graph();
  kernel_nodes_.clear();
  kernel_params_.clear();
}

}  // namespace cuda_triton
