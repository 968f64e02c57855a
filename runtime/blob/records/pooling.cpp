// Kind 3: max / avg / adaptive avg pooling (docs/blob_format.md). Shape rule: the generated pooling_shape.h (its
// sizes; the output's strides are the plan's).
#include "blob/records.h"
#include "generated/pooling_shape.h"

namespace cuda_triton::blob_detail {

namespace pool = layout::pooling;

namespace {
constexpr int64_t kParamLimit = int64_t(1) << 31;

bool all_in(const std::vector<int64_t>& v, int64_t lo) {
  for (int64_t x : v) {
    if (x < lo || x >= kParamLimit) {
      return false;
    }
  }
  return true;
}
}  // namespace

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
  const bool adaptive = p.op == pool::ADAPTIVE_AVG_POOL;
  const size_t n = adaptive ? p.output_size.size() : p.kernel.size();
  if (n < 1 || n > 3) {
    return bad(w + ": " + std::to_string(n) + " spatial dims");
  }
  if (in.sizes.size() != n + 1 && in.sizes.size() != n + 2) {
    return bad(w + ": input rank " + std::to_string(in.sizes.size()) + " for a " + std::to_string(n) + "-D pool");
  }
  if (adaptive ? !all_in(p.output_size, 1) : !(all_in(p.kernel, 1) && all_in(p.stride, 1) && all_in(p.dilation, 1))) {
    return bad(w + ": bad pooling sizes");
  }
  if (adaptive) {
    if (!p.kernel.empty() || !p.stride.empty() || !p.padding.empty() || !p.dilation.empty()) {
      return bad(w + ": adaptive pools take only an output size");
    }
    if (p.ceil_mode || p.count_include_pad || p.divisor_override != 0) {
      return bad(w + ": adaptive pools take no ceil_mode, count_include_pad or divisor_override");
    }
  } else {
    if (p.stride.size() != n || p.padding.size() != n || p.dilation.size() != n || !p.output_size.empty()) {
      return bad(w + ": kernel, stride, padding and dilation need one entry per spatial dim");
    }
    if (!all_in(p.padding, 0)) {
      return bad(w + ": bad padding");
    }
    for (size_t i = 0; i < n; ++i) {
      if (2 * p.padding[i] > p.dilation[i] * (p.kernel[i] - 1) + 1) {  // each below 2^31: no overflow
        return bad(w + ": padding must be at most half the kernel");
      }
      if (p.op == pool::AVG_POOL && p.dilation[i] != 1) {
        return bad(w + ": avg pools have no dilation");
      }
    }
    if (p.op == pool::AVG_POOL && p.divisor_override < 0) {
      return bad(w + ": divisor_override must be >= 0 (0: none)");
    }
    if (p.op == pool::MAX_POOL && (p.count_include_pad || p.divisor_override != 0)) {
      return bad(w + ": max pools take no count_include_pad or divisor_override");
    }
  }
  std::vector<int64_t> sizes;
  CT_RETURN_IF_ERROR(run_rule(w, [&] {
    sizes = pool::out_shape_and_stride(p.op, in.sizes, in.strides, adaptive ? p.output_size : p.kernel, p.stride,
                                       p.padding, p.dilation, p.ceil_mode)
                .first;
  }));
  for (size_t i = sizes.size() - n; i < sizes.size(); ++i) {
    if (sizes[i] < 1) {
      return bad(w + ": the pool's output would be empty");
    }
  }
  return expect_sizes(w, "output", out.sizes, sizes);
}

}  // namespace cuda_triton::blob_detail
