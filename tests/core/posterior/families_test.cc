// Every posterior family against its dense covariance: samples, marginal
// variances, KL to the prior, the linearised predictive variance diag(J S J^T)
// and the snapshot proto round trip.
#include <cmath>
#include <memory>

#include <Eigen/Dense>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/compute_threads.h"
#include "bnn/core/snapshot.pb.h"
#include "bnn/model/network.h"
#include "bnn/posterior/gaussian_families.h"
#include "bnn/posterior/kronecker_chain.h"
#include "bnn/posterior/low_rank_gaussian.h"
#include "bnn/posterior/sample_families.h"

namespace bnn {
namespace {

using ::testing::HasSubstr;

// 2 inputs, 3 tanh units, 1 output: D = 3*3 + 1*4 = 13.
ModelSpec TinyModel() {
  return ModelSpec::ForTask(Task::kRegression, 2, 0, {3}, Activation::kTanh);
}

Eigen::MatrixXd Gaussian(int rows, int cols, Rng& rng) {
  Eigen::MatrixXd m(rows, cols);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) m(i, j) = rng.Normal();
  return m;
}

Eigen::MatrixXd RandomLowerFactor(int n, Rng& rng) {
  Eigen::MatrixXd l = Gaussian(n, n, rng).triangularView<Eigen::Lower>();
  l.diagonal() = l.diagonal().cwiseAbs().array() + 0.5;
  return l;
}

struct Family {
  std::unique_ptr<Posterior> posterior;
  Eigen::MatrixXd covariance;  // dense reference; empty for large models
};

// The dense reference costs O(D^3) in this -O0 test code (minutes under the
// sanitizers at D = 1501): built for small models only.
bool WithReference(int d) { return d <= 256; }

Family MakeLowRank(const ModelSpec& m, Rng& rng) {
  const int d = static_cast<int>(m.NumParameters());
  const Eigen::MatrixXd u = Gaussian(d, 2, rng);
  const Eigen::VectorXd diag =
      Eigen::VectorXd::Constant(d, 2.0) + Gaussian(d, 1, rng).cwiseAbs();
  Eigen::MatrixXd covariance;
  if (WithReference(d)) {
    Eigen::MatrixXd precision = u * u.transpose();
    precision.diagonal() += diag;
    covariance = precision.inverse();
  }
  return {*LowRankGaussianPosterior::Create(Gaussian(d, 1, rng), u, diag),
          std::move(covariance)};
}

Family MakeDiagonal(const ModelSpec& m, Rng& rng) {
  const int d = static_cast<int>(m.NumParameters());
  const Eigen::VectorXd var = Gaussian(d, 1, rng).cwiseAbs().array() + 0.1;
  return {*DiagonalGaussianPosterior::Create(Gaussian(d, 1, rng), var),
          Eigen::MatrixXd(var.asDiagonal())};
}

Family MakeFull(const ModelSpec& m, Rng& rng) {
  const int d = static_cast<int>(m.NumParameters());
  const Eigen::MatrixXd a = Gaussian(d, d, rng);
  Eigen::MatrixXd precision = a * a.transpose();
  precision.diagonal().array() += 1.0;
  Eigen::MatrixXd covariance;
  if (WithReference(d)) covariance = precision.inverse();
  return {*FullGaussianPosterior::Create(Gaussian(d, 1, rng), precision),
          std::move(covariance)};
}

Family MakeKronecker(const ModelSpec& m, Rng& rng) {
  const int d = static_cast<int>(m.NumParameters());
  std::vector<KroneckerPosterior::Layer> layers;
  Eigen::MatrixXd cov;
  if (WithReference(d)) cov = Eigen::MatrixXd::Zero(d, d);
  for (const LayerShape& s : m.Layers()) {
    KroneckerPosterior::Layer layer{Gaussian(s.out, s.in + 1, rng),
                                    RandomLowerFactor(s.out, rng),
                                    RandomLowerFactor(s.in + 1, rng)};
    if (WithReference(d)) {
      const Eigen::MatrixXd c_out =
          layer.out_factor * layer.out_factor.transpose();
      const Eigen::MatrixXd c_in =
          layer.in_factor * layer.in_factor.transpose();
      // Cov(vec W) = C_in (x) C_out for column-major vec.
      for (int i = 0; i <= s.in; ++i)
        for (int j = 0; j <= s.in; ++j)
          cov.block(s.offset + i * s.out, s.offset + j * s.out, s.out, s.out) =
              c_in(i, j) * c_out;
    }
    layers.push_back(std::move(layer));
  }
  return {*KroneckerPosterior::Create(m, std::move(layers)), cov};
}

Eigen::MatrixXd Kron(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  Eigen::MatrixXd k(a.rows() * b.rows(), a.cols() * b.cols());
  for (int i = 0; i < a.rows(); ++i)
    for (int j = 0; j < a.cols(); ++j)
      k.block(i * b.rows(), j * b.cols(), b.rows(), b.cols()) = a(i, j) * b;
  return k;
}

// A random chain; the dense reference is Xi^T R R^T Xi from explicit
// Kronecker products: R_l = (Z_in (x) Z_out) diag(vec C), C(o, i) =
// (1 - t_o b_i)^-1/2, and Xi^T's block (l + 1, l) = -(Psi_in (x) Psi_out)^T.
Family MakeKroneckerChain(const ModelSpec& m, Rng& rng) {
  const int d = static_cast<int>(m.NumParameters());
  const std::vector<LayerShape> shapes = m.Layers();
  KroneckerChain chain;
  const bool reference = WithReference(d);
  Eigen::MatrixXd root, xi_t;
  if (reference) {
    root = Eigen::MatrixXd::Zero(d, d);
    xi_t = Eigen::MatrixXd::Identity(d, d);
  }
  for (size_t l = 0; l < shapes.size(); ++l) {
    const LayerShape& s = shapes[l];
    KroneckerChain::Layer layer{
        RandomLowerFactor(s.out, rng) + 0.3 * Gaussian(s.out, s.out, rng),
        RandomLowerFactor(s.in + 1, rng) +
            0.3 * Gaussian(s.in + 1, s.in + 1, rng),
        0.8 * Gaussian(s.out, 1, rng).cwiseAbs().cwiseMin(1.0),
        0.9 * Gaussian(s.in + 1, 1, rng).cwiseAbs().cwiseMin(1.0)};
    if (reference) {
      Eigen::VectorXd c(s.size());
      for (int i = 0; i <= s.in; ++i)
        for (int o = 0; o < s.out; ++o)
          c[i * s.out + o] =
              1 / std::sqrt(1 - layer.out_coupling[o] * layer.in_coupling[i]);
      root.block(s.offset, s.offset, s.size(), s.size()) =
          Kron(layer.in_root, layer.out_root) * c.asDiagonal();
    }
    chain.layers.push_back(std::move(layer));
    if (l > 0) {
      const LayerShape& p = shapes[l - 1];
      KroneckerChain::Link link{0.5 * Gaussian(p.out, s.out, rng),
                                0.5 * Gaussian(p.in + 1, s.in + 1, rng)};
      if (reference) {
        xi_t.block(s.offset, p.offset, s.size(), p.size()) =
            -Kron(link.psi_in, link.psi_out).transpose();
      }
      chain.links.push_back(std::move(link));
    }
  }
  Eigen::MatrixXd covariance;
  if (reference) {
    const Eigen::MatrixXd x = xi_t * root;
    covariance = x * x.transpose();
  }
  return {*KroneckerChainPosterior::Create(m, Gaussian(d, 1, rng),
                                           std::move(chain)),
          std::move(covariance)};
}

using Maker = Family (*)(const ModelSpec&, Rng&);

class GaussianFamilyTest : public ::testing::TestWithParam<Maker> {};

TEST_P(GaussianFamilyTest, SamplesHaveTheDenseCovariance) {
  Rng rng(1);
  const ModelSpec model = TinyModel();
  Family f = GetParam()(model, rng);
  const int n = 100000;
  const Eigen::MatrixXd s = f.posterior->Draw(rng.engine()(), n);
  const Eigen::VectorXd mean = s.rowwise().mean();
  const Eigen::MatrixXd c = s.colwise() - mean;
  const Eigen::MatrixXd cov = c * c.transpose() / (n - 1);
  const Eigen::VectorXd sd = f.covariance.diagonal().cwiseSqrt();
  for (int i = 0; i < cov.rows(); ++i) {
    EXPECT_NEAR(mean[i], f.posterior->mean()[i], 0.02 * sd[i]) << i;
    for (int j = 0; j < cov.cols(); ++j) {
      // ~0.45% standard error at this n: 3% is > 6 standard errors.
      EXPECT_NEAR(cov(i, j), f.covariance(i, j), 0.03 * sd[i] * sd[j])
          << f.posterior->family() << " " << i << "," << j;
    }
  }
}

TEST_P(GaussianFamilyTest, MarginalVariancesAndKlMatchDenseFormulas) {
  Rng rng(2);
  const ModelSpec model = TinyModel();
  Family f = GetParam()(model, rng);
  const Eigen::VectorXd var = f.posterior->MarginalVariances();
  EXPECT_LT((var - f.covariance.diagonal()).cwiseAbs().maxCoeff(), 1e-10);
  const int d = static_cast<int>(model.NumParameters());
  const Eigen::VectorXd lambda = Gaussian(d, 1, rng).cwiseAbs().array() + 0.2;
  const Eigen::VectorXd& mu = f.posterior->mean();
  const double log_det_cov = 2 * Eigen::LLT<Eigen::MatrixXd>(f.covariance)
                                     .matrixLLT()
                                     .diagonal()
                                     .array()
                                     .log()
                                     .sum();
  const double kl = 0.5 * ((lambda.asDiagonal() * f.covariance).trace() +
                           mu.dot(lambda.cwiseProduct(mu)) - d -
                           lambda.array().log().sum() - log_det_cov);
  auto got = f.posterior->KlToPrior(lambda);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_NEAR(*got, kl, 1e-8 * (1 + std::abs(kl)));
}

TEST_P(GaussianFamilyTest, LinearizedVarianceEqualsDenseJSigmaJt) {
  Rng rng(3);
  const ModelSpec model = TinyModel();
  Family f = GetParam()(model, rng);
  const Network<double> net(model);
  const Eigen::MatrixXd x = Gaussian(5, 2, rng);
  ForwardPass<double> pass;
  PerExampleGrads<double> jac;
  net.Forward(x, f.posterior->mean(), &pass);
  net.OutputGradients(f.posterior->mean(), pass, 0, &jac);
  const Eigen::MatrixXd j = jac.Materialize();
  const Eigen::VectorXd dense = (j.transpose() * f.covariance * j).diagonal();
  auto got = f.posterior->LinearizedVariance(jac);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_LT((*got - dense).cwiseAbs().maxCoeff(),
            1e-9 * dense.cwiseAbs().maxCoeff());
}

TEST_P(GaussianFamilyTest, ProtoRoundTripIsExact) {
  Rng rng(4);
  const ModelSpec model = TinyModel();
  Family f = GetParam()(model, rng);
  snapshot::Posterior proto;
  f.posterior->ToProto(&proto);
  auto back = PosteriorFromProto(proto, model);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->family(), f.posterior->family());
  EXPECT_EQ((*back)->mean(), f.posterior->mean());
  EXPECT_EQ(f.posterior->Draw(9, 3), (*back)->Draw(9, 3));
}

