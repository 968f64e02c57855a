// Bounds-checked parser for the delegate blob (docs/blob_format.md).
#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <set>
#include <sstream>

#include "blob/blob.h"
#include "generated/conv_layout.h"

namespace cuda_triton {

namespace {

// Limits shared with the Python writer (blob.py): they keep a malformed blob from asking for absurd
// allocations before the bytes to back them have been seen.
constexpr uint32_t kMaxRank = 8;
constexpr uint32_t kMaxCount = 1u << 20;
constexpr uint32_t kMaxString = 1u << 16;
constexpr uint32_t kMaxParams = 1024;
constexpr uint32_t kMaxArchs = 64;
constexpr int64_t kMaxDim = int64_t(1) << 62;
constexpr uint64_t kMaxCubin = uint64_t(1) << 32;  // exclusive

Status bad(const std::string& msg) {
  return Status(Code::kInvalidProgram, "malformed CudaTritonBackend blob: " + msg);
}

// A cursor over [begin, end): every read checks the remaining length first.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const uint8_t* base) : p_(data), end_(data + size), base_(base) {}

  size_t remaining() const {
    return static_cast<size_t>(end_ - p_);
  }
  size_t offset() const {
    return static_cast<size_t>(p_ - base_);
  }
  const uint8_t* pos() const {
    return p_;
  }

  Status take(size_t n, const uint8_t** out, const char* what) {
    if (n > remaining()) {
      return bad(std::string("truncated ") + what + ": need " + std::to_string(n) + " bytes at offset " +
                 std::to_string(offset()) + ", " + std::to_string(remaining()) + " left");
    }
    *out = p_;
    p_ += n;
    return Status::Ok();
  }

  template <typename T>
  Status read(T* out, const char* what) {
    const uint8_t* p = nullptr;
    CT_RETURN_IF_ERROR(take(sizeof(T), &p, what));
    std::memcpy(out, p, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
    return Status::Ok();
  }

  Status count(uint32_t limit, uint32_t* out, const char* what) {
    CT_RETURN_IF_ERROR(read(out, what));
    if (*out > limit) {
      return bad(std::string(what) + " count " + std::to_string(*out) + " exceeds the limit " +
                 std::to_string(limit));
    }
    return Status::Ok();
  }

  Status string(std::string* out, const char* what) {
    uint32_t n = 0;
    CT_RETURN_IF_ERROR(count(kMaxString, &n, what));
    const uint8_t* p = nullptr;
    CT_RETURN_IF_ERROR(take(n, &p, what));
    for (uint32_t i = 0; i < n; ++i) {
      if (p[i] < 0x20 || p[i] > 0x7e) {
        return bad(std::string(what) + " is not printable ASCII");
      }
    }
    out->assign(reinterpret_cast<const char*>(p), n);
    return Status::Ok();
  }

  Status dims(std::vector<int64_t>* out, const char* what) {
    uint32_t n = 0;
    CT_RETURN_IF_ERROR(count(kMaxRank, &n, what));
    out->resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      CT_RETURN_IF_ERROR(read(&(*out)[i], what));
    }
    return Status::Ok();
  }

