// Kind 1: a fused elementwise chain (docs/blob_format.md). Shape rule: the generated elementwise_checks.h.
#include "blob/records.h"
#include "generated/elementwise_checks.h"

namespace cuda_triton::blob_detail {

Status read_elementwise(Cursor& c, OpRecord* op) {
  CT_RETURN_IF_ERROR(expect_outputs(*op, 1, 1, "elementwise"));
  return expect_tensors_from(*op, 0, "elementwise inputs");
}

Status check_elementwise(const Blob& b, const OpRecord& op, const std::string& w) {
  if (op.inputs.empty()) {
    return bad(w + ": an elementwise record needs at least one input");
  }
  if (op.steps.empty()) {
    return bad(w + ": an elementwise record needs at least one step");
  }
  std::vector<int64_t> sizes;
  for (const Operand& x : op.inputs) {
    CT_RETURN_IF_ERROR(run_rule(w, [&] { sizes = layout::elementwise_checks::broadcast_sizes(sizes, operand_sizes(b, x)); }));
  }
  return expect_sizes(w, "output", b.values[op.outputs[0]].sizes, sizes);
}

}  // namespace cuda_triton::blob_detail