// Posterior::Sample's contract: sample s depends on the seed and s alone,
// bit for bit whatever the number of threads (1, 2, 4), and up to the
// rounding of products of another width however many samples are drawn
// with it (the first 3 of 7 are the 3 of a draw of 3).
void ExpectSameSamplesForAnyThreadCount(const Posterior& posterior) {
  const Eigen::MatrixXd one = [&] {
    const ScopedComputeThreads threads(1);
    return posterior.Draw(11, 7);
  }();
  for (const int n : {2, 4}) {
    const ScopedComputeThreads threads(n);
    EXPECT_EQ(posterior.Draw(11, 7), one) << n << " threads";
  }
  EXPECT_LT((posterior.Draw(11, 3) - one.leftCols(3)).cwiseAbs().maxCoeff(),
            1e-12);
  EXPECT_NE(posterior.Draw(12, 7), one);
}

TEST_P(GaussianFamilyTest, SamplesAreTheSameForAnyThreadCount) {
  Rng rng(5);
  const Family f = GetParam()(TinyModel(), rng);
  ExpectSameSamplesForAnyThreadCount(*f.posterior);
}

// A draw larger than one group of tiles (Posterior::kSampleGroupValues)
// of a wide model: identical on 1, 2 and 4 threads, and interrupted between
// groups.
TEST_P(GaussianFamilyTest, LargeDrawsAreTheSameForAnyThreadCountAndStop) {
  Rng rng(6);
  // 3 inputs, 300 hidden, 1 output: D = 1501; 800 samples are 1.2M values,
  // more than one group.
  const ModelSpec model =
      ModelSpec::ForTask(Task::kRegression, 3, 0, {300}, Activation::kRelu);
  const Family f = GetParam()(model, rng);
  Eigen::MatrixXd one, two, four;
  for (auto [threads, out] : {std::pair{1, &one}, {2, &two}, {4, &four}}) {
    const ScopedComputeThreads scoped(threads);
    ASSERT_TRUE(f.posterior->Sample(CounterRng(3), 800, Interrupt(), out).ok());
  }
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, four);
  int checks = 0;
  Eigen::MatrixXd stopped;
  const absl::Status status =
      f.posterior->Sample(CounterRng(3), 800, Interrupt([&checks] {
                            ++checks;
                            return absl::CancelledError("cancelled");
                          }),
                          &stopped);
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(checks, 1);
}