  template <typename E>
  Status enumeration(E* out, uint8_t num_values, const char* what) {
    uint8_t c = 0;
    CT_RETURN_IF_ERROR(read(&c, what));
    if (c >= num_values) {
      return bad(std::string("bad ") + what + " code " + std::to_string(c));
    }
    *out = static_cast<E>(c);
    return Status::Ok();
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* base_;
};

// Each count-prefixed table entry needs at least this many bytes, which bounds the reserve() we do.
Status check_table_fits(const Cursor& c, uint32_t n, size_t min_entry_bytes, const char* what) {
  if (static_cast<uint64_t>(n) * min_entry_bytes > c.remaining()) {
    return bad(std::string(what) + ": " + std::to_string(n) + " entries cannot fit in " +
               std::to_string(c.remaining()) + " bytes");
  }
  return Status::Ok();
}

Status read_kernel(Cursor& c, KernelRecord* k) {
  CT_RETURN_IF_ERROR(c.string(&k->name, "kernel name"));
  uint32_t flags = 0;
  CT_RETURN_IF_ERROR(c.read(&k->arch, "kernel arch"));
  CT_RETURN_IF_ERROR(c.read(&k->num_warps, "num_warps"));
  CT_RETURN_IF_ERROR(c.read(&k->num_ctas, "num_ctas"));
  CT_RETURN_IF_ERROR(c.read(&k->shared, "shared"));
  CT_RETURN_IF_ERROR(c.read(&k->global_scratch_size, "global_scratch_size"));
  CT_RETURN_IF_ERROR(c.read(&k->global_scratch_align, "global_scratch_align"));
  CT_RETURN_IF_ERROR(c.read(&k->profile_scratch_size, "profile_scratch_size"));
  CT_RETURN_IF_ERROR(c.read(&k->profile_scratch_align, "profile_scratch_align"));
  CT_RETURN_IF_ERROR(c.read(&flags, "kernel flags"));
  if (flags & ~3u) {
    return bad("kernel " + k->name + ": unknown flags " + std::to_string(flags));
  }
  k->cooperative = (flags & 1u) != 0;
  k->pdl = (flags & 2u) != 0;
  uint32_t np = 0;
  CT_RETURN_IF_ERROR(c.count(kMaxParams, &np, "kernel params"));
  CT_RETURN_IF_ERROR(check_table_fits(c, np, 1, "kernel params"));
  k->params.resize(np);
  for (uint32_t i = 0; i < np; ++i) {
    CT_RETURN_IF_ERROR(c.enumeration(&k->params[i], 4, "param type"));
  }
  CT_RETURN_IF_ERROR(c.string(&k->cubin_key, "cubin key"));
  CT_RETURN_IF_ERROR(c.read(&k->cubin_size, "cubin size"));
  return Status::Ok();
}

Status read_value(Cursor& c, ValueRecord* v) {
  CT_RETURN_IF_ERROR(c.enumeration(&v->kind, 3, "value kind"));
  CT_RETURN_IF_ERROR(c.enumeration(&v->dtype, 4, "dtype"));
  CT_RETURN_IF_ERROR(c.read(&v->index, "value index"));
  CT_RETURN_IF_ERROR(c.dims(&v->sizes, "value sizes"));
  CT_RETURN_IF_ERROR(c.dims(&v->strides, "value strides"));
  return Status::Ok();
}

Status read_constant(Cursor& c, ConstantRecord* k) {
  CT_RETURN_IF_ERROR(c.string(&k->key, "constant key"));
  CT_RETURN_IF_ERROR(c.enumeration(&k->dtype, 4, "dtype"));
  CT_RETURN_IF_ERROR(c.read(&k->nbytes, "constant nbytes"));
  CT_RETURN_IF_ERROR(c.dims(&k->sizes, "constant sizes"));
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

Status read_op(Cursor& c, OpRecord* op) {
  CT_RETURN_IF_ERROR(c.dims(&op->stride, "stride"));
  CT_RETURN_IF_ERROR(c.dims(&op->padding_before, "padding_before"));
  CT_RETURN_IF_ERROR(c.dims(&op->padding_after, "padding_after"));
  CT_RETURN_IF_ERROR(c.dims(&op->dilation, "dilation"));
  CT_RETURN_IF_ERROR(c.dims(&op->output_padding, "output_padding"));
  uint8_t transposed = 0;
  CT_RETURN_IF_ERROR(c.read(&transposed, "transposed"));
  if (transposed > 1) {
    return bad("transposed flag " + std::to_string(transposed));
  }
  op->transposed = transposed != 0;
  CT_RETURN_IF_ERROR(c.read(&op->groups, "groups"));
  CT_RETURN_IF_ERROR(c.read(&op->input, "op input"));
  CT_RETURN_IF_ERROR(c.read(&op->weight, "op weight"));
  CT_RETURN_IF_ERROR(c.read(&op->bias, "op bias"));
  CT_RETURN_IF_ERROR(c.read(&op->output, "op output"));
  CT_RETURN_IF_ERROR(c.dims(&op->weight_sizes, "weight sizes"));
  CT_RETURN_IF_ERROR(c.dims(&op->weight_strides, "weight strides"));
  CT_RETURN_IF_ERROR(c.string(&op->template_name, "template name"));
  CT_RETURN_IF_ERROR(c.string(&op->schedule, "schedule"));
  uint32_t nl = 0;
  CT_RETURN_IF_ERROR(c.count(kMaxCount, &nl, "launches"));
  CT_RETURN_IF_ERROR(check_table_fits(c, nl, 20, "launches"));
  op->launches.resize(nl);
  for (auto& l : op->launches) {
    uint32_t na = 0;
    CT_RETURN_IF_ERROR(c.count(kMaxArchs, &na, "launch archs"));
    CT_RETURN_IF_ERROR(check_table_fits(c, na, 8, "launch archs"));
    l.kernels.resize(na);
    for (auto& [arch, index] : l.kernels) {
      CT_RETURN_IF_ERROR(c.read(&arch, "launch arch"));
      CT_RETURN_IF_ERROR(c.read(&index, "launch kernel index"));
    }
    for (uint32_t& g : l.grid) {
      CT_RETURN_IF_ERROR(c.read(&g, "grid"));
    }
    uint32_t nargs = 0;
    CT_RETURN_IF_ERROR(c.count(kMaxParams, &nargs, "launch args"));
    CT_RETURN_IF_ERROR(check_table_fits(c, nargs, 9, "launch args"));
    l.args.resize(nargs);
    for (auto& a : l.args) {
      CT_RETURN_IF_ERROR(read_arg(c, &a));
    }
  }
  return Status::Ok();
}

template <typename T>
Status read_section(Cursor& c, const char tag[4], size_t min_entry_bytes, Status (*fn)(Cursor&, T*),
                    std::vector<T>* out) {
  const uint8_t* t = nullptr;
  CT_RETURN_IF_ERROR(c.take(4, &t, "section tag"));
  if (std::memcmp(t, tag, 4) != 0) {
    return bad(std::string("expected section ") + std::string(tag, 4) + " at offset " +
               std::to_string(c.offset() - 4));
  }
  uint64_t length = 0;
  CT_RETURN_IF_ERROR(c.read(&length, "section length"));
  if (length > c.remaining()) {
    return bad("section " + std::string(tag, 4) + " of " + std::to_string(length) + " bytes runs past the end");
  }
  const uint8_t* body = nullptr;
  CT_RETURN_IF_ERROR(c.take(static_cast<size_t>(length), &body, "section"));
  Cursor s(body, static_cast<size_t>(length), body);
  uint32_t n = 0;
  CT_RETURN_IF_ERROR(s.count(kMaxCount, &n, tag));
  CT_RETURN_IF_ERROR(check_table_fits(s, n, min_entry_bytes, tag));
  out->resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    Status st = fn(s, &(*out)[i]);
    if (!st.ok()) {
      return Status(st.code(), st.message() + " (section " + std::string(tag, 4) + ", entry " +
                                   std::to_string(i) + ")");
    }
  }
  if (s.remaining() != 0) {
    return bad("section " + std::string(tag, 4) + " has " + std::to_string(s.remaining()) + " trailing bytes");
  }
  return Status::Ok();
}

bool is_pow2(uint32_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

Status check_dims(const std::string& what, const std::vector<int64_t>& sizes, const std::vector<int64_t>* strides) {
  for (int64_t s : sizes) {
    if (s < 0 || s >= kMaxDim) {
      return bad(what + ": bad sizes " + dims_to_string(sizes));
    }
  }
  if (strides != nullptr) {
    if (strides->size() != sizes.size()) {
      return bad(what + ": " + std::to_string(sizes.size()) + " sizes but " + std::to_string(strides->size()) +
                 " strides");
    }
    for (int64_t s : *strides) {
      if (s < 0 || s >= kMaxDim) {
        return bad(what + ": bad strides " + dims_to_string(*strides));
      }
    }
  }
  return Status::Ok();
}

Status validate(Blob& b) {
  if (b.flags != 0) {
    return bad("flags must be 0 in format version " + std::to_string(kBlobFormatVersion));
  }
  if (b.archs.empty()) {
    return bad("no target archs");
  }
  std::set<uint32_t> archs(b.archs.begin(), b.archs.end());
  if (archs.size() != b.archs.size()) {
    return bad("duplicate target archs");
  }
  for (size_t k = 0; k < b.kernels.size(); ++k) {
    const KernelRecord& kr = b.kernels[k];
    const std::string w = "kernel " + std::to_string(k) + " (" + kr.name + ")";
    if (kr.name.empty()) {
      return bad(w + ": empty name");
    }
    if (archs.count(kr.arch) == 0) {
      return bad(w + ": arch " + std::to_string(kr.arch) + " is not a target arch of the blob");
    }
    if (kr.cubin_key.empty()) {
      return bad(w + ": empty cubin key");
    }
    if (kr.cubin_size == 0 || kr.cubin_size >= kMaxCubin) {
      return bad(w + ": cubin size " + std::to_string(kr.cubin_size));
    }
    if (kr.num_warps < 1 || kr.num_warps > 32) {
      return bad(w + ": num_warps " + std::to_string(kr.num_warps));
    }
    if (kr.num_ctas < 1 || kr.num_ctas > 16) {
      return bad(w + ": num_ctas " + std::to_string(kr.num_ctas));
    }
    if (!is_pow2(kr.global_scratch_align) || !is_pow2(kr.profile_scratch_align)) {
      return bad(w + ": scratch alignment is not a power of two");
    }
  }
  std::set<std::pair<int, uint32_t>> io_seen;
  for (size_t v = 0; v < b.values.size(); ++v) {
    ValueRecord& vr = b.values[v];
    const std::string w = "value " + std::to_string(v);
    CT_RETURN_IF_ERROR(check_dims(w, vr.sizes, &vr.strides));
    if (!storage_bytes(vr.dtype, vr.sizes, vr.strides, &vr.storage_bytes)) {
      return bad(w + ": storage size overflows");
    }
    if (vr.kind == ValueKind::kInput && vr.index >= b.num_inputs) {
      return bad(w + ": input index " + std::to_string(vr.index) + " out of range");
    }
    if (vr.kind == ValueKind::kOutput && vr.index >= b.num_outputs) {
      return bad(w + ": output index " + std::to_string(vr.index) + " out of range");
    }
    if (vr.kind == ValueKind::kIntermediate && vr.index != 0) {
      return bad(w + ": intermediates have index 0");
    }
    if (vr.kind != ValueKind::kIntermediate) {
      auto key = std::make_pair(static_cast<int>(vr.kind), vr.index);
      if (!io_seen.insert(key).second) {
        return bad(w + ": delegate input/output described twice");
      }
    }
  }
  for (uint32_t i = 0; i < b.num_outputs; ++i) {
    if (io_seen.count({static_cast<int>(ValueKind::kOutput), i}) == 0) {
      return bad("delegate output " + std::to_string(i) + " has no value record");
    }
  }
  for (size_t k = 0; k < b.constants.size(); ++k) {
    const ConstantRecord& cr = b.constants[k];
    const std::string w = "constant " + std::to_string(k) + " (" + cr.key + ")";
    if (cr.key.empty()) {
      return bad(w + ": empty key");
    }
    CT_RETURN_IF_ERROR(check_dims(w, cr.sizes, nullptr));
    uint64_t n = element_size(cr.dtype);
    for (int64_t s : cr.sizes) {
      if (__builtin_mul_overflow(n, static_cast<uint64_t>(s), &n)) {
        return bad(w + ": size overflows");
      }
    }
    if (n != cr.nbytes) {
      return bad(w + ": nbytes " + std::to_string(cr.nbytes) + " != " + std::to_string(n) + " from its sizes");
    }
  }

  std::vector<bool> produced(b.values.size(), false);
  for (size_t v = 0; v < b.values.size(); ++v) {
    produced[v] = b.values[v].kind == ValueKind::kInput;
  }
  for (size_t o = 0; o < b.ops.size(); ++o) {
    const OpRecord& op = b.ops[o];
    const std::string w = "op " + std::to_string(o);
    const size_t n = op.stride.size();
    if (n < 1 || n > 3) {
      return bad(w + ": " + std::to_string(n) + " spatial dims");
    }
    if (op.padding_before.size() != n || op.padding_after.size() != n || op.dilation.size() != n ||
        op.output_padding.size() != n) {
      return bad(w + ": conv argument lists disagree on the number of spatial dims");
    }
    for (size_t i = 0; i < n; ++i) {
      if (op.stride[i] < 1 || op.dilation[i] < 1 || op.padding_before[i] < 0 || op.padding_after[i] < 0 ||
          op.output_padding[i] < 0 || op.stride[i] >= (int64_t(1) << 31) || op.dilation[i] >= (int64_t(1) << 31) ||
          op.padding_before[i] >= (int64_t(1) << 31) || op.padding_after[i] >= (int64_t(1) << 31) ||
          op.output_padding[i] >= (int64_t(1) << 31)) {
        return bad(w + ": conv arguments out of range");
      }
    }
    if (op.groups < 1 || op.groups >= (int64_t(1) << 31)) {
      return bad(w + ": groups " + std::to_string(op.groups));
    }
    if (op.input >= b.values.size() || op.output >= b.values.size()) {
      return bad(w + ": input/output value index out of range");
    }
    if (op.weight >= b.constants.size() || (op.bias != kNoBias && op.bias >= b.constants.size())) {
      return bad(w + ": weight/bias constant index out of range");
    }
    const ValueRecord& in = b.values[op.input];
    const ValueRecord& out = b.values[op.output];
    if (out.kind == ValueKind::kInput) {
      return bad(w + ": writes a delegate input");
    }
    if (!produced[op.input]) {
      return bad(w + ": reads value " + std::to_string(op.input) + " before any op produces it");
    }
    if (in.dtype != out.dtype) {
      return bad(w + ": input is " + dtype_name(in.dtype) + " but output is " + dtype_name(out.dtype));
    }
    if (op.weight_sizes.size() != n + 2) {
      return bad(w + ": weight rank " + std::to_string(op.weight_sizes.size()) + " for a " + std::to_string(n) +
                 "-D conv");
    }
    CT_RETURN_IF_ERROR(check_dims(w + " weight", op.weight_sizes, &op.weight_strides));
    if (in.sizes.size() != n + 2 && in.sizes.size() != n + 1) {
      return bad(w + ": input rank " + std::to_string(in.sizes.size()) + " for a " + std::to_string(n) +
                 "-D conv");
    }
    const int64_t in_channels = in.sizes[in.sizes.size() == n + 2 ? 1 : 0];
    int64_t expect = op.weight_sizes[0];
    if (!op.transposed && __builtin_mul_overflow(op.weight_sizes[1], op.groups, &expect)) {
      return bad(w + ": weight channels * groups overflows");
    }
    if (in_channels != expect) {
      return bad(w + ": input has " + std::to_string(in_channels) + " channels, weight expects " +
                 std::to_string(expect));
    }
    std::vector<int64_t> sizes, strides;
    Status st = op_output_layout(op, in.dtype, in.sizes, in.strides, &sizes, &strides);
    if (!st.ok()) {
      return bad(w + ": " + st.message());
    }
    if (!same_layout(sizes, strides, out.sizes, out.strides)) {
      return bad(w + ": the layout rule gives an output of sizes " + dims_to_string(sizes) + " strides " +
                 dims_to_string(strides) + ", the plan records sizes " + dims_to_string(out.sizes) + " strides " +
                 dims_to_string(out.strides));
    }

    for (size_t li = 0; li < op.launches.size(); ++li) {
      const LaunchRecord& l = op.launches[li];
      const std::string lw = w + " launch " + std::to_string(li);
      if (l.kernels.size() != b.archs.size()) {
        return bad(lw + ": has kernels for " + std::to_string(l.kernels.size()) + " archs, the blob targets " +
                   std::to_string(b.archs.size()));
      }
      std::set<uint32_t> seen;
      for (const auto& [arch, ki] : l.kernels) {
        if (archs.count(arch) == 0 || !seen.insert(arch).second) {
          return bad(lw + ": bad or repeated arch " + std::to_string(arch));
        }
        if (ki >= b.kernels.size()) {
          return bad(lw + ": kernel index " + std::to_string(ki) + " out of range");
        }
        const KernelRecord& kr = b.kernels[ki];
        if (kr.arch != arch) {
          return bad(lw + ": kernel " + std::to_string(ki) + " is for arch " + std::to_string(kr.arch) +
                     ", listed under " + std::to_string(arch));
        }
        if (kr.params.size() != l.args.size()) {
          return bad(lw + ": " + std::to_string(l.args.size()) + " arguments for kernel " + kr.name + " with " +
                     std::to_string(kr.params.size()) + " parameters");
        }
        if (static_cast<uint64_t>(l.grid[0]) * kr.num_ctas > 0x7fffffffull) {
          return bad(lw + ": grid x too large");
        }
        for (size_t ai = 0; ai < l.args.size(); ++ai) {
          const ArgRecord& a = l.args[ai];
          const ParamType t = kr.params[ai];
          const std::string aw = lw + " arg " + std::to_string(ai);
          const bool is_ptr = a.kind == ArgKind::kValue || a.kind == ArgKind::kConstant || a.kind == ArgKind::kNull;
          if ((t == ParamType::kPtr) != is_ptr || (t == ParamType::kI32 && a.kind != ArgKind::kI32) ||
              (t == ParamType::kI64 && a.kind != ArgKind::kI64) || (t == ParamType::kF32 && a.kind != ArgKind::kF32)) {
            return bad(aw + ": argument kind does not match the kernel's parameter type");
          }
          if (a.kind == ArgKind::kValue && a.ref >= b.values.size()) {
            return bad(aw + ": value " + std::to_string(a.ref) + " out of range");
          }
          if (a.kind == ArgKind::kConstant && a.ref >= b.constants.size()) {
            return bad(aw + ": constant " + std::to_string(a.ref) + " out of range");
          }
          if (a.kind == ArgKind::kI32 &&
              (a.integer < std::numeric_limits<int32_t>::min() || a.integer > std::numeric_limits<int32_t>::max())) {
            return bad(aw + ": i32 value out of range");
          }
        }
      }
      if (l.grid[0] < 1 || l.grid[1] < 1 || l.grid[2] < 1 || l.grid[1] > 65535 || l.grid[2] > 65535) {
        return bad(lw + ": grid out of range");
      }
      // Scratch buffers are sized per CTA: the total must not wrap around (the runtime would allocate too little).
      for (const auto& [arch, ki] : l.kernels) {
        const KernelRecord& kr = b.kernels[ki];
        const uint64_t ctas = uint64_t(l.grid[0]) * kr.num_ctas * l.grid[1] * l.grid[2];  // < 2^63, checked above
        const uint64_t per_cta = std::max(kr.global_scratch_size, kr.profile_scratch_size);
        uint64_t total = 0;
        if (__builtin_mul_overflow(ctas, per_cta, &total) || total > (uint64_t(1) << 40)) {
          return bad(lw + ": scratch of " + std::to_string(per_cta) + " bytes for each of " + std::to_string(ctas) +
                     " CTAs is too large");
        }
      }
    }
    produced[op.output] = true;
  }
  for (size_t v = 0; v < b.values.size(); ++v) {
    if (b.values[v].kind == ValueKind::kOutput && !produced[v]) {
      return bad("delegate output " + std::to_string(b.values[v].index) + " is never written");
    }
  }
  return Status::Ok();
}

}  // namespace

size_t element_size(DType t) {
  switch (t) {
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF16:
      return "fp16";
    case DType::kBF16:
      return "bf16";
    case DType::kF32:
      return "fp32";
    case DType::kF64:
      return "fp64";
  }
  return "?";
}

std::string dims_to_string(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) {
    os << (i ? ", " : "") << v[i];
  }
  os << "]";
  return os.str();
}

bool storage_bytes(DType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                   uint64_t* out) {
  if (sizes.size() != strides.size()) {
    return false;
  }
  uint64_t span = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0 || strides[i] < 0) {
      return false;
    }
    if (sizes[i] == 0) {
      *out = 0;
      return true;
    }
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    uint64_t term = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(sizes[i] - 1), static_cast<uint64_t>(strides[i]), &term) ||
        __builtin_add_overflow(span, term, &span)) {
      return false;
    }
  }
  return !__builtin_mul_overflow(span, static_cast<uint64_t>(element_size(dtype)), out) &&
         *out < (uint64_t(1) << 48);
}

