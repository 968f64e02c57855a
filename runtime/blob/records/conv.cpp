// Kind 0: a convolution (docs/blob_format.md). Shape rule: the generated conv_layout.h (sizes and strides).
#include "blob/records.h"
#include "generated/conv_layout.h"
#include "generated/elementwise_checks.h"

namespace cuda_triton::blob_detail {

namespace {
constexpr int64_t kArgLimit = int64_t(1) << 31;

}  // namespace

Status read_conv(Cursor& c, OpRecord* op) {
  ConvParams& p = op->conv;
  CT_RETURN_IF_ERROR(c.dims(&p.stride, "stride"));
  CT_RETURN_IF_ERROR(c.dims(&p.padding_before, "padding_before"));
  CT_RETURN_IF_ERROR(c.dims(&p.padding_after, "padding_after"));
  CT_RETURN_IF_ERROR(c.dims(&p.dilation, "dilation"));
  CT_RETURN_IF_ERROR(c.dims(&p.output_padding, "output_padding"));
  CT_RETURN_IF_ERROR(c.flag(&p.transposed, "transposed"));
  CT_RETURN_IF_ERROR(c.read(&p.groups, "groups"));
  CT_RETURN_IF_ERROR(c.dims(&p.weight_sizes, "weight sizes"));
  CT_RETURN_IF_ERROR(c.dims(&p.weight_strides, "weight strides"));
  uint32_t n = 0;
  CT_RETURN_IF_ERROR(c.count(kMaxSteps, &n, "prologue steps"));
  CT_RETURN_IF_ERROR(check_table_fits(c, n, 8, "prologue steps"));
  p.prologue.resize(n);
  for (Step& s : p.prologue) {
    CT_RETURN_IF_ERROR(read_step(c, &s));
  }
  CT_RETURN_IF_ERROR(c.read(&p.prologue_inputs, "prologue inputs"));
  if (p.prologue_inputs > op->inputs.size() - 3) {
    return bad("conv: " + std::to_string(p.prologue_inputs) + " prologue inputs of " +
               std::to_string(op->inputs.size() - 3) + " extra inputs");
  }
  CT_RETURN_IF_ERROR(expect_outputs(*op, 1, 1, "conv"));
  CT_RETURN_IF_ERROR(expect_value(op->inputs[0], "conv input"));
  CT_RETURN_IF_ERROR(expect_constant(op->inputs[1], false, "conv weight"));
  CT_RETURN_IF_ERROR(expect_constant(op->inputs[2], true, "conv bias"));
  return expect_tensors_from(*op, 3, "conv epilogue and prologue inputs");
}

Status check_conv(const Blob& b, const OpRecord& op, const std::string& w) {
  const ConvParams& p = op.conv;
  const size_t n = p.stride.size();
  if (n < 1 || n > 3) {
    return bad(w + ": " + std::to_string(n) + " spatial dims");
  }
  if (p.padding_before.size() != n || p.padding_after.size() != n || p.dilation.size() != n ||
      p.output_padding.size() != n) {
    return bad(w + ": conv argument lists disagree on the number of spatial dims");
  }
  for (size_t i = 0; i < n; ++i) {
    if (p.stride[i] < 1 || p.dilation[i] < 1 || p.padding_before[i] < 0 || p.padding_after[i] < 0 ||
        p.output_padding[i] < 0 || p.stride[i] >= kArgLimit || p.dilation[i] >= kArgLimit ||
        p.padding_before[i] >= kArgLimit || p.padding_after[i] >= kArgLimit || p.output_padding[i] >= kArgLimit) {
      return bad(w + ": conv arguments out of range");
    }
  }
  if (p.groups < 1 || p.groups >= kArgLimit) {
    return bad(w + ": groups " + std::to_string(p.groups));
  }
  const ValueRecord& in = b.values[op.inputs[0].index];
  const ValueRecord& out = b.values[op.outputs[0]];
  if (in.dtype != out.dtype) {
    return bad(w + ": input is " + dtype_name(in.dtype) + " but output is " + dtype_name(out.dtype));
  }
  if (p.weight_sizes.size() != n + 2) {
    return bad(w + ": weight rank " + std::to_string(p.weight_sizes.size()) + " for a " + std::to_string(n) +
               "-D conv");
  }
  CT_RETURN_IF_ERROR(check_dims(w + " weight", p.weight_sizes, &p.weight_strides));
  if (in.sizes.size() != n + 2 && in.sizes.size() != n + 1) {
    return bad(w + ": input rank " + std::to_string(in.sizes.size()) + " for a " + std::to_string(n) + "-D conv");
  }
  const int64_t in_channels = in.sizes[in.sizes.size() == n + 2 ? 1 : 0];
  int64_t expect = p.weight_sizes[0];
  if (!p.transposed && __builtin_mul_overflow(p.weight_sizes[1], p.groups, &expect)) {
    return bad(w + ": weight channels * groups overflows");
  }
  if (in_channels != expect) {
    return bad(w + ": input has " + std::to_string(in_channels) + " channels, weight expects " +
               std::to_string(expect));
  }
  if (!p.prologue.empty() && in.sizes.size() != n + 2) {
    return bad(w + ": a prologue needs a batched input");
  }
  if (p.prologue_inputs > 0 && p.prologue.empty()) {
    return bad(w + ": " + std::to_string(p.prologue_inputs) + " prologue inputs but no prologue steps");
  }
  CT_RETURN_IF_ERROR(check_step_list(w + " prologue", p.prologue, p.prologue_inputs, true));
  for (size_t i = op.inputs.size() - p.prologue_inputs; i < op.inputs.size(); ++i) {
    if (!layout::elementwise_checks::per_image_and_channel(operand_sizes(b, op.inputs[i]), in.sizes)) {
      return bad(w + ": a prologue input of sizes " + dims_to_string(operand_sizes(b, op.inputs[i])) +
                 " does not broadcast per image and channel to the input " + dims_to_string(in.sizes));
    }
  }
  std::pair<std::vector<int64_t>, std::vector<int64_t>> r;
  CT_RETURN_IF_ERROR(run_rule(w, [&] {
    r = layout::out_shape_and_stride(in.sizes, in.strides, p.weight_sizes, p.weight_strides, p.stride,
                                     p.padding_before, p.padding_after, p.dilation, p.transposed, p.output_padding,
                                     p.groups, in.dtype == DType::kF64);
  }));
  for (int64_t s : r.first) {
    if (s < 0) {
      return bad(w + ": the conv's output would have a negative size " + dims_to_string(r.first));
    }
  }
  if (!same_layout(r.first, r.second, out.sizes, out.strides)) {
    return bad(w + ": the layout rule gives an output of sizes " + dims_to_string(r.first) + " strides " +
               dims_to_string(r.second) + ", the plan records sizes " + dims_to_string(out.sizes) + " strides " +
               dims_to_string(out.strides));
  }
  return Status::Ok();
}

}  // namespace cuda_triton::blob_detail
