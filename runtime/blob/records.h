// Op records (docs/blob_format.md, "OPS_"): the common layout every kind shares, and the table of kinds. Each
// kind lives in records/<kind>.cpp: it reads its params and checks its shape rule (a generated header:
// conv_layout.h, or the <kind>_checks.h of backends/cuda_triton/serialization/checks/<kind>.py). Adding a kind: a
// file there, an entry in kKinds (records.cpp), its OpKind in blob.h.
// Internal to runtime/blob/.
#pragma once

#include <string>

#include "blob/blob.h"
#include "blob/encoding.h"

namespace cuda_triton::blob_detail {

constexpr size_t kMinRecordBytes = 33;  // kind, 3 strings, 4 counts and the params length, all empty

struct RecordKind {
  OpKind kind;
  const char* name;
  int fixed_inputs;  // inputs before the steps' extra inputs; -1: every input belongs to the kind itself
  bool has_result;   // the kind computes a result of its own that steps may use
  // Reads the params (the cursor covers exactly them) and checks the generic lists fit the kind.
  Status (*read)(Cursor& params, OpRecord* op);
  // The kind's parameter and shape-rule checks; indices are known to be in range.
  Status (*check)(const Blob& b, const OpRecord& op, const std::string& where);
};

// The kind of `op`, never null for a parsed record.
const RecordKind* record_kind(OpKind kind);

Status read_op_record(Cursor& c, OpRecord* op);
Status read_step(Cursor& c, Step* s);

// A fused chain's steps are well formed: inputs below `n_inputs`, earlier steps only, a result operand only where
// the record has a result of its own.
Status check_step_list(const std::string& w, const std::vector<Step>& steps, size_t n_inputs, bool has_result);
// The inputs at the end of `op.inputs` that belong to its prologue (a convolution's), not to its epilogue.
size_t prologue_input_count(const OpRecord& op);

// Helpers shared by the kinds.
Status expect_outputs(const OpRecord& op, size_t lo, size_t hi, const char* what);
Status expect_value(const Operand& x, const char* what);
Status expect_tensor(const Operand& x, const char* what);         // a value or a constant
Status expect_tensors_from(const OpRecord& op, size_t first, const char* what);
Status expect_constant(const Operand& x, bool optional, const char* what);
const std::vector<int64_t>& operand_sizes(const Blob& b, const Operand& x);  // x: a value or a constant
DType operand_dtype(const Blob& b, const Operand& x);

// The kinds (records/<kind>.cpp).
Status read_conv(Cursor& c, OpRecord* op);
Status check_conv(const Blob& b, const OpRecord& op, const std::string& where);
Status read_elementwise(Cursor& c, OpRecord* op);
Status check_elementwise(const Blob& b, const OpRecord& op, const std::string& where);
Status read_reduction(Cursor& c, OpRecord* op);
Status check_reduction(const Blob& b, const OpRecord& op, const std::string& where);
Status read_pooling(Cursor& c, OpRecord* op);
Status check_pooling(const Blob& b, const OpRecord& op, const std::string& where);
Status read_gemm(Cursor& c, OpRecord* op);
Status check_gemm(const Blob& b, const OpRecord& op, const std::string& where);
Status read_norm(Cursor& c, OpRecord* op);
Status check_norm(const Blob& b, const OpRecord& op, const std::string& where);
Status read_data_movement(Cursor& c, OpRecord* op);
Status check_data_movement(const Blob& b, const OpRecord& op, const std::string& where);

}  // namespace cuda_triton::blob_detail
