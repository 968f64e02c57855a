// The delegate blob, as the C++ runtime sees it. Format: docs/blob_format.md (version 2); writer:
// backends/cuda_triton/serialization/blob.py. This part of the runtime depends only on the C++ standard
// library (and the generated layout header), so it can be fuzzed on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace cuda_triton {

constexpr uint32_t kBlobFormatVersion = 2;
constexpr char kBlobMagic[4] = {'C', 'T', 'R', 'B'};
constexpr uint32_t kNoBias = 0xFFFFFFFFu;

enum class DType : uint8_t { kF16 = 0, kBF16 = 1, kF32 = 2, kF64 = 3 };
enum class ParamType : uint8_t { kPtr = 0, kI32 = 1, kI64 = 2, kF32 = 3 };
enum class ValueKind : uint8_t { kInput = 0, kOutput = 1, kIntermediate = 2 };
enum class ArgKind : uint8_t { kValue = 0, kConstant = 1, kNull = 2, kI32 = 3, kI64 = 4, kF32 = 5 };

size_t element_size(DType t);
const char* dtype_name(DType t);

struct KernelRecord {
  std::string name;
  uint32_t arch = 0;
  // The ELF image is not in the blob: it is the program's named data under this key (a content address
  // shared by every partition that uses the same cubin), of exactly cubin_size bytes.
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
  uint32_t index = 0;  // delegate input/output index
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  uint64_t storage_bytes = 0;  // computed by the reader: bytes spanned by sizes/strides
};

struct ConstantRecord {
  std::string key;
  DType dtype = DType::kF32;
  uint64_t nbytes = 0;
  std::vector<int64_t> sizes;
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

struct OpRecord {
  std::vector<int64_t> stride, padding_before, padding_after, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
  uint32_t input = 0;   // value
  uint32_t weight = 0;  // constant
  uint32_t bias = kNoBias;  // constant or kNoBias
  uint32_t output = 0;  // value
  std::vector<int64_t> weight_sizes, weight_strides;
  std::string template_name, schedule;
  std::vector<LaunchRecord> launches;
};

struct Blob {
  uint32_t version = 0;
  std::string triton_version;
  uint32_t flags = 0;
  std::vector<uint32_t> archs;
  uint32_t num_inputs = 0;
  uint32_t num_outputs = 0;
  std::vector<KernelRecord> kernels;
  std::vector<ValueRecord> values;
  std::vector<ConstantRecord> constants;
  std::vector<OpRecord> ops;
};

// Parses and validates a blob: every length, count, enum, index, cross-reference and the output layout of
// every op (against the generated layout rule). Never reads outside [data, data + size), never crashes,
// never allocates more than a small multiple of `size`. Copies everything it keeps (the caller may free
// `data` afterwards).
Status parse_blob(const void* data, size_t size, Blob* out);

// Bytes spanned by a strided tensor: (1 + sum((size_i - 1) * stride_i)) * element size, 0 if any size is 0.
// False on overflow or negative values.
bool storage_bytes(DType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                   uint64_t* out);

// Same sizes, and the same strides on every dim of size > 1 (the dims where a stride changes addresses).
bool same_layout(const std::vector<int64_t>& sizes_a, const std::vector<int64_t>& strides_a,
                 const std::vector<int64_t>& sizes_b, const std::vector<int64_t>& strides_b);

std::string dims_to_string(const std::vector<int64_t>& v);

// Output (sizes, strides) of `op` for an input of the given layout, from the generated layout rule.
Status op_output_layout(const OpRecord& op, DType dtype, const std::vector<int64_t>& input_sizes,
                        const std::vector<int64_t>& input_strides, std::vector<int64_t>* sizes,
                        std::vector<int64_t>* strides);

// Structural check of a cubin (ELF64, little-endian, EM_CUDA) before it is handed to cuModuleLoadData, which
// takes no size and trusts the image's own offsets and counts: the ELF, program and section headers, every
// section's bytes, the section-name and symbol string tables, symbol and relocation tables and the .nv.info
// attribute records must all lie inside [data, data + size). An error names the first inconsistency.
Status check_cubin(const uint8_t* data, size_t size);

// The arch whose cubins run on a device of compute capability major.minor: exact match for arch-specific
// targets (9.0 -> 90 = sm_90a), otherwise the highest 8.y (y <= minor) for 8.x devices. 0 if none.
uint32_t pick_arch(const std::vector<uint32_t>& archs, int major, int minor);

}  // namespace cuda_triton
