// Rng's saved state: a generator loaded from it continues the stream bit for
// bit, including the second variate std::normal_distribution caches.
#include "bnn/random.h"

#include <string>
#include <vector>

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

}  // namespace
}  // namespace bnn
