// Seeded random number generation. Every job and request owns one Rng built
// from a user-visible seed; sub-streams are split deterministically so that the
// same seed gives the same bits regardless of thread count. Weight samples
// for prediction come from CounterRng, whose variates are a pure function of
// (seed, stream, index), so that they can be drawn in any order, in blocks
// and on any number of threads.
#ifndef BNN_RANDOM_H_
#define BNN_RANDOM_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace bnn {

class Rng {
 public:
  explicit Rng(uint64_t seed) : seed_(seed), engine_(Mix(seed)) {}

  // An independent generator for sub-stream `stream` of this seed; does not
  // advance this generator.
  Rng Fork(uint64_t stream) const {
    return Rng(Mix(seed_ ^ Mix(stream + 0x9e3779b97f4a7c15ULL)));
  }

  double Normal() { return normal_(engine_); }
  // Fills every entry of a dense matrix, vector or block (Eigen) with
  // independent N(0, 1) draws, column by column: the one standard-normal
  // fill, so the same seed gives the same matrix wherever it is drawn. One
  // draw of the engine keys a CounterRng whose stream 0 supplies the values
  // (Philox with a vectorised Box-Muller: 4.4 against ~20 ns per variate
  // for Normal() on an AVX2 machine, which was the largest cost of a small
  // SLANG step; perf.md), so the generator's state, and with it a checkpoint,
  // advances by one draw per fill whatever the matrix's size.
  template <typename Matrix>
  void FillNormal(Matrix&& m);
  // Uniform on [lo, hi).
  double Uniform(double lo = 0.0, double hi = 1.0) {
    return lo + (hi - lo) * uniform_(engine_);
  }
  // Uniform integer on [0, n).
  uint64_t UniformInt(uint64_t n) {
    return std::uniform_int_distribution<uint64_t>(0, n - 1)(engine_);
  }
  std::mt19937_64& engine() { return engine_; }
  uint64_t seed() const { return seed_; }

  // The generator's complete state, for checkpoints: the seed (which Fork
  // uses), the engine's and the distributions' state, including the second
  // variate std::normal_distribution draws in pairs and caches. A generator
  // that loads it continues the same stream, bit for bit, as this one. Text
  // in the standard library's stream format (exact for the engine; doubles
  // at max_digits10, which round-trip), so it is portable across builds that
  // share a standard library.
  std::string SaveState() const;
  // Inverse of SaveState(); InvalidArgument if `state` does not parse, and
  // then this generator is unchanged.
  absl::Status LoadState(absl::string_view state);

 private:
  // SplitMix64 finaliser: decorrelates nearby seeds.
  static uint64_t Mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  uint64_t seed_;
  std::mt19937_64 engine_;
  std::normal_distribution<double> normal_;
  std::uniform_real_distribution<double> uniform_;
};

// A counter-based generator: Philox4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC 2011; Random123's implementation) keyed by
// the seed. Variate number i of stream s is a function of (seed, s, i) alone,
// so the same seed gives the same values, bit for bit, whichever blocks they
// are drawn in and on however many threads. Predictors give weight sample s
// stream s, entry j of its column index j.
//
// Normals come in pairs by Box-Muller on 52-bit uniforms (one Philox call,
// 128 bits, per pair), transformed in blocks with polynomial log, sin and cos
// that the compiler vectorises (accurate to a few units in the last place;
// they are this file's own, so the values do not depend on the C library).
// Tails reach sqrt(-2 ln 2^-52) = 8.5 standard deviations.
//
// Cost on one core of the reference machine: docs/results/perf.md ("Cold
// Predict"). Thread-safe: the methods are const and keep no state.
class CounterRng {
 public:
  explicit CounterRng(uint64_t seed);
  uint64_t seed() const { return seed_; }

  // out[j] = standard normal number `offset + j` of `stream`, j < n.
  void FillNormal(uint64_t stream, uint64_t offset, double* out,
                  size_t n) const;
  // out[j] = uniform number `offset + j` on [0, 1) of `stream` (52 bits;
  // independent of the normals of the same stream and index).
  void FillUniform(uint64_t stream, uint64_t offset, double* out,
                   size_t n) const;

 private:
  uint64_t seed_;
  uint32_t normal_key_[2];
  uint32_t uniform_key_[2];
};

template <typename Matrix>
void Rng::FillNormal(Matrix&& m) {
  using Scalar = std::decay_t<decltype(m(0, 0))>;
  const CounterRng counter(engine_());
  constexpr int64_t kChunk = 256;  // values per CounterRng call (stack)
  double values[kChunk];
  uint64_t offset = 0;
  const int64_t rows = m.rows();
  for (int64_t j = 0; j < m.cols(); ++j) {
    for (int64_t i = 0; i < rows; i += kChunk) {
      const int64_t n = std::min(kChunk, rows - i);
      counter.FillNormal(0, offset, values, static_cast<size_t>(n));
      offset += static_cast<uint64_t>(n);
      for (int64_t k = 0; k < n; ++k) m(i + k, j) = Scalar(values[k]);
    }
  }
}

}  // namespace bnn

#endif  // BNN_RANDOM_H_