INSTANTIATE_TEST_SUITE_P(Families, GaussianFamilyTest,
                         ::testing::Values(&MakeLowRank, &MakeDiagonal,
                                           &MakeFull, &MakeKronecker,
                                           &MakeKroneckerChain));

TEST(KroneckerChainPosteriorTest, RejectsBadCouplingsShapesAndNewerVersions) {
  Rng rng(8);
  const ModelSpec model = TinyModel();
  Family good = MakeKroneckerChain(model, rng);
  const auto& chain =
      static_cast<const KroneckerChainPosterior&>(*good.posterior).chain();
  KroneckerChain bad = chain;
  bad.layers[0].out_coupling.setConstant(1.0);
  bad.layers[0].in_coupling.setConstant(1.0);
  auto s = KroneckerChainPosterior::Create(model, good.posterior->mean(), bad);
  EXPECT_THAT(s.status().message(), HasSubstr("t(o) b(i) < 1"));
  bad = chain;
  bad.links[0].psi_in.resize(2, 2);
  s = KroneckerChainPosterior::Create(model, good.posterior->mean(), bad);
  EXPECT_THAT(s.status().message(), HasSubstr("link 0 has psi_out"));
  bad = chain;
  bad.layers[1].in_root.setZero();
  s = KroneckerChainPosterior::Create(model, good.posterior->mean(), bad);
  EXPECT_THAT(s.status().message(), HasSubstr("invertible"));

  snapshot::Posterior proto;
  good.posterior->ToProto(&proto);
  EXPECT_EQ(proto.kronecker_chain().version(),
            KroneckerChainPosterior::kVersion);
  proto.mutable_kronecker_chain()->set_version(
      KroneckerChainPosterior::kVersion + 1);
  auto back = PosteriorFromProto(proto, model);
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(back.status().message(), HasSubstr("newer bnn-serve"));
  proto.mutable_kronecker_chain()->set_version(
      KroneckerChainPosterior::kVersion);
  proto.mutable_kronecker_chain()->mutable_links()->Clear();
  back = PosteriorFromProto(proto, model);
  EXPECT_THAT(back.status().message(), HasSubstr("0 links"));
}

