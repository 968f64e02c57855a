// Per-op GPU time of a delegate, for ExecuTorch's ETDump: CUDA events around every op, read after the stream
// finished, logged as delegate profiling events (one for the delegate's whole GPU work, one per op) so that
// ExecuTorch's Inspector shows them (scripts/etdump_ops.py prints the breakdown).
#pragma once

#include <string>
#include <vector>

#include <executorch/runtime/core/event_tracer.h>

#include "common/status.h"
#include "cuda/handles.h"

namespace cuda_triton {

class OpProfiler {
 public:
  // Timing events for `ops` ops (created at init: profiling allocates nothing per execute).
  Status create(size_t ops);
  bool ready() const {
    return !events_.empty();
  }

  // Marks on `stream`: the start of the delegate's GPU work, the start of op `op` (ops in order), the end of the
  // last op, the end of the work.
  Status begin(CUstream stream);
  Status op(size_t op, CUstream stream);
  Status ops_done(CUstream stream);
  Status end(CUstream stream);

  // Once the stream has finished: logs the delegate (`delegate_name`) and every op (`op_names`, with
  // `op_metadata` as each event's debug metadata) to `tracer`, each placed at `host_start` (the execute's start,
  // in ExecuTorch ticks) plus its GPU offset from the start of the work.
  Status report(executorch::runtime::EventTracer* tracer, et_timestamp_t host_start, const std::string& delegate_name,
                const std::vector<std::string>& op_names, const std::vector<std::string>& op_metadata) const;

 private:
  Status mark(size_t event, CUstream stream);
  std::vector<Event> events_;  // [0] begin, [1 + i] start of op i, [1 + ops] last op done, [2 + ops] end
};

}  // namespace cuda_triton
