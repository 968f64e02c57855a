// SHA-256 (FIPS 180-4), for checking cubins and constants against the digests the export recorded: a cubin's
// named-data key is its content address, and the program must not hand the driver code that does not hash to
// it. Incremental (update() any number of times, then finish()); STL only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace cuda_triton {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  void update(const void* data, size_t size);
  // The digest of everything passed to update(); the object must not be updated afterwards.
  Digest finish();

  // One-shot helpers.
  static Digest of(const void* data, size_t size);
  static std::string hex(const Digest& digest);

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

}  // namespace cuda_triton