TEST(KroneckerPosteriorTest, SampleCovarianceOfA3x2LayerIsTheKroneckerProduct) {
  // Logistic regression with 1 input and... a single 3 x 2 layer: 1 input +
  // bias, 3 classes.
  const ModelSpec model =
      ModelSpec::ForTask(Task::kMulticlass, 1, 3, {}, Activation::kRelu);
  ASSERT_EQ(model.Layers()[0].out, 3);
  ASSERT_EQ(model.Layers()[0].in + 1, 2);
  Rng rng(5);
  Family f = MakeKronecker(model, rng);
  const Eigen::MatrixXd s = f.posterior->Draw(5, 200000);
  const Eigen::MatrixXd c = s.colwise() - s.rowwise().mean();
  const Eigen::MatrixXd cov = c * c.transpose() / (s.cols() - 1);
  const Eigen::VectorXd sd = f.covariance.diagonal().cwiseSqrt();
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j)
      EXPECT_NEAR(cov(i, j), f.covariance(i, j), 0.02 * sd[i] * sd[j]);
}

TEST(KroneckerPosteriorTest, RejectsWrongShapesAndUpperFactors) {
  const ModelSpec model = TinyModel();
  Rng rng(6);
  Family good = MakeKronecker(model, rng);
  auto* k = static_cast<KroneckerPosterior*>(good.posterior.get());
  std::vector<KroneckerPosterior::Layer> layers = k->layers();
  layers[1].in_factor(0, 2) = 1.0;  // not lower triangular
  auto bad = KroneckerPosterior::Create(model, layers);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  layers = k->layers();
  layers.pop_back();
  bad = KroneckerPosterior::Create(model, layers);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("1 layers"));
}

