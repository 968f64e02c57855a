// SHA-256 (FIPS 180-4), for checking cubins and constants against the digests the export recorded: a cubin's
// named-data key is its content address, and the program must not hand the driver code that does not hash to
// it. Incremental (update() any number of times, then finish()). On x86-64 CPUs with the SHA extensions the
// compression runs on them (sha256_x86.cpp, about ten times the portable code's speed); elsewhere, portable C++.
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

  // Whether the CPU's SHA instructions are used; tests turn them off to check the portable code too.
  static bool hardware();
  static void set_hardware(bool on);

 private:
  // Compresses `blocks` 64-byte blocks into the state.
  void compress(const uint8_t* data, size_t blocks);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// The round constants K of FIPS 180-4, 4.2.2.
extern const uint32_t kSha256RoundConstants[64];

// The compression function on `blocks` consecutive 64-byte blocks: portable, and with the x86 SHA extensions
// (false when the CPU or the compiler has none, and nothing is done).
void sha256_compress_portable(uint32_t state[8], const uint8_t* data, size_t blocks);
bool sha256_compress_x86(uint32_t state[8], const uint8_t* data, size_t blocks);
bool sha256_x86_available();

}  // namespace cuda_triton
