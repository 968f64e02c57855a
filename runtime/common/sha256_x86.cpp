// SHA-256 compression on the x86 SHA extensions (SHA-NI: sha256rnds2, sha256msg1, sha256msg2). The state is kept
// as the two halves the round instruction works on, (A, B, E, F) and (C, D, G, H); each instruction does two
// rounds, so a group of four message words takes two of them.
#include "common/sha256.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

namespace cuda_triton {

bool sha256_x86_available() {
  return __builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1");
}

__attribute__((target("sha,sse4.1,ssse3"))) bool sha256_compress_x86(uint32_t state[8], const uint8_t* data,
                                                                      size_t blocks) {
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state));
  __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4));
  const __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
  const __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
  __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
  for (; blocks > 0; --blocks, data += 64) {
    const __m128i abef_start = abef, cdgh_start = cdgh;
    __m128i w[4];  // the message words of the last four groups, w[g % 4] for group g
    for (int g = 0; g < 16; ++g) {
      __m128i& words = w[g % 4];
      if (g < 4) {
        words = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * g)), byte_swap);
      } else {
        // W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], four at a time: msg1 adds s0 to the oldest group,
        // the words t-7..t-4 come from the two previous groups, msg2 adds the s1 terms.
        const __m128i t7 = _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4);
        words = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(words, w[(g + 1) % 4]), t7), w[(g + 3) % 4]);
      }
      __m128i k = _mm_add_epi32(words, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kSha256RoundConstants + 4 * g)));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, k);
      k = _mm_shuffle_epi32(k, 0x0E);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, k);
    }
    abef = _mm_add_epi32(abef, abef_start);
    cdgh = _mm_add_epi32(cdgh, cdgh_start);
  }
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  dcba = _mm_blend_epi16(feba, dchg, 0xF0);
  hgfe = _mm_alignr_epi8(dchg, feba, 8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), dcba);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), hgfe);
  return true;
}

}  // namespace cuda_triton

#else

namespace cuda_triton {

bool sha256_x86_available() {
  return false;
}

bool sha256_compress_x86(uint32_t*, const uint8_t*, size_t) {
  return false;
}

}  // namespace cuda_triton

#endif
