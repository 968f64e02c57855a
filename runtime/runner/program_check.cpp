#include "runner/program_check.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <vector>

namespace cuda_triton::runner {

namespace {

// Field numbers of schema/program.fbs (ExecuTorch's program schema) that the checks walk.
constexpr int kProgramExecutionPlan = 1;
constexpr int kPlanValues = 2;
constexpr int kPlanInputs = 3;
constexpr int kPlanOutputs = 4;
constexpr int kPlanDelegates = 7;
constexpr int kPlanNonConstBufferSizes = 8;
constexpr int kDelegateId = 0;
constexpr int kDelegateProcessed = 1;
constexpr int kDelegateCompileSpecs = 2;
constexpr int kCompileSpecKey = 0;
constexpr int kCompileSpecValue = 1;

// A bounds-checked view of a flatbuffer: tables, vectors and strings by byte offset from the buffer start.
class Flatbuffer {
 public:
  Flatbuffer(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool u32(size_t at, uint32_t* out) const {
    if (at > size_ || size_ - at < 4) return false;
    std::memcpy(out, data_ + at, 4);
    return true;
  }
  bool i64(size_t at, int64_t* out) const {
    if (at > size_ || size_ - at < 8) return false;
    std::memcpy(out, data_ + at, 8);
    return true;
  }

  // The root table's offset.
  bool root(size_t* table) const {
    uint32_t off = 0;
    if (!u32(0, &off)) return false;
    *table = off;
    return *table < size_;
  }

  // The offset of field `id` of the table at `table` (0 when absent), false when the table is malformed.
  bool field(size_t table, int id, size_t* at) const {
    uint32_t soff = 0;
    if (!u32(table, &soff)) return false;
    const int64_t vtable = static_cast<int64_t>(table) - static_cast<int32_t>(soff);
    if (vtable < 0 || static_cast<size_t>(vtable) + 4 > size_) return false;
    uint16_t vsize = 0;
    std::memcpy(&vsize, data_ + vtable, 2);
    const size_t slot = 4 + 2 * static_cast<size_t>(id);
    *at = 0;
    if (slot + 2 > vsize) return true;
    if (static_cast<size_t>(vtable) + slot + 2 > size_) return false;
    uint16_t off = 0;
    std::memcpy(&off, data_ + vtable + slot, 2);
    if (off != 0) *at = table + off;
    return true;
  }

  // Follows the uoffset of a reference field at `at` (a vector, string or table); false if out of bounds.
  bool deref(size_t at, size_t* target) const {
    uint32_t off = 0;
    if (!u32(at, &off)) return false;
    *target = at + off;
    return *target < size_;
  }

  // A vector's length, with its elements (`elem` bytes each) inside the buffer.
  bool vector(size_t vec, size_t elem, uint32_t* length) const {
    if (!u32(vec, length)) return false;
    return static_cast<uint64_t>(*length) * elem <= size_ - vec - 4;
  }

  // The present, in-bounds reference field `id` of `table` ("present" is false when the field is absent).
  bool ref_field(size_t table, int id, bool* present, size_t* target) const {
    size_t at = 0;
    if (!field(table, id, &at)) return false;
    *present = at != 0;
    return at == 0 || deref(at, target);
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

bool fail(std::string* error, const std::string& what) {
  *error = "malformed program: " + what;
  return false;
}

}  // namespace

bool check_program_structure(const uint8_t* data, size_t size, uint64_t max_planned_bytes, std::string* error) {
  const Flatbuffer fb(data, size);
  size_t program = 0, plans = 0;
  bool present = false;
  if (!fb.root(&program) || !fb.ref_field(program, kProgramExecutionPlan, &present, &plans)) {
    return fail(error, "the program table is out of bounds");
  }
  uint32_t n_plans = 0;
  if (!present || !fb.vector(plans, 4, &n_plans)) {
    return fail(error, "no execution plans");
  }
  for (uint32_t p = 0; p < n_plans; ++p) {
    size_t plan = 0;
    if (!fb.deref(plans + 4 + 4 * size_t(p), &plan)) {
      return fail(error, "execution plan " + std::to_string(p) + " is out of bounds");
    }
    const std::string where = "execution plan " + std::to_string(p);
    size_t values = 0;
    uint32_t n_values = 0;
    if (!fb.ref_field(plan, kPlanValues, &present, &values) || (present && !fb.vector(values, 4, &n_values))) {
      return fail(error, where + ": its values are out of bounds");
    }
    for (int io : {kPlanInputs, kPlanOutputs}) {
      size_t list = 0;
      uint32_t n = 0;
      if (!fb.ref_field(plan, io, &present, &list) || (present && !fb.vector(list, 4, &n))) {
        return fail(error, where + ": its input/output list is out of bounds");
      }
      for (uint32_t i = 0; i < n; ++i) {
        uint32_t index = 0;
        fb.u32(list + 4 + 4 * size_t(i), &index);
        if (index >= n_values) {
          return fail(error, where + (io == kPlanInputs ? ": input " : ": output ") + std::to_string(i) +
                                 " names value " + std::to_string(static_cast<int32_t>(index)) + " of " +
                                 std::to_string(n_values));
        }
      }
    }
    // The loader allocates (and zero-fills) every planned buffer: a size no machine has hangs it or aborts.
    size_t buffers = 0;
    uint32_t n_buffers = 0;
    if (!fb.ref_field(plan, kPlanNonConstBufferSizes, &present, &buffers) ||
        (present && !fb.vector(buffers, 8, &n_buffers))) {
      return fail(error, where + ": its planned buffer sizes are out of bounds");
    }
    uint64_t planned = 0;
    for (uint32_t i = 0; i < n_buffers; ++i) {
      int64_t bytes = 0;
      fb.i64(buffers + 4 + 8 * size_t(i), &bytes);
      if (bytes < 0 || static_cast<uint64_t>(bytes) > max_planned_bytes - planned) {
        return fail(error, where + ": planned buffer " + std::to_string(i) + " of " + std::to_string(bytes) +
                               " bytes (with the others, more than this machine's memory)");
      }
      planned += static_cast<uint64_t>(bytes);
    }
    size_t delegates = 0;
    uint32_t n_delegates = 0;
    if (!fb.ref_field(plan, kPlanDelegates, &present, &delegates) ||
        (present && !fb.vector(delegates, 4, &n_delegates))) {
      return fail(error, where + ": its delegates are out of bounds");
    }
    for (uint32_t d = 0; d < n_delegates; ++d) {
      const std::string dw = where + ", delegate " + std::to_string(d);
      size_t delegate = 0, id = 0, processed = 0, specs = 0;
      bool has_id = false, has_processed = false, has_specs = false;
      if (!fb.deref(delegates + 4 + 4 * size_t(d), &delegate) || !fb.ref_field(delegate, kDelegateId, &has_id, &id) ||
          !fb.ref_field(delegate, kDelegateProcessed, &has_processed, &processed) ||
          !fb.ref_field(delegate, kDelegateCompileSpecs, &has_specs, &specs)) {
        return fail(error, dw + " is out of bounds");
      }
      if (!has_id || !has_processed) {
        return fail(error, dw + (has_id ? " has no processed data reference" : " has no backend id"));
      }
      uint32_t n_specs = 0;
      if (has_specs && !fb.vector(specs, 4, &n_specs)) {
        return fail(error, dw + ": its compile specs are out of bounds");
      }
      for (uint32_t s = 0; s < n_specs; ++s) {
        size_t spec = 0, key = 0, value = 0;
        bool has_key = false, has_value = false;
        if (!fb.deref(specs + 4 + 4 * size_t(s), &spec) || !fb.ref_field(spec, kCompileSpecKey, &has_key, &key) ||
            !fb.ref_field(spec, kCompileSpecValue, &has_value, &value)) {
          return fail(error, dw + ", compile spec " + std::to_string(s) + " is out of bounds");
        }
        if (!has_key || !has_value) {
          return fail(error, dw + ", compile spec " + std::to_string(s) + " has no " + (has_key ? "value" : "key"));
        }
      }
    }
  }
  return true;
}

bool check_program_file(const std::string& path, std::string* error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *error = "cannot open " + path;
    return false;
  }
  f.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  // The extended header ("eh00" at offset 8) gives the flatbuffer's size; segments (weights, cubins) follow it.
  uint8_t head[24] = {};
  f.read(reinterpret_cast<char*>(head), sizeof(head));
  uint64_t program_size = file_size;
  if (f.gcount() == static_cast<std::streamsize>(sizeof(head)) && std::memcmp(head + 8, "eh00", 4) == 0) {
    std::memcpy(&program_size, head + 16, 8);
    program_size = std::min(program_size, file_size);
  }
  std::vector<uint8_t> data(static_cast<size_t>(program_size));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (f.gcount() != static_cast<std::streamsize>(data.size())) {
    *error = "cannot read " + path;
    return false;
  }
  const uint64_t physical = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return check_program_structure(data.data(), data.size(), physical, error);
}

}  // namespace cuda_triton::runner
