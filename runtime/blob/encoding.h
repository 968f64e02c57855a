// The blob's byte-level encoding (docs/blob_format.md, "Encoding"): limits shared with the Python writer
// (backends/cuda_triton/serialization/encoding.py), the bounds-checked cursor every reader is built on, and the
// small checks the sections and record kinds share. Internal to runtime/blob/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "blob/blob.h"

namespace cuda_triton::blob_detail {

// Limits: they keep a malformed blob from asking for absurd allocations before the bytes to back them are seen.
constexpr uint32_t kMaxRank = 8;
constexpr uint32_t kMaxInts = 1024;  // `ints` lists
constexpr uint32_t kMaxCount = 1u << 20;
constexpr uint32_t kMaxString = 1u << 16;
constexpr uint32_t kMaxName = 1024;      // an op record's profiling name
constexpr uint32_t kMaxOpName = 64;      // a reduction's or a step's op
constexpr uint32_t kMaxParams = 1024;    // kernel parameters, launch arguments
constexpr uint32_t kMaxArchs = 64;
constexpr uint32_t kMaxOperands = 1024;  // inputs / outputs of one record
constexpr uint32_t kMaxSteps = 256;
constexpr uint32_t kMaxStepOperands = 8;
constexpr int64_t kMaxDim = int64_t(1) << 62;     // exclusive bound on sizes and strides
constexpr uint64_t kMaxSpan = uint64_t(1) << 48;  // exclusive bound on spans and the arena
constexpr uint64_t kMaxCubin = uint64_t(1) << 32;  // exclusive
constexpr uint32_t kMinArenaAlignment = 16, kMaxArenaAlignment = 256;
constexpr uint64_t kViewAlignment = 16;  // every pointer a kernel receives is 16-byte aligned
constexpr uint8_t kNumDTypes = 7;

Status bad(const std::string& msg);

class Cursor;
// Each count-prefixed table entry needs at least this many bytes, which bounds the resize() that follows.
Status check_table_fits(const Cursor& c, uint32_t n, size_t min_entry_bytes, const char* what);

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

  Status take(size_t n, const uint8_t** out, const char* what);

  template <typename T>
  Status read(T* out, const char* what) {
    const uint8_t* p = nullptr;
    CT_RETURN_IF_ERROR(take(sizeof(T), &p, what));
    std::memcpy(out, p, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
    return Status::Ok();
  }

  // A cursor over the next `n` bytes, which this one skips.
  Status sub(uint64_t n, Cursor* out, const char* what);
  Status count(uint32_t limit, uint32_t* out, const char* what);
  Status flag(bool* out, const char* what);
  Status string(std::string* out, const char* what, uint32_t limit = kMaxString);
  // A u32 count (at most `limit`) and that many entries: `dims` (i64, limit kMaxRank), `ints` (i64, kMaxInts) and
  // the f64 lists.
  template <typename T>
  Status list(std::vector<T>* out, const char* what, uint32_t limit = kMaxRank) {
    uint32_t n = 0;
    CT_RETURN_IF_ERROR(count(limit, &n, what));
    CT_RETURN_IF_ERROR(check_table_fits(*this, n, sizeof(T), what));
    out->resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      CT_RETURN_IF_ERROR(read(&(*out)[i], what));
    }
    return Status::Ok();
  }
  Status dims(std::vector<int64_t>* out, const char* what) {
    return list(out, what);
  }
  Status done(const char* what) const;                       // every byte consumed

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

bool is_pow2(uint64_t v);
bool is_finite(double v);

// Rank <= kMaxRank (guaranteed by the cursor), sizes and strides in [0, 2^62), as many strides as sizes.
Status check_dims(const std::string& what, const std::vector<int64_t>& sizes, const std::vector<int64_t>* strides);

// Runs a generated shape rule; what it throws (std::invalid_argument from `raise ValueError`, overflow, index
// errors) becomes a malformed-blob error naming `where`.
template <typename F>
Status run_rule(const std::string& where, F&& rule) {
  try {
    rule();
  } catch (const std::exception& e) {
    return bad(where + ": " + e.what());
  }
  return Status::Ok();
}

// The sizes a rule gave equal the recorded ones.
Status expect_sizes(const std::string& where, const char* what, const std::vector<int64_t>& recorded,
                    const std::vector<int64_t>& rule);

}  // namespace cuda_triton::blob_detail
