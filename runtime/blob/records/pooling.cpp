// Kind 3: max / avg / adaptive avg pooling (docs/blob_format.md). Shape rule: the generated pooling_checks.h (the
// parameters, then the pooling family's rule; the output's strides are the plan's).
#include "blob/records.h"
#include "generated/pooling_checks.h"

namespace cuda_triton::blob_detail {

namespace pool = layout::pooling;

Status read_pooling(Cursor& c, OpRecord* op) {
  PoolingParams& p = op->pooling;
  CT_RETURN_IF_ERROR(c.read(&p.op, "pooling op"));
  if (p.op > pool::ADAPTIVE_AVG_POOL) {
    return bad("bad pooling op code " + std::to_string(p.op));
  }
  CT_RETURN_IF_ERROR(c.dims(&p.kernel, "pooling kernel"));
  CT_RETURN_IF_ERROR(c.dims(&p.stride, "pooling stride"));
  CT_RETURN_IF_ERROR(c.dims(&p.padding, "pooling padding"));
  CT_RETURN_IF_ERROR(c.dims(&p.dilation, "pooling dilation"));
  CT_RETURN_IF_ERROR(c.dims(&p.output_size, "pooling output size"));
  CT_RETURN_IF_ERROR(c.flag(&p.ceil_mode, "ceil_mode"));
  CT_RETURN_IF_ERROR(c.flag(&p.count_include_pad, "count_include_pad"));
  CT_RETURN_IF_ERROR(c.read(&p.divisor_override, "divisor_override"));
  CT_RETURN_IF_ERROR(expect_outputs(*op, 1, 1, "pooling"));
  CT_RETURN_IF_ERROR(expect_value(op->inputs[0], "pooling input"));
  return expect_tensors_from(*op, 1, "pooling epilogue inputs");
}

Status check_pooling(const Blob& b, const OpRecord& op, const std::string& w) {
  const PoolingParams& p = op.pooling;
  const ValueRecord& in = b.values[op.inputs[0].index];
  const ValueRecord& out = b.values[op.outputs[0]];
  if (in.dtype != out.dtype) {
    return bad(w + ": input is " + dtype_name(in.dtype) + " but output is " + dtype_name(out.dtype));
  }
  std::vector<int64_t> sizes;
  CT_RETURN_IF_ERROR(run_rule(w, [&] {
    sizes = layout::pooling_checks::pool_record_sizes(p.op, in.sizes, in.strides, p.kernel, p.stride, p.padding,
                                                      p.dilation, p.output_size, p.ceil_mode, p.count_include_pad,
                                                      p.divisor_override);
  }));
  return expect_sizes(w, "output", out.sizes, sizes);
}

}  // namespace cuda_triton::blob_detail
