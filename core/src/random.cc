#include "bnn/random.h"

#include <Random123/philox.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif
#include <algorithm>
#include <cmath>
#include <cstring>
#include <locale>
#include <sstream>

namespace bnn {
namespace {

// Pairs of variates per vectorised batch: the temporaries stay in L1.
constexpr size_t kBatch = 64;

uint64_t SplitMix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline double BitsToDouble(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof(d));
  return d;
}
inline uint64_t DoubleToBits(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof(bits));
  return bits;
}

// 128 random bits for pairs first .. first + n - 1 of `stream`: Philox4x32-10
// of the counter (pair index, stream) under `key`, as two 64-bit words. The
// rounds are Random123's philox4x32_R(10, ...) with its constants, written
// on scalars (Random123's array structs do not vectorise). Each 32-bit word
// lives in the low half of a 64-bit lane, so that a round's two products are
// 32 x 32 -> 64-bit multiplies. GCC 12 vectorises the scalar loop but
// emulates those products as full 64 x 64-bit multiplies (three vpmuludq
// and shifts each) where AVX-512DQ is missing, so on AVX2 the lanes are
// written with intrinsics, one vpmuludq per product (on the AVX2 machine of
// perf.md, "Cold Predict": 6.8 -> 1.6 ns of Philox per normal, bit for bit
// the same words). tests/core/random_test.cc checks the values against
// Random123's.
struct PhiloxKeys {
  uint64_t k0[10], k1[10];  // the round keys
};

PhiloxKeys RoundKeys(const uint32_t key[2]) {
  constexpr uint64_t kLow = 0xffffffffULL;
  PhiloxKeys keys;
  keys.k0[0] = key[0];
  keys.k1[0] = key[1];
  for (int round = 1; round < 10; ++round) {
    keys.k0[round] = (keys.k0[round - 1] + PHILOX_W32_0) & kLow;
    keys.k1[round] = (keys.k1[round - 1] + PHILOX_W32_1) & kLow;
  }
  return keys;
}

void PhiloxWords(const uint32_t key[2], uint64_t stream, uint64_t first,
                 size_t n, uint64_t* a, uint64_t* b) {
  constexpr uint64_t kLow = 0xffffffffULL;
  const uint64_t s_lo = stream & kLow;
  const uint64_t s_hi = stream >> 32;
  const PhiloxKeys keys = RoundKeys(key);
  size_t j = 0;
#ifdef __AVX2__
  {
    const __m256i low = _mm256_set1_epi64x(static_cast<int64_t>(kLow));
    const __m256i m0 = _mm256_set1_epi64x(PHILOX_M4x32_0);
    const __m256i m1 = _mm256_set1_epi64x(PHILOX_M4x32_1);
    const __m256i lanes = _mm256_set_epi64x(3, 2, 1, 0);
    // Two independent groups of 4 lanes per iteration: one group's rounds
    // are a chain of dependent multiplies, and the second fills the
    // multiplier's latency (2.8 -> 1.6 ns per normal, measured).
    struct Lanes {
      __m256i c0, c1, c2, c3;
    };
    auto start = [&](uint64_t counter) {
      const __m256i c = _mm256_add_epi64(
          _mm256_set1_epi64x(static_cast<int64_t>(counter)), lanes);
      return Lanes{_mm256_and_si256(c, low), _mm256_srli_epi64(c, 32),
                   _mm256_set1_epi64x(static_cast<int64_t>(s_lo)),
                   _mm256_set1_epi64x(static_cast<int64_t>(s_hi))};
    };
    auto round = [&](Lanes& l, __m256i k0, __m256i k1) {
      const __m256i p0 = _mm256_mul_epu32(l.c0, m0);
      const __m256i p1 = _mm256_mul_epu32(l.c2, m1);
      l.c0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), l.c1),
                              k0);
      l.c2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), l.c3),
                              k1);
      l.c1 = _mm256_and_si256(p1, low);
      l.c3 = _mm256_and_si256(p0, low);
    };
    auto store = [&](const Lanes& l, size_t at) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + at),
                          _mm256_or_si256(l.c0, _mm256_slli_epi64(l.c1, 32)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b + at),
                          _mm256_or_si256(l.c2, _mm256_slli_epi64(l.c3, 32)));
    };
    for (; j + 8 <= n; j += 8) {
      Lanes x = start(first + j), y = start(first + j + 4);
      for (int r = 0; r < 10; ++r) {
        const __m256i k0 = _mm256_set1_epi64x(static_cast<int64_t>(keys.k0[r]));
        const __m256i k1 = _mm256_set1_epi64x(static_cast<int64_t>(keys.k1[r]));
        round(x, k0, k1);
        round(y, k0, k1);
      }
      store(x, j);
      store(y, j + 4);
    }
  }
