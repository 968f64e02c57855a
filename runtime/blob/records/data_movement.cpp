// Kind 6: materialised data movement (docs/blob_format.md): copy, reshape, permute, cat, split, slice, pad,
// upsample. Shape rules: the generated data_movement_checks.h (the parameters, then the data-movement family's
// rules).
#include "blob/records.h"
#include "generated/data_movement_checks.h"

namespace cuda_triton::blob_detail {

namespace dm = layout::data_movement_checks;

namespace {

// `cat_record_sizes` of these parts: their sizes and strides back to back.
std::vector<int64_t> cat_sizes(const Blob& b, const std::vector<uint32_t>& parts, int64_t dim) {
  std::vector<int64_t> sizes, strides;
  for (uint32_t v : parts) {
    sizes.insert(sizes.end(), b.values[v].sizes.begin(), b.values[v].sizes.end());
    strides.insert(strides.end(), b.values[v].strides.begin(), b.values[v].strides.end());
  }
  const int64_t rank = parts.empty() ? 0 : static_cast<int64_t>(b.values[parts[0]].sizes.size());
  return dm::cat_record_sizes(rank, dim, sizes, strides);
}

}  // namespace

Status read_data_movement(Cursor& c, OpRecord* op) {
  DataMovementParams& p = op->data_movement;
  CT_RETURN_IF_ERROR(c.read(&p.op, "data movement op"));
  if (p.op > dm::UPSAMPLE) {
    return bad("bad data movement op code " + std::to_string(p.op));
  }
  if (!op->steps.empty()) {
    return bad("data movement records have no fused steps");
  }
  for (const Operand& x : op->inputs) {
    CT_RETURN_IF_ERROR(expect_value(x, "a data movement input"));
  }
  const size_t n_in = p.op == dm::CAT ? kMaxOperands : 1;
  const size_t n_out = p.op == dm::SPLIT ? kMaxOperands : 1;
  if (op->inputs.empty() || op->inputs.size() > n_in) {
    return bad("data movement op " + std::to_string(p.op) + ": " + std::to_string(op->inputs.size()) + " inputs");
  }
  CT_RETURN_IF_ERROR(expect_outputs(*op, 1, n_out, "data movement"));
  switch (p.op) {
    case dm::PERMUTE:
      return c.dims(&p.perm, "perm");
    case dm::CAT:
    case dm::SPLIT:
      return c.read(&p.dim, "dim");
    case dm::SLICE:
      CT_RETURN_IF_ERROR(c.read(&p.dim, "slice dim"));
      CT_RETURN_IF_ERROR(c.read(&p.start, "slice start"));
      CT_RETURN_IF_ERROR(c.read(&p.end, "slice end"));
      return c.read(&p.step, "slice step");
    case dm::PAD:
      CT_RETURN_IF_ERROR(c.read(&p.mode, "pad mode"));
      if (p.mode > dm::PAD_CIRCULAR) {
        return bad("bad pad mode code " + std::to_string(p.mode));
      }
      CT_RETURN_IF_ERROR(c.list(&p.pad, "pad", kMaxInts));
      return c.read(&p.value, "pad value");
    case dm::UPSAMPLE:
      CT_RETURN_IF_ERROR(c.read(&p.mode, "upsample mode"));
      if (p.mode > dm::UPSAMPLE_CUBIC) {
        return bad("bad upsample mode code " + std::to_string(p.mode));
      }
      CT_RETURN_IF_ERROR(c.flag(&p.align_corners, "align_corners"));
      CT_RETURN_IF_ERROR(c.dims(&p.output_size, "upsample output size"));
      return c.list(&p.scales, "upsample scales");
    default:
      return Status::Ok();
  }
}

Status check_data_movement(const Blob& b, const OpRecord& op, const std::string& w) {
  const DataMovementParams& p = op.data_movement;
  const ValueRecord& in = b.values[op.inputs[0].index];
  const ValueRecord& out = b.values[op.outputs[0]];
  if (p.op != dm::COPY) {
    for (const Operand& x : op.inputs) {
      for (uint32_t v : op.outputs) {
        if (b.values[x.index].dtype != b.values[v].dtype || b.values[x.index].dtype != in.dtype) {
          return bad(w + ": the inputs and outputs of this data movement op have different dtypes");
        }
      }
    }
  }
  std::vector<int64_t> sizes;
  switch (p.op) {
    case dm::COPY:
      sizes = in.sizes;
      break;
    case dm::RESHAPE:
      CT_RETURN_IF_ERROR(run_rule(w, [&] { sizes = dm::reshape_record_sizes(in.sizes, out.sizes); }));
      break;
    case dm::PERMUTE:
      CT_RETURN_IF_ERROR(run_rule(w, [&] { sizes = dm::permute_record_sizes(in.sizes, p.perm); }));
      break;
    case dm::CAT: {
      std::vector<uint32_t> parts;
      for (const Operand& x : op.inputs) {
        parts.push_back(x.index);
      }
      CT_RETURN_IF_ERROR(run_rule(w, [&] { sizes = cat_sizes(b, parts, p.dim); }));
      break;
    }
    case dm::SPLIT:
      // The parts concatenate back to the input.
      CT_RETURN_IF_ERROR(run_rule(w, [&] { sizes = cat_sizes(b, op.outputs, p.dim); }));
      return expect_sizes(w, "concatenated parts'", in.sizes, sizes);
    case dm::SLICE:
      CT_RETURN_IF_ERROR(
          run_rule(w, [&] { sizes = dm::slice_record_sizes(in.sizes, p.dim, p.start, p.end, p.step); }));
      break;
    case dm::PAD:
      if (!is_finite(p.value)) {
        return bad(w + ": the pad value must be finite");
      }
      if (p.mode != dm::PAD_CONSTANT && p.value != 0) {
        return bad(w + ": only constant pads have a value");
      }
      CT_RETURN_IF_ERROR(run_rule(w, [&] { sizes = dm::pad_record_sizes(p.mode, in.sizes, in.strides, p.pad); }));
      break;
    case dm::UPSAMPLE:
      for (double s : p.scales) {
        if (!is_finite(s) || !(s > 0)) {
          return bad(w + ": scales must be finite and > 0");
        }
      }
      CT_RETURN_IF_ERROR(run_rule(w, [&] {
        sizes = dm::upsample_record_sizes(p.mode, in.sizes, in.strides, p.output_size, p.align_corners,
                                          static_cast<int64_t>(p.scales.size()));
      }));
      break;
    default:
      return bad(w + ": unknown data movement op");
  }
  return expect_sizes(w, "output", out.sizes, sizes);
}

}  // namespace cuda_triton::blob_detail
