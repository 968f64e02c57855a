// Test harness for runtime/common/sha256 (tests/test_runtime_sha256.py compares it with Python's hashlib).
//
//   sha256_harness digest [portable] < stream   each message of the stream: "<hex>" of the one-shot digest, or
//                                    "MISMATCH <one-shot> <chunked>" when feeding it in random pieces differs
//   sha256_harness bench MIB [portable]         hashes MIB mebibytes once; prints "MB/s <rate> (...)"
//   sha256_harness hardware         prints 1 when the CPU's SHA instructions are used, else 0
// "portable" turns the CPU's SHA instructions off.
// The stream is a sequence of (u64 little-endian length, bytes).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "common/sha256.h"

using cuda_triton::Sha256;

namespace {

int digest_stream() {
  std::vector<uint8_t> all((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  std::mt19937_64 rng(7);
  size_t p = 0;
  while (p + 8 <= all.size()) {
    uint64_t n = 0;
    std::memcpy(&n, all.data() + p, 8);
    p += 8;
    if (n > all.size() - p) {
      std::fprintf(stderr, "truncated stream\n");
      return 1;
    }
    const uint8_t* msg = all.data() + p;
    const std::string whole = Sha256::hex(Sha256::of(msg, n));
    Sha256 pieces;
    for (size_t done = 0; done < n;) {
      const size_t k = std::min<size_t>(n - done, rng() % 150);
      pieces.update(msg + done, k);
      done += k;
    }
    const std::string chunked = Sha256::hex(pieces.finish());
    if (whole == chunked) {
      std::printf("%s\n", whole.c_str());
    } else {
      std::printf("MISMATCH %s %s\n", whole.c_str(), chunked.c_str());
    }
    p += n;
  }
  return 0;
}

int bench(long mib) {
  std::vector<uint8_t> data(static_cast<size_t>(mib) << 20);
  std::mt19937 rng(1);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const auto t0 = std::chrono::steady_clock::now();
  const std::string hex = Sha256::hex(Sha256::of(data.data(), data.size()));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("MB/s %.1f (%s, %s)\n", static_cast<double>(data.size()) / 1e6 / s,
              Sha256::hardware() ? "SHA instructions" : "portable", hex.substr(0, 16).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::string(argv[argc - 1]) == "portable") {
    Sha256::set_hardware(false);
    --argc;
  }
  if (argc >= 2 && std::string(argv[1]) == "digest") {
    return digest_stream();
  }
  if (argc >= 3 && std::string(argv[1]) == "bench") {
    return bench(std::atol(argv[2]));
  }
  if (argc >= 2 && std::string(argv[1]) == "hardware") {
    std::printf("%d\n", Sha256::hardware() ? 1 : 0);
    return 0;
  }
  std::fprintf(stderr, "usage: sha256_harness digest < stream | sha256_harness bench MIB\n");
  return 2;
}
