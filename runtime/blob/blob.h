// The delegate blob, as the C++ runtime sees it. Format: docs/blob_format.md (version 6); writer:
// backends/cuda_triton/serialization/. This part of the runtime depends only on the C++ standard library (and the
// generated layout headers), so it can be fuzzed on its own.
//
// Files: encoding.{h,cpp} (the bounds-checked cursor, dtypes, spans), sections.cpp (header, kernel / value /
// constant tables, parse_blob), records.{h,cpp} (the common op-record layout and the kind table),
// records/<kind>.cpp (each kind's params and shape rule), validation.cpp (the checks every blob passes),
// cubin_check.cpp (the ELF check of a cubin).

#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace cuda_triton {

constexpr uint32_t kBlobFormatVersion = 6;
constexpr char kBlobMagic[4] = {'C', 'T', 'R', 'B'};

enum class DType : uint8_t { kF16 = 0, kBF16 = 1, kF32 = 2, kF64 = 3, kI32 = 4, kI64 = 5, kBool = 6 };
enum class ParamType : uint8_t { kPtr = 0, kI32 = 1, kI64 = 2, kF32 = 3 };
// kState: in the delegate's state buffer, zeroed once at init and kept across executes (split-K tile counters).
enum class ValueKind : uint8_t { kInput = 0, kOutput = 1, kIntermediate = 2, kView = 3, kState = 4 };
constexpr uint8_t kNumValueKinds = 5;
enum class ArgKind : uint8_t { kValue = 0, kConstant = 1, kNull = 2, kI32 = 3, kI64 = 4, kF32 = 5 };
enum class OpKind : uint8_t {
  kConv = 0,
  kElementwise = 1,
  kReduction = 2,
  kPooling = 3,
  kGemm = 4,
  kNorm = 5,
  kDataMovement = 6,
};
enum class OperandKind : uint8_t { kValue = 0, kConstant = 1, kNone = 2 };
enum class StepOperandKind : uint8_t { kInput = 0, kResult = 1, kStep = 2, kScalar = 3 };

size_t element_size(DType t);
const char* dtype_name(DType t);
const char* op_kind_name(OpKind k);

struct KernelRecord {
  std::string name;
  uint32_t arch = 0;
  // The ELF image is not in the blob: it is the program's named data under this key, its content address
  // ("cuda_triton/cubin/sm<arch>/<first 40 hex digits of its SHA-256>"), of exactly cubin_size bytes.
  std::string cubin_key;
  uint64_t cubin_size = 0;
  uint32_t num_warps = 0;
  uint32_t num_ctas = 0;
  uint32_t shared = 0;
  uint32_t global_scratch_size = 0;
  uint32_t global_scratch_align = 1;
  uint32_t profile_scratch_size = 0;
  uint32_t profile_scratch_align = 1;
  bool cooperative = false;
  bool pdl = false;
  std::vector<ParamType> params;  // without the two trailing scratch pointers
};

struct ValueRecord {
  ValueKind kind = ValueKind::kIntermediate;
  DType dtype = DType::kF32;
  uint32_t index = 0;   // delegate input/output index; for a view, its base value
  // intermediate: byte offset in the arena; state: in the state buffer; view: byte offset from its base's first
  // element
  uint64_t offset = 0;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  uint64_t storage_bytes = 0;  // computed by the reader: the span, bytes reached from the first element
  uint32_t root = 0;           // computed by the reader: the input / output / intermediate / state value holding
                               // its bytes
};

struct ConstantRecord {
  std::string key;
  DType dtype = DType::kF32;
  uint64_t nbytes = 0;
  std::vector<int64_t> sizes;
  std::array<uint8_t, 32> sha256{};  // of exactly the nbytes bytes stored under `key`
};

struct ArgRecord {
  ArgKind kind = ArgKind::kNull;
  uint64_t ref = 0;     // value or constant index
  int64_t integer = 0;  // kI32 / kI64
  float fp32 = 0.0f;    // kF32
};

struct LaunchRecord {
  std::vector<std::pair<uint32_t, uint32_t>> kernels;  // (arch, kernel index), one per blob arch
  uint32_t grid[3] = {1, 1, 1};
  std::vector<ArgRecord> args;
};

// A record input: a value, a constant, or an absent optional operand.
struct Operand {
  OperandKind kind = OperandKind::kNone;
  uint32_t index = 0;
};

struct StepOperand {
  StepOperandKind kind = StepOperandKind::kResult;
  uint64_t index = 0;  // kInput: the extra input; kStep: the earlier step
  double scalar = 0.0;  // kScalar
};

// One op of a fused elementwise chain (by the name the elementwise family defines).
struct Step {
  std::string op;
  std::vector<StepOperand> operands;
};

struct ConvParams {
  std::vector<int64_t> stride, padding_before, padding_after, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
  std::vector<int64_t> weight_sizes, weight_strides;  // the weight's ATen shape and strides
  // A fused chain on the input as it is read: the last `prologue_inputs` inputs are its operands.
  std::vector<Step> prologue;
  uint32_t prologue_inputs = 0;
};

