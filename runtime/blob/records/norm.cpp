// Kind 5: normalisation and softmax (docs/blob_format.md). Shape rule: the generated norm_checks.h.
#include "blob/records.h"
#include "generated/norm_checks.h"

namespace cuda_triton::blob_detail {

Status read_norm(Cursor& c, OpRecord* op) {
  NormParams& p = op->norm;
  CT_RETURN_IF_ERROR(c.read(&p.op, "norm op"));
  if (p.op > layout::norm_checks::LOG_SOFTMAX) {
    return bad("bad normalisation op code " + std::to_string(p.op));
  }
  CT_RETURN_IF_ERROR(c.read(&p.dim, "norm dim"));
  CT_RETURN_IF_ERROR(c.read(&p.groups, "norm groups"));
  CT_RETURN_IF_ERROR(c.read(&p.eps, "norm eps"));
  CT_RETURN_IF_ERROR(expect_outputs(*op, 1, 1, "norm"));
  CT_RETURN_IF_ERROR(expect_value(op->inputs[0], "norm input"));
  return expect_tensors_from(*op, 5, "norm epilogue inputs");
}

Status check_norm(const Blob& b, const OpRecord& op, const std::string& w) {
  const NormParams& p = op.norm;
  if (!is_finite(p.eps) || p.eps < 0) {
    return bad(w + ": eps must be finite and >= 0");
  }
  const ValueRecord& in = b.values[op.inputs[0].index];
  const ValueRecord& out = b.values[op.outputs[0]];
  if (in.dtype != out.dtype) {
    return bad(w + ": input is " + dtype_name(in.dtype) + " but output is " + dtype_name(out.dtype));
  }
  std::vector<int64_t> sizes;
  CT_RETURN_IF_ERROR(run_rule(w, [&] { sizes = layout::norm_checks::norm_out_sizes(p.op, in.sizes, p.dim, p.groups); }));
  return expect_sizes(w, "output", out.sizes, sizes);
}

}  // namespace cuda_triton::blob_detail