bool same_layout(const std::vector<int64_t>& sizes_a, const std::vector<int64_t>& strides_a,
                 const std::vector<int64_t>& sizes_b, const std::vector<int64_t>& strides_b) {
  if (sizes_a != sizes_b || strides_a.size() != sizes_a.size() || strides_b.size() != sizes_b.size()) {
    return false;
  }
  for (size_t i = 0; i < sizes_a.size(); ++i) {
    if (sizes_a[i] > 1 && strides_a[i] != strides_b[i]) {
      return false;
    }
  }
  return true;
}

Status op_output_layout(const OpRecord& op, DType dtype, const std::vector<int64_t>& input_sizes,
                        const std::vector<int64_t>& input_strides, std::vector<int64_t>* sizes,
                        std::vector<int64_t>* strides) {
  const size_t n = op.stride.size();
  if (op.weight_sizes.size() != n + 2 || op.weight_strides.size() != n + 2 ||
      (input_sizes.size() != n + 1 && input_sizes.size() != n + 2) || input_strides.size() != input_sizes.size()) {
    return Status(Code::kInvalidArgument, "ranks do not match the conv's spatial dims");
  }
  try {
    auto r = layout::out_shape_and_stride(input_sizes, input_strides, op.weight_sizes, op.weight_strides, op.stride,
                                          op.padding_before, op.padding_after, op.dilation, op.transposed,
                                          op.output_padding, op.groups, dtype == DType::kF64);
    *sizes = std::move(r.first);
    *strides = std::move(r.second);
  } catch (const std::exception& e) {
    return Status(Code::kInvalidArgument, std::string("layout rule failed: ") + e.what());
  }
  for (int64_t s : *sizes) {
    if (s < 0) {
      return Status(Code::kInvalidArgument, "the conv's output would have a negative size " + dims_to_string(*sizes));
    }
  }
  return Status::Ok();
}

