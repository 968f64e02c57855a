// The blob's header and its kernel / value / constant tables (docs/blob_format.md, "Layout"), and parse_blob.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "blob/blob.h"
#include "blob/encoding.h"
#include "blob/records.h"
#include "common/sha256.h"

namespace cuda_triton {

using namespace blob_detail;

namespace blob_detail {
Status validate(Blob& b);  // validation.cpp
}  // namespace blob_detail

namespace {

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
  CT_RETURN_IF_ERROR(c.enumeration(&v->kind, kNumValueKinds, "value kind"));
  CT_RETURN_IF_ERROR(c.enumeration(&v->dtype, kNumDTypes, "dtype"));
  CT_RETURN_IF_ERROR(c.read(&v->index, "value index"));
  CT_RETURN_IF_ERROR(c.read(&v->offset, "value offset"));
  CT_RETURN_IF_ERROR(c.dims(&v->sizes, "value sizes"));
  CT_RETURN_IF_ERROR(c.dims(&v->strides, "value strides"));
  return Status::Ok();
}

Status read_constant(Cursor& c, ConstantRecord* k) {
  CT_RETURN_IF_ERROR(c.string(&k->key, "constant key"));
  CT_RETURN_IF_ERROR(c.enumeration(&k->dtype, kNumDTypes, "dtype"));
  CT_RETURN_IF_ERROR(c.read(&k->nbytes, "constant nbytes"));
  CT_RETURN_IF_ERROR(c.dims(&k->sizes, "constant sizes"));
  const uint8_t* digest = nullptr;
  CT_RETURN_IF_ERROR(c.take(k->sha256.size(), &digest, "constant sha256"));
  std::memcpy(k->sha256.data(), digest, k->sha256.size());
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
  const std::string name = "section " + std::string(tag, 4);
  Cursor s(nullptr, 0, nullptr);
  CT_RETURN_IF_ERROR(c.sub(length, &s, name.c_str()));
  uint32_t n = 0;
  CT_RETURN_IF_ERROR(s.count(kMaxCount, &n, name.c_str()));
  CT_RETURN_IF_ERROR(check_table_fits(s, n, min_entry_bytes, name.c_str()));
  out->resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    Status st = fn(s, &(*out)[i]);
    if (!st.ok()) {
      return Status(st.code(), st.message() + " (" + name + ", entry " + std::to_string(i) + ")");
    }
  }
  return s.done(name.c_str());
}

}  // namespace

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
                                           "; re-export the model with the matching cuda_triton, or rebuild the "
                                           "runtime");
  }
  uint64_t total = 0;
  CT_RETURN_IF_ERROR(c.read(&total, "total size"));
  if (total != size) {
    return bad("the blob says it has " + std::to_string(total) + " bytes, got " + std::to_string(size));
  }
  // Every byte after the header hashes to the recorded digest, or nothing of the blob is read: a corrupted
  // launch argument (a stride, a grid) would otherwise pass the checks and fault on the GPU.
  const uint8_t* digest = nullptr;
  CT_RETURN_IF_ERROR(c.take(32, &digest, "blob sha256"));
  const size_t header = 4 + 4 + 8 + 32;
  const Sha256::Digest found = Sha256::of(base + header, size - header);
  if (!std::equal(found.begin(), found.end(), digest)) {
    return Status(Code::kInvalidArgument,
                  "the blob's bytes hash to " + Sha256::hex(found) +
                      " (SHA-256), not to the digest its header records: the blob is corrupted (or was written "
                      "before blobs carried a digest; re-export it)");
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
  CT_RETURN_IF_ERROR(c.read(&b.arena_size, "arena size"));
  CT_RETURN_IF_ERROR(c.read(&b.arena_alignment, "arena alignment"));
  CT_RETURN_IF_ERROR(c.read(&b.state_size, "state size"));
  CT_RETURN_IF_ERROR(read_section<KernelRecord>(c, "KERN", 56, read_kernel, &b.kernels));
  CT_RETURN_IF_ERROR(read_section<ValueRecord>(c, "VALS", 22, read_value, &b.values));
  CT_RETURN_IF_ERROR(read_section<ConstantRecord>(c, "CNST", 49, read_constant, &b.constants));
  CT_RETURN_IF_ERROR(read_section<OpRecord>(c, "OPS_", kMinRecordBytes, read_op_record, &b.ops));
  CT_RETURN_IF_ERROR(c.done("blob"));
  CT_RETURN_IF_ERROR(validate(b));
  *out = std::move(b);
  return Status::Ok();
}

}  // namespace cuda_triton
