// Snapshot compatibility: golden files written by format version 1 must load
// in every later version, and damage anywhere in a file must be detected.
// (kronecker_chain's file was added with the family, layout version 1 of its
// message.)
//
// The golden files were written by this test with
//   BNN_UPDATE_GOLDEN=1 build/tests/core/core_io_golden_test
// Never regenerate them to make a failing test pass: a failure means a
// change broke reading old snapshots (add a migration instead).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include <gtest/gtest.h>

#include "bnn/io/snapshot.h"
#include "bnn/model/network.h"
#include "bnn/posterior/gaussian_families.h"
#include "bnn/posterior/kronecker_chain.h"
#include "bnn/posterior/low_rank_gaussian.h"
#include "bnn/posterior/sample_families.h"

namespace bnn {
namespace {

const std::string kGoldenDir =
    std::string(BNN_SOURCE_DIR) + "/tests/core/io/golden/";

Eigen::MatrixXd Gaussian(int rows, int cols, Rng& rng) {
  Eigen::MatrixXd m(rows, cols);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) m(i, j) = rng.Normal();
  return m;
}

// A small snapshot of each family (2 inputs, 3 tanh units, regression).
Snapshot MakeSnapshot(const std::string& family) {
  Snapshot s;
  s.library_version = "0.1.0";
  s.method = family == "low_rank" ? "slang" : "golden_" + family;
  s.params = {{"rank", "2"}, {"note", "golden fixture"}};
  s.model = ModelSpec::ForTask(Task::kRegression, 2, 0, {3}, Activation::kTanh);
  s.standardization.feature_mean = {0.5, -1.0};
  s.standardization.feature_std = {2.0, 0.25};
  s.standardization.target_mean = 3.0;
  s.standardization.target_std = 1.5;
  s.noise_precision = 20.0;
  s.training = {"ds-golden", 2, "abc123",      40,  120, 6, -0.5,
                1.25,        7, "snap-parent", true};
  s.created_unix_ms = 1700000000000;
  const int d = static_cast<int>(s.model.NumParameters());
  Rng rng(2024);
  const Eigen::VectorXd mean = Gaussian(d, 1, rng);
  if (family == "low_rank") {
    s.posterior = *LowRankGaussianPosterior::Create(
        mean, Gaussian(d, 2, rng),
        Gaussian(d, 1, rng).cwiseAbs().array() + 1.0);
  } else if (family == "diagonal") {
    s.posterior = *DiagonalGaussianPosterior::Create(
        mean, Gaussian(d, 1, rng).cwiseAbs().array() + 0.1);
  } else if (family == "full") {
    const Eigen::MatrixXd a = Gaussian(d, d, rng);
    s.posterior = *FullGaussianPosterior::Create(
        mean, a * a.transpose() + Eigen::MatrixXd::Identity(d, d));
  } else if (family == "kronecker") {
    std::vector<KroneckerPosterior::Layer> layers;
    for (const LayerShape& l : s.model.Layers()) {
      Eigen::MatrixXd lo =
          Gaussian(l.out, l.out, rng).triangularView<Eigen::Lower>();
      Eigen::MatrixXd li =
          Gaussian(l.in + 1, l.in + 1, rng).triangularView<Eigen::Lower>();
      lo.diagonal() = lo.diagonal().cwiseAbs().array() + 0.5;
      li.diagonal() = li.diagonal().cwiseAbs().array() + 0.5;
      layers.push_back({Gaussian(l.out, l.in + 1, rng), lo, li});
    }
    s.posterior = *KroneckerPosterior::Create(s.model, std::move(layers));
  } else if (family == "kronecker_chain") {
    KroneckerChain chain;
    const std::vector<LayerShape> shapes = s.model.Layers();
    for (size_t l = 0; l < shapes.size(); ++l) {
      const LayerShape& shape = shapes[l];
      Eigen::MatrixXd zo = Gaussian(shape.out, shape.out, rng);
      Eigen::MatrixXd zi = Gaussian(shape.in + 1, shape.in + 1, rng);
      zo.diagonal().array() += 3.0;
      zi.diagonal().array() += 3.0;
      chain.layers.push_back(
          {zo, zi, 0.5 * Gaussian(shape.out, 1, rng).cwiseAbs().cwiseMin(1.0),
           0.5 * Gaussian(shape.in + 1, 1, rng).cwiseAbs().cwiseMin(1.0)});
      if (l > 0) {
        chain.links.push_back(
            {Gaussian(shapes[l - 1].out, shape.out, rng),
             Gaussian(shapes[l - 1].in + 1, shape.in + 1, rng)});
      }
    }
    s.posterior = *KroneckerChainPosterior::Create(s.model, mean, chain);
  } else if (family == "samples") {
    s.posterior = *SampleSetPosterior::Create(Gaussian(d, 5, rng));
  } else {
    s.posterior = *DropoutPosterior::Create(s.model, mean, 0.2, {true, false});
  }
  return s;
}

const char* const kFamilies[] = {"low_rank",  "diagonal",        "full",
                                 "kronecker", "kronecker_chain", "samples",
                                 "dropout"};

// Outputs at the posterior mean for fixed inputs (no randomness involved),
// and the sum of the marginal variances: a fingerprint of the contents.
std::vector<double> Fingerprint(const Snapshot& s) {
  const Network<double> net(s.model);
  Eigen::MatrixXd x(3, 2);
  x << 0.1, 0.2, -1.0, 0.5, 2.0, -0.3;
  ForwardPass<double> pass;
  net.Forward(x, s.posterior->mean(), &pass);
  std::vector<double> out(pass.output().data(), pass.output().data() + 3);
  out.push_back(s.posterior->MarginalVariances().sum());
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class GoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenTest, FormatVersionOneFileStillLoads) {
  const std::string family = GetParam();
  const std::string path = kGoldenDir + family + ".bnnsnap";
  const std::string expected_path = kGoldenDir + family + ".expected";
  if (std::getenv("BNN_UPDATE_GOLDEN") != nullptr) {
    const Snapshot s = MakeSnapshot(family);
    ASSERT_TRUE(WriteSnapshotFile(path, s).ok());
    std::ofstream out(expected_path);
    for (double v : Fingerprint(s)) out << absl::StrFormat("%.17g\n", v);
  }
  auto loaded = ReadSnapshotFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->format_version, 1u);
  EXPECT_EQ(loaded->posterior->family(), family);
  EXPECT_EQ(loaded->method,
            family == "low_rank" ? "slang" : "golden_" + family);
  EXPECT_EQ(loaded->params.at("note"), "golden fixture");
  EXPECT_EQ(loaded->model.hidden_sizes, std::vector<int>{3});
  EXPECT_EQ(loaded->training.dataset_version, 2);
  EXPECT_EQ(loaded->training.parent_snapshot_id, "snap-parent");
  EXPECT_TRUE(loaded->training.prior_from_parent);
  EXPECT_EQ(loaded->standardization.target_std, 1.5);
  std::vector<double> want;
  for (absl::string_view line :
       absl::StrSplit(ReadFile(expected_path), '\n', absl::SkipEmpty())) {
    want.push_back(std::stod(std::string(line)));
  }
  const std::vector<double> got = Fingerprint(*loaded);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllFamilies, GoldenTest,
                         ::testing::ValuesIn(kFamilies));

TEST(SnapshotCorruptionTest, EveryFlippedByteAndEveryTruncationIsDetected) {
  Snapshot s;
  s.method = "slang";
  s.model = ModelSpec::ForTask(Task::kRegression, 1, 0, {}, Activation::kRelu);
  s.standardization.feature_mean = {0.0};
  s.standardization.feature_std = {1.0};
  Eigen::VectorXd mean(2), d(2);
  mean << 0.5, -0.25;
  d << 2.0, 3.0;
  s.posterior =
      *LowRankGaussianPosterior::Create(mean, Eigen::MatrixXd::Ones(2, 1), d);
  const std::string bytes = *EncodeSnapshot(s);
  ASSERT_TRUE(DecodeSnapshot(bytes).ok());
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned char mask : {0x01, 0x80, 0xff}) {
      std::string damaged = bytes;
      damaged[i] = static_cast<char>(damaged[i] ^ mask);
      EXPECT_FALSE(DecodeSnapshot(damaged).ok())
          << "byte " << i << " of " << bytes.size() << " xor " << int{mask};
    }
  }
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeSnapshot(bytes.substr(0, n)).ok()) << "length " << n;
  }
}

}  // namespace
}  // namespace bnn