uint32_t pick_arch(const std::vector<uint32_t>& archs, int major, int minor) {
  if (major <= 0 || minor < 0) {
    return 0;
  }
  const uint32_t exact = static_cast<uint32_t>(major * 10 + minor);
  uint32_t best = 0;
  for (uint32_t a : archs) {
    if (a == exact) {
      return a;
    }
    // Cubins for sm_80-class targets run on later minor revisions of the same major; arch-specific targets
    // (sm_90a and later, which Triton emits for major >= 9) only on their exact device.
    if (major < 9 && a / 10 == static_cast<uint32_t>(major) && a % 10 <= static_cast<uint32_t>(minor) && a > best) {
      best = a;
    }
  }
  return best;
}

Status parse_blob(const void* data, size_t size, Blob* out) {
  if (data == nullptr) {
    return bad("no data");
  }
  const uint8_t* base = static_cast<const uint8_t*>(data);
  Cursor c(base, size, base);
  const uint8_t* magic = nullptr;
  CT_RETURN_IF_ERROR(c.take(4, &magic, "magic"));
  if (std::memcmp(magic, kBlobMagic, 4) != 0) {
    return Status(Code::kIncompatible, "not a CudaTritonBackend blob (bad magic)");
  }
  Blob b;
  CT_RETURN_IF_ERROR(c.read(&b.version, "format version"));
  if (b.version != kBlobFormatVersion) {
    return Status(Code::kIncompatible, "CudaTritonBackend blob format version " + std::to_string(b.version) +
                                           ", this runtime reads version " + std::to_string(kBlobFormatVersion) +
                                           "; re-export the model or rebuild the runtime");
  }
  uint64_t total = 0;
  CT_RETURN_IF_ERROR(c.read(&total, "total size"));
  if (total != size) {
    return bad("the blob says it has " + std::to_string(total) + " bytes, got " + std::to_string(size));
  }
  CT_RETURN_IF_ERROR(c.string(&b.triton_version, "triton version"));
  CT_RETURN_IF_ERROR(c.read(&b.flags, "flags"));
  uint32_t na = 0;
  CT_RETURN_IF_ERROR(c.count(kMaxArchs, &na, "archs"));
  CT_RETURN_IF_ERROR(check_table_fits(c, na, 4, "archs"));
  b.archs.resize(na);
  for (uint32_t& a : b.archs) {
    CT_RETURN_IF_ERROR(c.read(&a, "arch"));
  }
  CT_RETURN_IF_ERROR(c.read(&b.num_inputs, "num_inputs"));
  CT_RETURN_IF_ERROR(c.read(&b.num_outputs, "num_outputs"));
  if (b.num_inputs > kMaxCount || b.num_outputs > kMaxCount) {
    return bad("too many delegate inputs/outputs");
  }
  CT_RETURN_IF_ERROR(read_section<KernelRecord>(c, "KERN", 56, read_kernel, &b.kernels));
  CT_RETURN_IF_ERROR(read_section<ValueRecord>(c, "VALS", 14, read_value, &b.values));
  CT_RETURN_IF_ERROR(read_section<ConstantRecord>(c, "CNST", 17, read_constant, &b.constants));
  CT_RETURN_IF_ERROR(read_section<OpRecord>(c, "OPS_", 65, read_op, &b.ops));
  if (c.remaining() != 0) {
    return bad(std::to_string(c.remaining()) + " trailing bytes");
  }
  CT_RETURN_IF_ERROR(validate(b));
  *out = std::move(b);
  return Status::Ok();
}

}  // namespace cuda_triton