TEST(FullGaussianPosteriorTest, RejectsIndefinitePrecision) {
  Eigen::MatrixXd p = Eigen::MatrixXd::Identity(3, 3);
  p(2, 2) = -1;
  auto bad = FullGaussianPosterior::Create(Eigen::VectorXd::Zero(3), p);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("positive definite"));
}

TEST(SampleSetPosteriorTest, AllSamplesInOrderWhenSIsTheStoredCount) {
  Rng rng(7);
  const Eigen::MatrixXd stored = Gaussian(13, 4, rng);
  auto p = SampleSetPosterior::Create(stored);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Draw(1, 4), stored);
  const Eigen::MatrixXd s = (*p)->Draw(1, 10);  // cycles through a permutation
  for (int c = 0; c < 10; ++c) {
    bool found = false;
    for (int k = 0; k < 4; ++k) found |= s.col(c) == stored.col(k);
    EXPECT_TRUE(found);
  }
  const Eigen::MatrixXd centered = stored.colwise() - stored.rowwise().mean();
  EXPECT_LT(((*p)->MarginalVariances() - centered.rowwise().squaredNorm() / 3)
                .cwiseAbs()
                .maxCoeff(),
            1e-12);
  EXPECT_EQ((*p)->KlToPrior(Eigen::VectorXd::Ones(13)).status().code(),
            absl::StatusCode::kUnimplemented);
  snapshot::Posterior proto;
  (*p)->ToProto(&proto);
  auto back = PosteriorFromProto(proto, TinyModel());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(static_cast<SampleSetPosterior&>(**back).samples(), stored);
}

TEST(DropoutPosteriorTest, SamplesAreTheSameForAnyThreadCount) {
  Rng rng(8);
  auto p = DropoutPosterior::Create(TinyModel(), Gaussian(13, 1, rng), 0.25,
                                    {true, true});
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectSameSamplesForAnyThreadCount(**p);
}

TEST(DropoutPosteriorTest, MasksWholeInputColumnsAndKeepsTheMean) {
  const ModelSpec model = TinyModel();
  Rng rng(8);
  const Eigen::VectorXd w = Gaussian(13, 1, rng);
  auto p = DropoutPosterior::Create(model, w, 0.25, {true, true});
  ASSERT_TRUE(p.ok()) << p.status();
  const int n = 40000;
  const Eigen::MatrixXd s = (*p)->Draw(8, n);
  for (const LayerShape& shape : model.Layers()) {
    for (int c = 0; c < 50; ++c) {
      Eigen::Map<const Eigen::MatrixXd> sw(s.col(c).data() + shape.offset,
                                           shape.out, shape.in + 1);
      Eigen::Map<const Eigen::MatrixXd> mw(w.data() + shape.offset, shape.out,
                                           shape.in + 1);
      EXPECT_EQ(sw.col(shape.in), mw.col(shape.in));  // bias never dropped
      for (int i = 0; i < shape.in; ++i) {
        const bool dropped = sw.col(i).isZero();
        EXPECT_TRUE(dropped || sw.col(i).isApprox(mw.col(i) / 0.75));
      }
    }
  }
  const Eigen::VectorXd mean = s.rowwise().mean();
  const Eigen::VectorXd var =
      (s.colwise() - mean).rowwise().squaredNorm() / (n - 1);
  const Eigen::VectorXd expected_var = (*p)->MarginalVariances();
  for (int j = 0; j < 13; ++j) {
    EXPECT_NEAR(mean[j], w[j], 0.03 * std::abs(w[j]) + 1e-12);
    EXPECT_NEAR(var[j], expected_var[j], 0.05 * expected_var[j] + 1e-12);
  }
  auto bad = DropoutPosterior::Create(model, w, 1.0, {true, true});
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("rate = 1"));
}

}  // namespace
}  // namespace bnn
