// The blob's byte-level encoding and the small utilities of blob.h (docs/blob_format.md, "Encoding").
#include "blob/encoding.h"

#include <cmath>
#include <sstream>

namespace cuda_triton {

namespace blob_detail {

Status bad(const std::string& msg) {
  return Status(Code::kInvalidProgram, "malformed CudaTritonBackend blob: " + msg);
}

Status Cursor::take(size_t n, const uint8_t** out, const char* what) {
  if (n > remaining()) {
    return bad(std::string("truncated ") + what + ": need " + std::to_string(n) + " bytes at offset " +
               std::to_string(offset()) + ", " + std::to_string(remaining()) + " left");
  }
  *out = p_;
  p_ += n;
  return Status::Ok();
}

Status Cursor::sub(uint64_t n, Cursor* out, const char* what) {
  if (n > remaining()) {
    return bad(std::string(what) + " of " + std::to_string(n) + " bytes runs past the end");
  }
  const uint8_t* p = nullptr;
  CT_RETURN_IF_ERROR(take(static_cast<size_t>(n), &p, what));
  *out = Cursor(p, static_cast<size_t>(n), base_);
  return Status::Ok();
}

Status Cursor::count(uint32_t limit, uint32_t* out, const char* what) {
  CT_RETURN_IF_ERROR(read(out, what));
  if (*out > limit) {
    return bad(std::string(what) + " count " + std::to_string(*out) + " exceeds the limit " + std::to_string(limit));
  }
  return Status::Ok();
}

Status Cursor::flag(bool* out, const char* what) {
  uint8_t v = 0;
  CT_RETURN_IF_ERROR(read(&v, what));
  if (v > 1) {
    return bad(std::string("bad ") + what + " flag " + std::to_string(v));
  }
  *out = v == 1;
  return Status::Ok();
}

Status Cursor::string(std::string* out, const char* what, uint32_t limit) {
  uint32_t n = 0;
  CT_RETURN_IF_ERROR(count(limit, &n, what));
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

Status Cursor::done(const char* what) const {
  if (remaining() != 0) {
    return bad(std::string(what) + ": " + std::to_string(remaining()) + " trailing bytes");
  }
  return Status::Ok();
}

Status check_table_fits(const Cursor& c, uint32_t n, size_t min_entry_bytes, const char* what) {
  if (static_cast<uint64_t>(n) * min_entry_bytes > c.remaining()) {
    return bad(std::string(what) + ": " + std::to_string(n) + " entries cannot fit in " +
               std::to_string(c.remaining()) + " bytes");
  }
  return Status::Ok();
}

bool is_pow2(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

bool is_finite(double v) {
  return std::isfinite(v);
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

Status expect_sizes(const std::string& where, const char* what, const std::vector<int64_t>& recorded,
                    const std::vector<int64_t>& rule) {
  if (recorded != rule) {
    return bad(where + ": the shape rule gives " + what + " sizes " + dims_to_string(rule) + ", the plan records " +
               dims_to_string(recorded));
  }
  return Status::Ok();
}

}  // namespace blob_detail

size_t element_size(DType t) {
  switch (t) {
    case DType::kBool:
      return 1;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF64:
    case DType::kI64:
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
    case DType::kI32:
      return "int32";
    case DType::kI64:
      return "int64";
    case DType::kBool:
      return "bool";
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
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0 || strides[i] < 0) {
      return false;
    }
  }
  for (int64_t s : sizes) {
    if (s == 0) {
      *out = 0;
      return true;
    }
  }
  uint64_t span = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    uint64_t term = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(sizes[i] - 1), static_cast<uint64_t>(strides[i]), &term) ||
        __builtin_add_overflow(span, term, &span)) {
      return false;
    }
  }
  return !__builtin_mul_overflow(span, static_cast<uint64_t>(element_size(dtype)), out) &&
         *out < blob_detail::kMaxSpan;
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

}  // namespace cuda_triton
