// The common op-record layout (docs/blob_format.md, "OPS_") and the table of record kinds.
#include "blob/records.h"

namespace cuda_triton {

using namespace blob_detail;

namespace blob_detail {

namespace {

constexpr RecordKind kKinds[] = {
    {OpKind::kConv, "conv", 3, true, read_conv, check_conv},
    {OpKind::kElementwise, "elementwise", 0, false, read_elementwise, check_elementwise},
    {OpKind::kReduction, "reduction", 1, true, read_reduction, check_reduction},
    {OpKind::kPooling, "pooling", 1, true, read_pooling, check_pooling},
    {OpKind::kGemm, "gemm", 3, true, read_gemm, check_gemm},
    {OpKind::kNorm, "norm", 5, true, read_norm, check_norm},
    {OpKind::kDataMovement, "data movement", -1, true, read_data_movement, check_data_movement},
};

Status read_operand(Cursor& c, Operand* x) {
  CT_RETURN_IF_ERROR(c.enumeration(&x->kind, 3, "operand tag"));
  CT_RETURN_IF_ERROR(c.read(&x->index, "operand index"));
  if (x->kind == OperandKind::kNone && x->index != 0) {
    return bad("an absent operand has a non-zero index");
  }
  return Status::Ok();
}

Status read_arg(Cursor& c, ArgRecord* a) {
  CT_RETURN_IF_ERROR(c.enumeration(&a->kind, 6, "argument tag"));
  switch (a->kind) {
    case ArgKind::kValue:
    case ArgKind::kConstant:
    case ArgKind::kNull:
      return c.read(&a->ref, "argument reference");
    case ArgKind::kI32:
    case ArgKind::kI64:
      return c.read(&a->integer, "integer argument");
    case ArgKind::kF32: {
      uint32_t pad = 0;
      CT_RETURN_IF_ERROR(c.read(&a->fp32, "fp32 argument"));
      return c.read(&pad, "fp32 argument padding");
    }
  }
  return bad("unreachable argument tag");
}

Status read_launch(Cursor& c, LaunchRecord* l) {
  uint32_t na = 0;
  CT_RETURN_IF_ERROR(c.count(kMaxArchs, &na, "launch archs"));
  CT_RETURN_IF_ERROR(check_table_fits(c, na, 8, "launch archs"));
  l->kernels.resize(na);
  for (size_t i = 0; i < na; ++i) {
    auto& [arch, index] = l->kernels[i];
    CT_RETURN_IF_ERROR(c.read(&arch, "launch arch"));
    CT_RETURN_IF_ERROR(c.read(&index, "launch kernel index"));
    for (size_t j = 0; j < i; ++j) {
      if (l->kernels[j].first == arch) {
        return bad("launch lists arch " + std::to_string(arch) + " twice");
      }
    }
  }
  for (uint32_t& g : l->grid) {
    CT_RETURN_IF_ERROR(c.read(&g, "grid"));
  }
  uint32_t nargs = 0;
  CT_RETURN_IF_ERROR(c.count(kMaxParams, &nargs, "launch args"));
  CT_RETURN_IF_ERROR(check_table_fits(c, nargs, 9, "launch args"));
  l->args.resize(nargs);
  for (auto& a : l->args) {
    CT_RETURN_IF_ERROR(read_arg(c, &a));
  }
  return Status::Ok();
}

}  // namespace

Status read_step(Cursor& c, Step* s) {
  CT_RETURN_IF_ERROR(c.string(&s->op, "step op", kMaxOpName));
  uint32_t n = 0;
  CT_RETURN_IF_ERROR(c.count(kMaxStepOperands, &n, "step operands"));
  s->operands.resize(n);
  for (StepOperand& a : s->operands) {
    CT_RETURN_IF_ERROR(c.enumeration(&a.kind, 4, "step operand tag"));
    if (a.kind == StepOperandKind::kScalar) {
      CT_RETURN_IF_ERROR(c.read(&a.scalar, "step scalar"));
    } else {
      CT_RETURN_IF_ERROR(c.read(&a.index, "step operand index"));
      if (a.kind == StepOperandKind::kResult && a.index != 0) {
        return bad("a result step operand has a non-zero payload");
      }
    }
  }
  return Status::Ok();
}


const RecordKind* record_kind(OpKind kind) {
  for (const RecordKind& k : kKinds) {
    if (k.kind == kind) {
      return &k;
    }
  }
  return nullptr;
}

Status read_op_record(Cursor& c, OpRecord* op) {
  uint8_t kind = 0;
  CT_RETURN_IF_ERROR(c.read(&kind, "op kind"));
  const RecordKind* k = kind < sizeof(kKinds) / sizeof(kKinds[0]) ? record_kind(static_cast<OpKind>(kind)) : nullptr;
  if (k == nullptr) {
    return bad("unknown op record kind " + std::to_string(kind));
  }
  op->kind = k->kind;
  CT_RETURN_IF_ERROR(c.string(&op->name, "op name", kMaxName));
  CT_RETURN_IF_ERROR(c.string(&op->template_name, "template name"));
  CT_RETURN_IF_ERROR(c.string(&op->schedule, "schedule"));
  uint32_t n = 0;
  CT_RETURN_IF_ERROR(c.count(kMaxOperands, &n, "op inputs"));
  CT_RETURN_IF_ERROR(check_table_fits(c, n, 5, "op inputs"));
  op->inputs.resize(n);
  for (Operand& x : op->inputs) {
    CT_RETURN_IF_ERROR(read_operand(c, &x));
  }
  CT_RETURN_IF_ERROR(c.count(kMaxOperands, &n, "op outputs"));
  CT_RETURN_IF_ERROR(check_table_fits(c, n, 4, "op outputs"));
  op->outputs.resize(n);
  for (uint32_t& v : op->outputs) {
    CT_RETURN_IF_ERROR(c.read(&v, "op output"));
  }
  CT_RETURN_IF_ERROR(c.count(kMaxSteps, &n, "steps"));
  CT_RETURN_IF_ERROR(check_table_fits(c, n, 8, "steps"));
  op->steps.resize(n);
  for (Step& s : op->steps) {
    CT_RETURN_IF_ERROR(read_step(c, &s));
  }
  uint32_t params_length = 0;
  CT_RETURN_IF_ERROR(c.read(&params_length, "params length"));
  Cursor params(nullptr, 0, nullptr);
  CT_RETURN_IF_ERROR(c.sub(params_length, &params, "params"));
  CT_RETURN_IF_ERROR(c.count(kMaxCount, &n, "launches"));
  CT_RETURN_IF_ERROR(check_table_fits(c, n, 20, "launches"));
  op->launches.resize(n);
  for (LaunchRecord& l : op->launches) {
    CT_RETURN_IF_ERROR(read_launch(c, &l));
  }
  if (op->outputs.empty()) {
    return bad(std::string(k->name) + " record writes no value");
  }
  if (k->fixed_inputs >= 0 && op->inputs.size() < static_cast<size_t>(k->fixed_inputs)) {
    return bad(std::string(k->name) + " record has " + std::to_string(op->inputs.size()) + " inputs, needs " +
               std::to_string(k->fixed_inputs));
  }
  CT_RETURN_IF_ERROR(k->read(params, op));
  return params.done((std::string(k->name) + " params").c_str());
}

Status check_step_list(const std::string& w, const std::vector<Step>& steps, size_t n_inputs, bool has_result) {
  for (size_t s = 0; s < steps.size(); ++s) {
    const Step& step = steps[s];
    const std::string sw = w + " step " + std::to_string(s);
    if (step.op.empty()) {
      return bad(sw + ": empty op name");
    }
    for (const StepOperand& a : step.operands) {
      if (a.kind == StepOperandKind::kInput && a.index >= n_inputs) {
        return bad(sw + ": input " + std::to_string(a.index) + " out of range (" + std::to_string(n_inputs) +
                   " extra inputs)");
      }
      if (a.kind == StepOperandKind::kStep && a.index >= s) {
        return bad(sw + ": step " + std::to_string(a.index) + " is not an earlier step");
      }
      if (a.kind == StepOperandKind::kResult && !has_result) {
        return bad(sw + ": an elementwise record has no result of its own");
      }
    }
  }
  return Status::Ok();
}

size_t prologue_input_count(const OpRecord& op) {
  return op.kind == OpKind::kConv ? op.conv.prologue_inputs : 0;
}

Status expect_outputs(const OpRecord& op, size_t lo, size_t hi, const char* what) {
  if (op.outputs.size() < lo || op.outputs.size() > hi) {
    return bad(std::string(what) + ": " + std::to_string(op.outputs.size()) + " outputs");
  }
  return Status::Ok();
}

Status expect_value(const Operand& x, const char* what) {
  return x.kind == OperandKind::kValue ? Status::Ok() : bad(std::string(what) + " must be a value");
}

Status expect_tensor(const Operand& x, const char* what) {
  return x.kind != OperandKind::kNone ? Status::Ok() : bad(std::string(what) + " must be a value or a constant");
}

Status expect_tensors_from(const OpRecord& op, size_t first, const char* what) {
  for (size_t i = first; i < op.inputs.size(); ++i) {
    CT_RETURN_IF_ERROR(expect_tensor(op.inputs[i], what));
  }
  return Status::Ok();
}

Status expect_constant(const Operand& x, bool optional, const char* what) {
  if (x.kind == OperandKind::kConstant || (optional && x.kind == OperandKind::kNone)) {
    return Status::Ok();
  }
  return bad(std::string(what) + " must be a constant");
}

const std::vector<int64_t>& operand_sizes(const Blob& b, const Operand& x) {
  return x.kind == OperandKind::kValue ? b.values[x.index].sizes : b.constants[x.index].sizes;
}

DType operand_dtype(const Blob& b, const Operand& x) {
  return x.kind == OperandKind::kValue ? b.values[x.index].dtype : b.constants[x.index].dtype;
}

}  // namespace blob_detail

const char* op_kind_name(OpKind k) {
  const RecordKind* r = record_kind(k);
  return r == nullptr ? "?" : r->name;
}

Status check_op_output_layout(const Blob& b, size_t op) {
  if (op >= b.ops.size()) {
    return Status(Code::kInvalidArgument, "op " + std::to_string(op) + " out of range");
  }
  const OpRecord& r = b.ops[op];
  const RecordKind* k = record_kind(r.kind);
  if (k == nullptr) {
    return Status(Code::kInvalidArgument, "op " + std::to_string(op) + " has an unknown kind");
  }
  return k->check(b, r, "op " + std::to_string(op) + " (" + k->name + ")");
}

}  // namespace cuda_triton