struct ReductionParams {
  std::string op;
  std::vector<int64_t> dims;
  bool keepdim = false;
};

struct PoolingParams {
  uint8_t op = 0;  // layout::pooling::MAX_POOL, AVG_POOL, ADAPTIVE_AVG_POOL
  std::vector<int64_t> kernel, stride, padding, dilation, output_size;
  bool ceil_mode = false;
  bool count_include_pad = false;
  int64_t divisor_override = 0;
};

struct GemmParams {
  std::vector<int64_t> b_sizes;  // b's logical (K, N) / (B, K, N) shape
  double alpha = 1.0;
  double beta = 1.0;
  bool row_norm = false;  // each row of a normalised over K first (a layer norm folded into the GEMM)
  double norm_eps = 0.0;
};

struct NormParams {
  uint8_t op = 0;  // layout::norm_checks::BATCH_NORM ...
  int64_t dim = 0;
  int64_t groups = 0;
  double eps = 0.0;
};

struct DataMovementParams {
  uint8_t op = 0;  // layout::data_movement_checks::COPY ...
  int64_t dim = 0;                              // cat, split, slice
  int64_t start = 0, end = 0, step = 1;         // slice
  std::vector<int64_t> perm;                    // permute
  uint8_t mode = 0;                             // pad, upsample
  std::vector<int64_t> pad;                     // pad: (before, after) pairs from the last dim backwards
  double value = 0.0;                           // pad
  bool align_corners = false;                   // upsample
  std::vector<int64_t> output_size;             // upsample
  std::vector<double> scales;                   // upsample
};

struct OpRecord {
  OpKind kind = OpKind::kConv;
  std::string name;  // profiling name, e.g. the edge ops the record covers
  std::string template_name, schedule;
  std::vector<Operand> inputs;    // positions per kind (docs/blob_format.md); the extra inputs of `steps` follow
  std::vector<uint32_t> outputs;  // value indices
  std::vector<Step> steps;        // fused elementwise chain (an elementwise record's whole computation)
  std::vector<LaunchRecord> launches;
  // The kind's fields: only the member for `kind` is filled in.
  ConvParams conv;
  ReductionParams reduction;
  PoolingParams pooling;
  GemmParams gemm;
  NormParams norm;
  DataMovementParams data_movement;
};

struct Blob {
  uint32_t version = 0;
  std::string triton_version;
  uint32_t flags = 0;
  std::vector<uint32_t> archs;
  uint32_t num_inputs = 0;
  uint32_t num_outputs = 0;
  uint64_t arena_size = 0;        // bytes of the device arena holding every intermediate
  uint32_t arena_alignment = 0;   // its base address is a multiple of this (a power of two in [16, 256])
  uint64_t state_size = 0;        // bytes of the state buffer holding every state value (zeroed once at init)
  std::vector<KernelRecord> kernels;
  std::vector<ValueRecord> values;
  std::vector<ConstantRecord> constants;
  std::vector<OpRecord> ops;
};

// Parses and validates a blob: every length, count, enum, index, cross-reference, the arena placement by
// lifetime, the state buffer's placement and the shape rule of every op record. Never reads outside
// [data, data + size), never crashes, never allocates more than a small multiple of `size`. Copies everything it
// keeps (the caller may free `data` afterwards).
Status parse_blob(const void* data, size_t size, Blob* out);

// Re-runs op `op`'s shape rule on the values the blob records (what execute() checks before launching it).
Status check_op_output_layout(const Blob& blob, size_t op);

// Bytes spanned by a strided tensor: (1 + sum((size_i - 1) * stride_i)) * element size, 0 if any size is 0.
// False on overflow, negative values or a span of 2^48 bytes or more.
bool storage_bytes(DType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                   uint64_t* out);

// Same sizes, and the same strides on every dim of size > 1 (the dims where a stride changes addresses).
bool same_layout(const std::vector<int64_t>& sizes_a, const std::vector<int64_t>& strides_a,
                 const std::vector<int64_t>& sizes_b, const std::vector<int64_t>& strides_b);

std::string dims_to_string(const std::vector<int64_t>& v);

// Structural check of a cubin (ELF64, little-endian, EM_CUDA) before it is handed to cuModuleLoadData, which
// takes no size and trusts the image's own offsets and counts: the ELF, program and section headers, every
// section's bytes, the section-name and symbol string tables, symbol and relocation tables and the .nv.info
// attribute records must all lie inside [data, data + size). An error names the first inconsistency.
Status check_cubin(const uint8_t* data, size_t size);

// The arch whose cubins run on a device of compute capability major.minor: exact match for arch-specific
// targets (9.0 -> 90 = sm_90a), otherwise the highest 8.y (y <= minor) for 8.x devices. 0 if none.
uint32_t pick_arch(const std::vector<uint32_t>& archs, int major, int minor);

}  // namespace cuda_triton
