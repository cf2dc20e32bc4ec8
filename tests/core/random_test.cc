// Rng's saved state: a generator loaded from it continues the stream bit for
// bit, including the second variate std::normal_distribution caches.
#include "bnn/random.h"

#include <Random123/philox.h>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <Eigen/Dense>
#include <gtest/gtest.h>

namespace bnn {
namespace {

std::vector<double> Draws(Rng& rng) {
  std::vector<double> v;
  for (int i = 0; i < 5; ++i) {
    v.push_back(rng.Normal());
    v.push_back(rng.Uniform(-1, 1));
    v.push_back(static_cast<double>(rng.UniformInt(1000)));
  }
  return v;
}

TEST(RngTest, LoadedStateContinuesTheStream) {
  for (const int normals : {0, 1, 2, 3}) {  // odd: a normal is cached
    Rng a(42);
    for (int i = 0; i < normals; ++i) a.Normal();
    const std::string state = a.SaveState();
    Rng b(7);
    ASSERT_TRUE(b.LoadState(state).ok());
    EXPECT_EQ(b.seed(), 42u);
    EXPECT_EQ(b.SaveState(), state);
    EXPECT_EQ(Draws(a), Draws(b)) << normals;
    // Forks depend on the seed only.
    Rng fa = a.Fork(3), fb = b.Fork(3);
    EXPECT_EQ(Draws(fa), Draws(fb));
  }
}

TEST(RngTest, GarbageIsRefusedAndLeavesTheGeneratorUnchanged) {
  Rng a(1), b(1);
  EXPECT_EQ(a.LoadState("12 34").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.LoadState("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.LoadState(b.SaveState() + " trailing").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Draws(a), Draws(b));
}

// A fill is CounterRng stream 0, column by column, keyed by one engine draw,
// across the header's chunks of 256 values, for double and float matrices;
// the generator then continues as if it had made that one draw.
TEST(RngTest, FillNormalIsTheCounterStreamOfOneEngineDraw) {
  Rng rng(11), twin(11);
  Eigen::MatrixXd m(300, 3);
  rng.FillNormal(m);
  std::vector<double> expected(m.size());
  CounterRng(twin.engine()()).FillNormal(0, 0, expected.data(), m.size());
  for (int64_t i = 0; i < m.size(); ++i) {
    ASSERT_EQ(m.data()[i], expected[i]) << i;
  }
  Eigen::MatrixXf f(5, 2);
  rng.FillNormal(f);
  CounterRng(twin.engine()()).FillNormal(0, 0, expected.data(), f.size());
  for (int64_t i = 0; i < f.size(); ++i) {
    ASSERT_EQ(f.data()[i], static_cast<float>(expected[i])) << i;
  }
  EXPECT_EQ(Draws(rng), Draws(twin));
  // A block of a larger matrix is filled like a matrix of its shape.
  Rng a(5), b(5);
  Eigen::MatrixXd big = Eigen::MatrixXd::Zero(10, 4), small(3, 2);
  a.FillNormal(big.block(2, 1, 3, 2));
  b.FillNormal(small);
  EXPECT_EQ(big.block(2, 1, 3, 2), small);
  EXPECT_EQ(big.col(0), Eigen::VectorXd::Zero(10));
}

// CounterRng's keys, as random.cc derives them from the seed (SplitMix64 of
// the seed, and of the seed with a constant mixed in for uniforms): the test
// recomputes Philox with Random123's own implementation.
uint64_t SplitMix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Random123's philox4x32_R(10, (pair, stream), key) as two 64-bit words.
std::pair<uint64_t, uint64_t> Philox(uint64_t key, uint64_t stream,
                                     uint64_t pair) {
  const philox4x32_key_t k = {
      {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)}};
  const philox4x32_ctr_t c = {
      {static_cast<uint32_t>(pair), static_cast<uint32_t>(pair >> 32),
       static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)}};
  const philox4x32_ctr_t r = philox4x32_R(10, c, k);
  return {uint64_t{r.v[0]} | (uint64_t{r.v[1]} << 32),
          uint64_t{r.v[2]} | (uint64_t{r.v[3]} << 32)};
}

// Top 52 bits as a double in [0, 1).
double Unit(uint64_t bits) { return std::ldexp(double(bits >> 12), -52); }

std::vector<double> Normals(const CounterRng& rng, uint64_t stream,
                            uint64_t offset, size_t n) {
  std::vector<double> v(n);
  rng.FillNormal(stream, offset, v.data(), n);
  return v;
}

// The uniforms are Random123's Philox4x32-10 bits, and the normals are
// Box-Muller of them to within rounding (own log, sin and cos against the C
// library's).
TEST(CounterRngTest, MatchesRandom123PhiloxAndBoxMuller) {
  const uint64_t seed = 12345;
  const CounterRng rng(seed);
  const uint64_t stream = (uint64_t{7} << 32) + 3;  // both halves used
  const uint64_t first_pair = (uint64_t{1} << 33) + 5;
  std::vector<double> u(200), z(200);
  rng.FillUniform(stream, 2 * first_pair, u.data(), u.size());
  rng.FillNormal(stream, 2 * first_pair, z.data(), z.size());
  const uint64_t uniform_key = SplitMix(seed ^ 0x75aa1f0b5c3e9d27ULL);
  const uint64_t normal_key = SplitMix(seed);
  double worst = 0;
  for (size_t j = 0; j < 100; ++j) {
    const auto [a, b] = Philox(uniform_key, stream, first_pair + j);
    EXPECT_EQ(u[2 * j], Unit(a)) << j;
    EXPECT_EQ(u[2 * j + 1], Unit(b)) << j;
    const auto [na, nb] = Philox(normal_key, stream, first_pair + j);
    const double u1 = 1.0 - Unit(na), u2 = Unit(nb);
    const double r = std::sqrt(-2.0 * std::log(u1));
    worst = std::max(worst, std::abs(z[2 * j] - r * std::cos(2 * M_PI * u2)));
    worst =
        std::max(worst, std::abs(z[2 * j + 1] - r * std::sin(2 * M_PI * u2)));
  }
  EXPECT_LT(worst, 1e-14);
  EXPECT_GT(worst, 0.0);  // the comparison is not with itself
}

// Any split into calls gives the same values, bit for bit: odd offsets,
// single values, lengths around the internal batch of 64 pairs.
TEST(CounterRngTest, AnyBlockingGivesTheSameValues) {
  const CounterRng rng(99);
  const std::vector<double> whole = Normals(rng, 4, 3, 1000);
  std::vector<double> uniform_whole(1000);
  rng.FillUniform(4, 3, uniform_whole.data(), 1000);
  for (const size_t block : {1, 2, 3, 63, 64, 127, 128, 129, 500}) {
    std::vector<double> parts, uparts;
    for (size_t begin = 0; begin < 1000; begin += block) {
      const size_t n = std::min<size_t>(block, 1000 - begin);
      const std::vector<double> p = Normals(rng, 4, 3 + begin, n);
      parts.insert(parts.end(), p.begin(), p.end());
      std::vector<double> up(n);
      rng.FillUniform(4, 3 + begin, up.data(), n);
      uparts.insert(uparts.end(), up.begin(), up.end());
    }
    EXPECT_EQ(parts, whole) << block;
    EXPECT_EQ(uparts, uniform_whole) << block;
  }
  // Other seeds and streams give other values.
  EXPECT_NE(Normals(CounterRng(100), 4, 3, 10),
            std::vector<double>(whole.begin(), whole.begin() + 10));
  EXPECT_NE(Normals(rng, 5, 3, 10),
            std::vector<double>(whole.begin(), whole.begin() + 10));
}

double NormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Kolmogorov-Smirnov statistic sqrt(n) D_n of `v` against `cdf`.
template <typename Cdf>
double KsStatistic(std::vector<double> v, Cdf cdf) {
  std::sort(v.begin(), v.end());
  const double n = static_cast<double>(v.size());
  double d = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double f = cdf(v[i]);
    d = std::max({d, (i + 1) / n - f, f - i / n});
  }
  return std::sqrt(n) * d;
}

// Moments and a Kolmogorov-Smirnov test of 2^20 normals (and uniforms) of
// one seed, over many streams: thresholds are far beyond sampling noise
// (p < 1e-3 for KS: 1.95), and a wrong transform (a quadrant or sign
// slip, a biased uniform) exceeds them.
TEST(CounterRngTest, NormalsAndUniformsHaveTheRightDistribution) {
  const CounterRng rng(2024);
  std::vector<double> z, u;
  for (uint64_t stream = 0; stream < 64; ++stream) {
    const std::vector<double> part = Normals(rng, stream, 0, 1 << 14);
    z.insert(z.end(), part.begin(), part.end());
    std::vector<double> up(1 << 14);
    rng.FillUniform(stream, 0, up.data(), up.size());
    u.insert(u.end(), up.begin(), up.end());
  }
  const double n = static_cast<double>(z.size());
  double m1 = 0, m2 = 0, m3 = 0, m4 = 0, lag = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    m1 += z[i];
    m2 += z[i] * z[i];
    m3 += z[i] * z[i] * z[i];
    m4 += z[i] * z[i] * z[i] * z[i];
    if (i > 0) lag += z[i] * z[i - 1];
  }
  m1 /= n, m2 /= n, m3 /= n, m4 /= n, lag /= n;
  // Standard errors: 1e-3 (mean), 1.4e-3 (variance), 2.4e-3 (skewness),
  // 9.5e-3 (kurtosis), 1e-3 (lag-1 correlation: cos and sin of one pair).
  EXPECT_LT(std::abs(m1), 5e-3);
  EXPECT_LT(std::abs(m2 - 1), 7e-3);
  EXPECT_LT(std::abs(m3), 1.2e-2);
  EXPECT_LT(std::abs(m4 - 3), 5e-2);
  EXPECT_LT(std::abs(lag), 5e-3);
  EXPECT_LT(KsStatistic(z, NormalCdf), 1.95);
  EXPECT_LT(KsStatistic(u, [](double x) { return x; }), 1.95);
  EXPECT_GE(*std::min_element(u.begin(), u.end()), 0.0);
  EXPECT_LT(*std::max_element(u.begin(), u.end()), 1.0);
  // The tails are there: |z| > 4 has probability 6.3e-5 (66 expected).
  const auto tail = std::count_if(z.begin(), z.end(),
                                  [](double x) { return std::abs(x) > 4; });
  EXPECT_GT(tail, 30);
  EXPECT_LT(tail, 120);
}

}  // namespace
}  // namespace bnn