#endif
#pragma omp simd
  for (size_t i = j; i < n; ++i) {
    const uint64_t c = first + i;
    uint64_t c0 = c & kLow, c1 = c >> 32, c2 = s_lo, c3 = s_hi;
#pragma GCC unroll 10
    for (int round = 0; round < 10; ++round) {
      const uint64_t p0 = uint64_t{PHILOX_M4x32_0} * (c0 & kLow);
      const uint64_t p1 = uint64_t{PHILOX_M4x32_1} * (c2 & kLow);
      const uint64_t n0 = (p1 >> 32) ^ c1 ^ keys.k0[round];
      const uint64_t n2 = (p0 >> 32) ^ c3 ^ keys.k1[round];
      c1 = p1 & kLow;
      c3 = p0 & kLow;
      c0 = n0;
      c2 = n2;
    }
    a[i] = c0 | (c1 << 32);
    b[i] = c2 | (c3 << 32);
  }
}

// A uniform on [1, 2) from the top 52 bits of `bits` (an exact, branch-free
// conversion that vectorises without 64-bit integer-to-double instructions).
inline double UniformOneTwo(uint64_t bits) {
  return BitsToDouble(0x3ff0000000000000ULL | (bits >> 12));
}

// log(u) for a normal double u in (0, 1]: fdlibm's e_log reduction and
// minimax polynomial (error below 1 ulp), without its special cases.
inline double LogUnit(double u) {
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  constexpr double kSqrt2 = 1.41421356237309514547;
  constexpr double kLg1 = 6.666666666666735130e-01;
  constexpr double kLg2 = 3.999999999940941908e-01;
  constexpr double kLg3 = 2.857142874366239149e-01;
  constexpr double kLg4 = 2.222219843214978396e-01;
  constexpr double kLg5 = 1.818357216161805012e-01;
  constexpr double kLg6 = 1.531383769920937332e-01;
  constexpr double kLg7 = 1.479819860511658591e-01;
  const uint64_t bits = DoubleToBits(u);
  // The biased exponent as a double, by the 2^52 trick (exact).
  double e = BitsToDouble(0x4330000000000000ULL | (bits >> 52)) -
             (4503599627370496.0 + 1023.0);
  double m = BitsToDouble((bits & 0x000fffffffffffffULL) |
                          0x3ff0000000000000ULL);  // [1, 2)
  // To [sqrt(1/2), sqrt(2)): when m > sqrt 2, halve m (its exponent field
  // minus one) and add 1 to e. Masks, not branches or selects, so that the
  // loop calling this has no control flow and vectorises (GCC 12 does not
  // if-convert the selects; perf.md, "Cold Predict").
  const uint64_t high = uint64_t{0} - static_cast<uint64_t>(m > kSqrt2);
  m = BitsToDouble(DoubleToBits(m) - (high & 0x0010000000000000ULL));
  e += BitsToDouble(high & 0x3ff0000000000000ULL);  // + 1.0 or + 0.0
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double r =
      z * (kLg1 +
           z * (kLg2 +
                z * (kLg3 + z * (kLg4 + z * (kLg5 + z * (kLg6 + z * kLg7))))));
  const double hfsq = 0.5 * f * f;
  return e * kLn2Hi - ((hfsq - (s * (hfsq + r) + e * kLn2Lo)) - f);
}

// cos(2 pi u) and sin(2 pi u) for u in [0, 1): quarter turns q = round(4u)
// and a = (4u - q) pi / 2 in [-pi/4, pi/4], fdlibm's sin and cos kernels on
// a, then rotation by q quarter turns.
inline void CosSin2Pi(double u, double* c, double* s) {
  constexpr double kHalfPi = 1.57079632679489655800e+00;
  constexpr double kS1 = -1.66666666666666324348e-01;
  constexpr double kS2 = 8.33333333332248946124e-03;
  constexpr double kS3 = -1.98412698298579493134e-04;
  constexpr double kS4 = 2.75573137070700676789e-06;
  constexpr double kS5 = -2.50507602534068634195e-08;
  constexpr double kS6 = 1.58969099521155010221e-10;
  constexpr double kC1 = 4.16666666666666019037e-02;
  constexpr double kC2 = -1.38888888888741095749e-03;
  constexpr double kC3 = 2.48015872894767294178e-05;
  constexpr double kC4 = -2.75573143513906633035e-07;
  constexpr double kC5 = 2.08757232129817482790e-09;
  constexpr double kC6 = -1.13596475577881948265e-11;
  constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52
  const double t = 4.0 * u;
  const double shifted = t + kRound;         // round to nearest; the integer's
  const uint64_t q = DoubleToBits(shifted);  // low bits are q's
  const double a = (t - (shifted - kRound)) * kHalfPi;
  const double z = a * a;
  const double sin_a =
      a +
      a * z * (kS1 + z * (kS2 + z * (kS3 + z * (kS4 + z * (kS5 + z * kS6)))));
  const double cos_a =
      1.0 - 0.5 * z +
      z * z * (kC1 + z * (kC2 + z * (kC3 + z * (kC4 + z * (kC5 + z * kC6)))));
  // cos(q pi/2 + a), sin(q pi/2 + a) for q mod 4 = 0, 1, 2, 3:
  // (c, s), (-s, c), (-c, -s), (s, -c). Swaps and sign flips by bit masks
  // (see LogUnit).
  const uint64_t swap = uint64_t{0} - (q & 1);
  const uint64_t sin_bits = DoubleToBits(sin_a), cos_bits = DoubleToBits(cos_a);
  const uint64_t cc = (sin_bits & swap) | (cos_bits & ~swap);
  const uint64_t ss = (cos_bits & swap) | (sin_bits & ~swap);
  *c = BitsToDouble(cc ^ (((q + 1) & 2) << 62));
  *s = BitsToDouble(ss ^ ((q & 2) << 62));
}

