// Kind 4: a matrix product with an optional bias (docs/blob_format.md). Shape rule: the generated gemm_checks.h
// (the operand checks, then the GEMM family's rule).
#include "blob/records.h"
#include "generated/elementwise_checks.h"
#include "generated/gemm_checks.h"

namespace cuda_triton::blob_detail {

Status read_gemm(Cursor& c, OpRecord* op) {
  GemmParams& p = op->gemm;
  CT_RETURN_IF_ERROR(c.dims(&p.b_sizes, "b sizes"));
  CT_RETURN_IF_ERROR(c.read(&p.alpha, "alpha"));
  CT_RETURN_IF_ERROR(c.read(&p.beta, "beta"));
  CT_RETURN_IF_ERROR(c.flag(&p.row_norm, "row_norm"));
  CT_RETURN_IF_ERROR(c.read(&p.norm_eps, "norm_eps"));
  CT_RETURN_IF_ERROR(expect_outputs(*op, 1, 1, "gemm"));
  CT_RETURN_IF_ERROR(expect_tensor(op->inputs[1], "gemm b"));
  CT_RETURN_IF_ERROR(expect_value(op->inputs[0], "gemm a"));
  return expect_tensors_from(*op, 3, "gemm epilogue inputs");
}

Status check_gemm(const Blob& b, const OpRecord& op, const std::string& w) {
  const GemmParams& p = op.gemm;
  if (!is_finite(p.alpha) || !is_finite(p.beta)) {
    return bad(w + ": alpha and beta must be finite");
  }
  if (!is_finite(p.norm_eps) || p.norm_eps < 0.0 || (!p.row_norm && p.norm_eps != 0.0)) {
    return bad(w + ": norm_eps must be finite, >= 0, and 0 without a row norm");
  }
  CT_RETURN_IF_ERROR(check_dims(w + " b", p.b_sizes, nullptr));
  const ValueRecord& a = b.values[op.inputs[0].index];
  const ValueRecord& out = b.values[op.outputs[0]];
  if (a.dtype != out.dtype) {
    return bad(w + ": a is " + dtype_name(a.dtype) + " but the output is " + dtype_name(out.dtype));
  }
  if (op.inputs[1].kind == OperandKind::kValue) {
    const ValueRecord& bv = b.values[op.inputs[1].index];
    if (bv.sizes != p.b_sizes) {
      return bad(w + ": b has sizes " + dims_to_string(bv.sizes) + ", b_sizes says " + dims_to_string(p.b_sizes));
    }
    if (bv.dtype != a.dtype) {
      return bad(w + ": a is " + dtype_name(a.dtype) + " but b is " + dtype_name(bv.dtype));
    }
  }
  std::vector<int64_t> sizes;
  CT_RETURN_IF_ERROR(run_rule(w, [&] { sizes = layout::gemm_checks::gemm_record_sizes(a.sizes, p.b_sizes); }));
  CT_RETURN_IF_ERROR(expect_sizes(w, "output", out.sizes, sizes));
  if (op.inputs[2].kind != OperandKind::kNone &&
      !layout::elementwise_checks::broadcasts_to(operand_sizes(b, op.inputs[2]), sizes)) {
    return bad(w + ": the bias does not broadcast to " + dims_to_string(sizes));
  }
  return Status::Ok();
}

}  // namespace cuda_triton::blob_detail
