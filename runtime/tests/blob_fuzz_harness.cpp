// Test harness for the blob reader (built with AddressSanitizer + UBSan by default).
//
//   blob_fuzz_harness check  < stream     each blob in the stream: "ok <summary>" or "err <message>"
//   blob_fuzz_harness mutate N SEED < stream
//       for each blob in the stream, N random mutations (bit flips, byte overwrites, u32/u64 fields set to
//       extreme values, bytes set to small codes such as kinds and tags, u64 fields set to small multiples of 16
//       such as arena and view offsets, truncations, insertions, deletions, splices); prints
//       "<parsed-ok> <rejected>" counts.
// The stream is a sequence of (u64 little-endian length, bytes). Any memory error aborts (non-zero exit).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "blob/blob.h"
#include "common/sha256.h"

namespace {

std::vector<std::vector<uint8_t>> read_stream() {
  std::vector<std::vector<uint8_t>> blobs;
  std::vector<uint8_t> all((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  size_t p = 0;
  while (p + 8 <= all.size()) {
    uint64_t n = 0;
    std::memcpy(&n, all.data() + p, 8);
    p += 8;
    if (n > all.size() - p) break;
    blobs.emplace_back(all.begin() + static_cast<long>(p), all.begin() + static_cast<long>(p + n));
    p += n;
  }
  return blobs;
}

std::string summary(const cuda_triton::Blob& b) {
  size_t launches = 0;
  std::string kinds;
  for (const auto& op : b.ops) {
    launches += op.launches.size();
    kinds += (kinds.empty() ? "" : ",") + std::to_string(static_cast<int>(op.kind));
  }
  return "version=" + std::to_string(b.version) + " triton=" + b.triton_version +
         " kernels=" + std::to_string(b.kernels.size()) + " values=" + std::to_string(b.values.size()) +
         " constants=" + std::to_string(b.constants.size()) + " ops=" + std::to_string(b.ops.size()) +
         " launches=" + std::to_string(launches) + " inputs=" + std::to_string(b.num_inputs) +
         " outputs=" + std::to_string(b.num_outputs) + " arena=" + std::to_string(b.arena_size) +
         " state=" + std::to_string(b.state_size) + " kinds=" + kinds;
}

// Parses a copy in an exactly-sized heap buffer, so ASan flags any read past the end.
bool parse(const std::vector<uint8_t>& bytes, std::string* msg) {
  std::unique_ptr<uint8_t[]> exact(new uint8_t[bytes.size() ? bytes.size() : 1]);
  if (!bytes.empty()) std::memcpy(exact.get(), bytes.data(), bytes.size());
  cuda_triton::Blob b;
  cuda_triton::Status st = cuda_triton::parse_blob(exact.get(), bytes.size(), &b);
  *msg = st.ok() ? summary(b) : st.message();
  return st.ok();
}

std::vector<uint8_t> mutate(const std::vector<uint8_t>& src, std::mt19937_64& rng) {
  std::vector<uint8_t> b = src;
  auto pick = [&](size_t n) { return n == 0 ? size_t(0) : static_cast<size_t>(rng() % n); };
  const int rounds = 1 + static_cast<int>(rng() % 3);
  for (int r = 0; r < rounds; ++r) {
    switch (rng() % 10) {
      case 0:  // bit flip
        if (!b.empty()) b[pick(b.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // byte overwrite
        if (!b.empty()) b[pick(b.size())] = static_cast<uint8_t>(rng());
        break;
      case 2: {  // a u32 field set to an extreme value
        static const uint32_t extremes[] = {0u, 1u, 0x7fffffffu, 0x80000000u, 0xffffffffu, 0xfffffffeu, 65536u, 1u << 20};
        if (b.size() >= 4) {
          uint32_t v = extremes[rng() % 8];
          std::memcpy(b.data() + pick(b.size() - 3), &v, 4);
        }
        break;
      }
      case 3: {  // a u64 field set to an extreme value
        static const uint64_t extremes[] = {0ull, ~0ull, 1ull << 63, (1ull << 32) + 1, 1ull << 40};
        if (b.size() >= 8) {
          uint64_t v = extremes[rng() % 5];
          std::memcpy(b.data() + pick(b.size() - 7), &v, 8);
        }
        break;
      }
      case 4:  // truncation
        b.resize(pick(b.size() + 1));
        break;
      case 5: {  // insertion of random bytes
        size_t at = pick(b.size() + 1), n = 1 + pick(16);
        std::vector<uint8_t> ins(n);
        for (auto& x : ins) x = static_cast<uint8_t>(rng());
        b.insert(b.begin() + static_cast<long>(at), ins.begin(), ins.end());
        break;
      }
      case 6: {  // deletion
        if (!b.empty()) {
          size_t at = pick(b.size()), n = 1 + pick(std::min<size_t>(16, b.size() - at));
          b.erase(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(std::min(b.size(), at + n)));
        }
        break;
      }
      case 7: {  // splice: duplicate a chunk of the blob elsewhere
        if (b.size() > 2) {
          size_t from = pick(b.size()), n = 1 + pick(std::min<size_t>(64, b.size() - from));
          std::vector<uint8_t> chunk(b.begin() + static_cast<long>(from), b.begin() + static_cast<long>(from + n));
          size_t to = pick(b.size());
          std::memcpy(b.data() + to, chunk.data(), std::min(chunk.size(), b.size() - to));
        }
        break;
      }
      case 8:  // a byte set to a small code (record kinds, operand and step tags, enum fields)
        if (!b.empty()) b[pick(b.size())] = static_cast<uint8_t>(rng() % 9);
        break;
      case 9: {  // a u64 set to a small multiple of 16 (arena and view offsets, lengths)
        if (b.size() >= 8) {
          uint64_t v = 16 * (rng() % 64);
          std::memcpy(b.data() + pick(b.size() - 7), &v, 8);
        }
        break;
      }
    }
  }
  // Keep the recorded total size consistent half of the time, and re-seal most of those (the digest recomputed
  // over the mutated bytes), so mutations get past the header checks to the tables and records behind them.
  if (b.size() >= 16 && (rng() & 1)) {
    uint64_t n = b.size();
    std::memcpy(b.data() + 8, &n, 8);
    constexpr size_t kHeader = 4 + 4 + 8 + 32;
    if (b.size() >= kHeader && rng() % 8 != 0) {
      const cuda_triton::Sha256::Digest d = cuda_triton::Sha256::of(b.data() + kHeader, b.size() - kHeader);
      std::memcpy(b.data() + 16, d.data(), d.size());
    }
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  const auto blobs = read_stream();
  if (mode == "check") {
    for (const auto& b : blobs) {
      std::string msg;
      const bool ok = parse(b, &msg);
      std::cout << (ok ? "ok " : "err ") << msg << '\n';
    }
    return 0;
  }
  if (mode == "mutate" && argc == 4) {
    const long n = std::stol(argv[2]);
    std::mt19937_64 rng(std::stoull(argv[3]));
    long accepted = 0, rejected = 0;
    for (const auto& b : blobs) {
      for (long i = 0; i < n; ++i) {
        std::string msg;
        (parse(mutate(b, rng), &msg) ? accepted : rejected)++;
      }
    }
    std::cout << accepted << ' ' << rejected << '\n';
    return 0;
  }
  if (mode == "cubin" && argc == 4) {
    // The stream holds cubins: "ok" or "err <message>" for each, then N single-byte overwrites of every one
    // through check_cubin (in exactly-sized buffers, so ASan flags a read past the end).
    const long n = std::stol(argv[2]);
    std::mt19937_64 rng(std::stoull(argv[3]));
    long accepted = 0, rejected = 0;
    auto check = [](const std::vector<uint8_t>& bytes, std::string* msg) {
      std::unique_ptr<uint8_t[]> exact(new uint8_t[bytes.size() ? bytes.size() : 1]);
      if (!bytes.empty()) std::memcpy(exact.get(), bytes.data(), bytes.size());
      cuda_triton::Status st = cuda_triton::check_cubin(exact.get(), bytes.size());
      *msg = st.message();
      return st.ok();
    };
    for (const auto& b : blobs) {
      std::string msg;
      const bool ok = check(b, &msg);
      std::cout << (ok ? "ok" : "err " + msg) << '\n';
      for (long i = 0; i < n && !b.empty(); ++i) {
        std::vector<uint8_t> m = b;
        m[static_cast<size_t>(rng() % m.size())] = static_cast<uint8_t>(rng());
        (check(m, &msg) ? accepted : rejected)++;
      }
    }
    std::cout << accepted << ' ' << rejected << '\n';
    return 0;
  }
  std::cerr << "usage: blob_fuzz_harness check|mutate N SEED|cubin N SEED < stream\n";
  return 2;
}
