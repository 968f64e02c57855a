// Kind 2: a reduction over a set of dims (docs/blob_format.md). Shape rule: the generated reduction_checks.h.
#include "blob/records.h"
#include "generated/reduction_checks.h"

namespace cuda_triton::blob_detail {

Status read_reduction(Cursor& c, OpRecord* op) {
  ReductionParams& p = op->reduction;
  CT_RETURN_IF_ERROR(c.string(&p.op, "reduction op", kMaxOpName));
  CT_RETURN_IF_ERROR(c.dims(&p.dims, "reduced dims"));
  CT_RETURN_IF_ERROR(c.flag(&p.keepdim, "keepdim"));
  CT_RETURN_IF_ERROR(expect_outputs(*op, 1, 1, "reduction"));
  CT_RETURN_IF_ERROR(expect_value(op->inputs[0], "reduction input"));
  return expect_tensors_from(*op, 1, "reduction epilogue inputs");
}

Status check_reduction(const Blob& b, const OpRecord& op, const std::string& w) {
  const ReductionParams& p = op.reduction;
  if (p.op.empty()) {
    return bad(w + ": bad reduction op ''");
  }
  std::vector<int64_t> sizes;
  CT_RETURN_IF_ERROR(run_rule(w, [&] {
    sizes = layout::reduction_checks::reduction_out_sizes(b.values[op.inputs[0].index].sizes, p.dims, p.keepdim);
  }));
  return expect_sizes(w, "output", b.values[op.outputs[0]].sizes, sizes);
}

}  // namespace cuda_triton::blob_detail