namespace cuda_triton {

namespace {

// ELF64 constants (System V gABI) and the CUDA-specific ones a cubin uses.
constexpr uint16_t kEmCuda = 190;
constexpr uint32_t kShtSymtab = 2, kShtStrtab = 3, kShtRela = 4, kShtNobits = 8, kShtRel = 9;
constexpr uint32_t kShtNvInfo = 0x70000000u;
constexpr uint16_t kShnLoReserve = 0xff00;
constexpr size_t kEhdrSize = 64, kPhdrSize = 56, kShdrSize = 64, kSymSize = 24;

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

Status bad_cubin(const std::string& msg) {
  return Status(Code::kInvalidProgram, "malformed cubin: " + msg);
}

// [offset, offset + count * entry) inside [0, size), without overflow.
bool table_fits(uint64_t offset, uint64_t count, uint64_t entry, size_t size) {
  uint64_t bytes = 0, end = 0;
  return !__builtin_mul_overflow(count, entry, &bytes) && !__builtin_add_overflow(offset, bytes, &end) &&
         end <= size;
}

struct Section {
  uint32_t name, type, link, info;
  uint64_t offset, size, entsize;
};

}  // namespace

Status check_cubin(const uint8_t* data, size_t size) {
  if (data == nullptr || size < kEhdrSize) {
    return bad_cubin(std::to_string(size) + " bytes, shorter than an ELF header");
  }
  if (std::memcmp(data, "\x7f" "ELF", 4) != 0 || data[4] != 2 || data[5] != 1 || data[6] != 1) {
    return bad_cubin("not a little-endian ELF64 image");
  }
  if (load<uint16_t>(data + 18) != kEmCuda) {
    return bad_cubin("ELF machine " + std::to_string(load<uint16_t>(data + 18)) + " is not CUDA");
  }
  const uint64_t phoff = load<uint64_t>(data + 32), shoff = load<uint64_t>(data + 40);
  const uint16_t ehsize = load<uint16_t>(data + 52), phentsize = load<uint16_t>(data + 54);
  const uint16_t phnum = load<uint16_t>(data + 56), shentsize = load<uint16_t>(data + 58);
  const uint16_t shnum = load<uint16_t>(data + 60), shstrndx = load<uint16_t>(data + 62);
  if (ehsize != kEhdrSize) {
    return bad_cubin("ELF header size " + std::to_string(ehsize));
  }
  if (phnum > 0 && (phentsize != kPhdrSize || !table_fits(phoff, phnum, kPhdrSize, size))) {
    return bad_cubin("program header table (offset " + std::to_string(phoff) + ", " + std::to_string(phnum) +
                     " entries of " + std::to_string(phentsize) + " bytes) outside the " + std::to_string(size) +
                     "-byte image");
  }
  for (uint16_t i = 0; i < phnum; ++i) {
    const uint8_t* ph = data + phoff + i * kPhdrSize;
    const uint64_t off = load<uint64_t>(ph + 8), filesz = load<uint64_t>(ph + 32);
    if (filesz > 0 && !table_fits(off, filesz, 1, size)) {
      return bad_cubin("segment " + std::to_string(i) + " outside the image");
    }
  }
  if (shnum == 0 || shoff == 0 || shentsize != kShdrSize || !table_fits(shoff, shnum, kShdrSize, size)) {
    return bad_cubin("section header table (offset " + std::to_string(shoff) + ", " + std::to_string(shnum) +
                     " entries of " + std::to_string(shentsize) + " bytes) outside the " + std::to_string(size) +
                     "-byte image");
  }
  std::vector<Section> sh(shnum);
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint8_t* p = data + shoff + i * kShdrSize;
    Section& s = sh[i];
    s.name = load<uint32_t>(p);
    s.type = load<uint32_t>(p + 4);
    s.offset = load<uint64_t>(p + 24);
    s.size = load<uint64_t>(p + 32);
    s.link = load<uint32_t>(p + 40);
    s.info = load<uint32_t>(p + 44);
    s.entsize = load<uint64_t>(p + 56);
    if (s.type != kShtNobits && s.size > 0 && !table_fits(s.offset, s.size, 1, size)) {
      return bad_cubin("section " + std::to_string(i) + " (offset " + std::to_string(s.offset) + ", " +
                       std::to_string(s.size) + " bytes) outside the image");
    }
    if (s.link >= shnum) {
      return bad_cubin("section " + std::to_string(i) + " links to section " + std::to_string(s.link));
    }
  }
  // A string table: inside the image (checked above) and NUL-terminated, so every name in it ends inside.
  auto strtab_ok = [&](uint32_t idx) {
    return idx < shnum && sh[idx].type == kShtStrtab && sh[idx].size > 0 &&
           data[sh[idx].offset + sh[idx].size - 1] == 0;
  };
  if (!strtab_ok(shstrndx)) {
    return bad_cubin("bad section-name string table index " + std::to_string(shstrndx));
  }
  for (uint16_t i = 0; i < shnum; ++i) {
    const Section& s = sh[i];
    const std::string w = "section " + std::to_string(i);
    if (s.name >= sh[shstrndx].size) {
      return bad_cubin(w + ": name offset " + std::to_string(s.name) + " outside the string table");
    }
    // Only indexed while s.size > 0, when [offset, offset + size) is known to lie inside the image.
    auto body = [&](uint64_t k) { return data + s.offset + k; };
    if (s.type == kShtSymtab) {
      if (s.entsize != kSymSize || s.size % kSymSize != 0 || !strtab_ok(s.link)) {
        return bad_cubin(w + ": bad symbol table");
      }
      for (uint64_t k = 0; k < s.size / kSymSize; ++k) {
        const uint8_t* sym = body(k * kSymSize);
        const uint16_t shndx = load<uint16_t>(sym + 6);
        if (load<uint32_t>(sym) >= sh[s.link].size || (shndx >= shnum && shndx < kShnLoReserve)) {
          return bad_cubin(w + ": symbol " + std::to_string(k) + " has a bad name or section");
        }
      }
    } else if (s.type == kShtRela || s.type == kShtRel) {
      const uint64_t ent = s.type == kShtRela ? 24 : 16;
      if (s.entsize != ent || s.size % ent != 0 || sh[s.link].type != kShtSymtab || s.info >= shnum) {
        return bad_cubin(w + ": bad relocation table");
      }
      const uint64_t nsyms = sh[s.link].size / kSymSize;
      const Section& target = sh[s.info];
      for (uint64_t k = 0; k < s.size / ent; ++k) {
        const uint8_t* r = body(k * ent);
        if ((load<uint64_t>(r + 8) >> 32) >= nsyms || load<uint64_t>(r) >= target.size) {
          return bad_cubin(w + ": relocation " + std::to_string(k) + " has a bad symbol or offset");
        }
      }
    } else if (s.type == kShtNvInfo) {
      // Attribute records: u8 format, u8 attribute, then a u16 value, or (format 4) a u16 length + that many bytes.
      uint64_t p = 0;
      while (p < s.size) {
        if (s.size - p < 4) {
          return bad_cubin(w + ": truncated attribute record");
        }
        const uint8_t format = *body(p);
        if (format < 1 || format > 4) {
          return bad_cubin(w + ": attribute format " + std::to_string(format));
        }
        const uint64_t len = format == 4 ? 4 + uint64_t(load<uint16_t>(body(p + 2))) : 4;
        if (len > s.size - p) {
          return bad_cubin(w + ": attribute record runs past the section");
        }
        p += len;
      }
    }
  }
  return Status::Ok();
}

}  // namespace cuda_triton