// Standard normal pairs (z0[j], z1[j]) = sqrt(-2 log u1) (cos, sin)(2 pi u2)
// for pairs first .. first + n - 1 of `stream`, n <= kBatch.
void NormalPairs(const uint32_t key[2], uint64_t stream, uint64_t first,
                 size_t n, double* z0, double* z1) {
  uint64_t a[kBatch], b[kBatch];
  PhiloxWords(key, stream, first, n, a, b);
#pragma omp simd
  for (size_t j = 0; j < n; ++j) {
    const double u1 = 2.0 - UniformOneTwo(a[j]);  // (0, 1]
    const double u2 = UniformOneTwo(b[j]) - 1.0;  // [0, 1)
    const double r = std::sqrt(-2.0 * LogUnit(u1));
    double c, s;
    CosSin2Pi(u2, &c, &s);
    z0[j] = r * c;
    z1[j] = r * s;
  }
}

}  // namespace

CounterRng::CounterRng(uint64_t seed) : seed_(seed) {
  const uint64_t normal = SplitMix(seed);
  const uint64_t uniform = SplitMix(seed ^ 0x75aa1f0b5c3e9d27ULL);
  normal_key_[0] = static_cast<uint32_t>(normal);
  normal_key_[1] = static_cast<uint32_t>(normal >> 32);
  uniform_key_[0] = static_cast<uint32_t>(uniform);
  uniform_key_[1] = static_cast<uint32_t>(uniform >> 32);
}

void CounterRng::FillNormal(uint64_t stream, uint64_t offset, double* out,
                            size_t n) const {
  // Variate i is member i % 2 of pair i / 2.
  double z0[kBatch], z1[kBatch];
  const uint64_t end = offset + n;
  uint64_t i = offset;
  while (i < end) {
    const uint64_t pair = i / 2;
    const size_t pairs = static_cast<size_t>(
        std::min<uint64_t>(kBatch, (end - 2 * pair + 1) / 2));
    NormalPairs(normal_key_, stream, pair, pairs, z0, z1);
    size_t j = 0;
    if (i % 2 == 1) {  // the batch starts with the second of a pair
      *out++ = z1[0];
      ++i;
      j = 1;
    }
    for (; j < pairs && i + 1 < end; ++j, i += 2) {
      *out++ = z0[j];
      *out++ = z1[j];
    }
    if (j < pairs && i < end) {  // the range ends with the first of a pair
      *out++ = z0[j];
      ++i;
    }
  }
}

void CounterRng::FillUniform(uint64_t stream, uint64_t offset, double* out,
                             size_t n) const {
  // Uniform i is word i % 2 of Philox call i / 2.
  uint64_t a[kBatch], b[kBatch];
  const uint64_t end = offset + n;
  uint64_t i = offset;
  while (i < end) {
    const uint64_t call = i / 2;
    const size_t calls = static_cast<size_t>(
        std::min<uint64_t>(kBatch, (end - 2 * call + 1) / 2));
    PhiloxWords(uniform_key_, stream, call, calls, a, b);
    for (size_t j = 0; j < calls; ++j) {
      const uint64_t words[2] = {a[j], b[j]};
      for (int w = 0; w < 2; ++w) {
        const uint64_t index = 2 * (call + j) + w;
        if (index >= offset && index < end) {
          *out++ = UniformOneTwo(words[w]) - 1.0;
        }
      }
    }
    i = 2 * (call + calls);
  }
}

std::string Rng::SaveState() const {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out << seed_ << ' ' << engine_ << ' ' << normal_ << ' ' << uniform_;
  return out.str();
}

absl::Status Rng::LoadState(absl::string_view state) {
  std::istringstream in{std::string(state)};
  in.imbue(std::locale::classic());
  uint64_t seed = 0;
  std::mt19937_64 engine;
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform;
  in >> seed >> engine >> normal >> uniform;
  if (in.fail() || !(in >> std::ws).eof()) {
    return absl::InvalidArgumentError(
        "random generator state does not parse (not written by "
        "Rng::SaveState of this standard library)");
  }
  seed_ = seed;
  engine_ = engine;
  normal_ = normal;
  uniform_ = uniform;
  return absl::OkStatus();
}

}  // namespace bnn
