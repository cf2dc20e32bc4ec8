// NNG-BlkTri against dense references on tiny nets: the cross-layer
// statistics against their per-example definitions; the chain against
// Martens & Grosse's block-tridiagonal approximation F formed explicitly
// (its tridiagonal blocks are the damped K-FAC blocks, the rest the chain's
// completion, so F^-1 is block-tridiagonal; with two layers F is the
// block-tridiagonal Fisher itself): samples' covariance, marginal
// variances, log-determinant, KL, linearised variances and the mean step's
// preconditioner; the reduction to noisy K-FAC without cross moments; and
// the exported snapshot's round trip.
#include <cmath>
#include <memory>

#include <Eigen/Dense>
#include <gtest/gtest.h>

#include "bnn/core/snapshot.pb.h"
#include "bnn/methods/method.h"
#include "bnn/methods/registry.h"
#include "bnn/model/likelihood.h"
#include "bnn/posterior/kronecker_chain.h"
#include "bnn/train/trainer.h"

#include "methods/nng/kfac.h"

namespace bnn {
namespace {

Eigen::MatrixXd Gaussian(int rows, int cols, Rng& rng) {
  Eigen::MatrixXd m(rows, cols);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) m(i, j) = rng.Normal();
  return m;
}

Eigen::MatrixXd Kron(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  Eigen::MatrixXd k(a.rows() * b.rows(), a.cols() * b.cols());
  for (int i = 0; i < a.rows(); ++i)
    for (int j = 0; j < a.cols(); ++j)
      k.block(i * b.rows(), j * b.cols(), b.rows(), b.cols()) = a(i, j) * b;
  return k;
}

double MaxAbs(const Eigen::MatrixXd& m) { return m.cwiseAbs().maxCoeff(); }

// K-FAC factors and cross moments of one minibatch (beta = 1) of a tanh
// regression net with targets sampled from the model (the true Fisher),
// refreshed; plus the pass's gradients (a Jacobian for the quadratic forms).
struct Curvature {
  ModelSpec spec;
  std::unique_ptr<Network<double>> net;
  Eigen::MatrixXd x, theta;
  ForwardPass<double> pass;
  PerExampleGrads<double> grads;
  std::vector<internal::KfacFactors> factors;
  std::vector<internal::KfacCrossFactors> cross;
};

std::unique_ptr<Curvature> MakeCurvature(const std::vector<int>& hidden,
                                         uint64_t seed) {
  auto c = std::make_unique<Curvature>();
  c->spec =
      ModelSpec::ForTask(Task::kRegression, 2, 0, hidden, Activation::kTanh);
  c->net = std::make_unique<Network<double>>(c->spec);
  Rng rng(seed);
  c->x = Gaussian(8, 2, rng);
  c->theta = Gaussian(c->spec.NumParameters(), 2, rng);
  c->net->Forward(c->x, c->theta, &c->pass);
  const double tau = 2.0;
  Eigen::VectorXd sampled(16);
  for (int r = 0; r < 16; ++r) {
    const double f = c->pass.output()(r, 0);
    sampled[r] = SampleTarget<double>(Likelihood::kGaussian, &f, 1, tau, rng);
  }
  c->net->Backward(sampled, tau, c->theta, c->pass, &c->grads, nullptr);
  c->factors = internal::InitialKfacFactors(c->net->layers(), 0.0);
  c->cross = internal::InitialKfacCrossFactors(c->net->layers());
  internal::UpdateKfacStatistics(c->grads, 1.0, &c->factors);
  internal::UpdateKfacCrossStatistics(c->grads, 1.0, &c->cross);
  EXPECT_TRUE(internal::RefreshKfacFactors(&c->factors).ok());
  return c;
}

// M&G's F for damping x, densely: diagonal blocks (A + pi sqrt(x) I) (x)
// (S + sqrt(x)/pi I), first off-diagonal blocks A_{l,l+1} (x) S_{l,l+1},
// and the farther blocks completing the chain, F_{l,m} = Psi_l F_{l+1,m}
// with Psi_l = F_{l,l+1} F_{l+1,l+1}^-1 (M&G §4.3).
Eigen::MatrixXd DenseChainFisher(const Curvature& c, double x) {
  const std::vector<LayerShape>& shapes = c.net->layers();
  const int d = static_cast<int>(c.spec.NumParameters());
  const int n = static_cast<int>(shapes.size());
  Eigen::MatrixXd f = Eigen::MatrixXd::Zero(d, d);
  auto block = [&](int l, int m) {
    return f.block(shapes[l].offset, shapes[m].offset, shapes[l].size(),
                   shapes[m].size());
  };
  for (int l = 0; l < n; ++l) {
    const internal::KfacFactors& k = c.factors[l];
    const Eigen::MatrixXd a =
        k.a +
        k.pi * std::sqrt(x) * Eigen::MatrixXd::Identity(k.a.rows(), k.a.cols());
    const Eigen::MatrixXd s =
        k.s +
        std::sqrt(x) / k.pi * Eigen::MatrixXd::Identity(k.s.rows(), k.s.cols());
    block(l, l) = Kron(a, s);
  }
  for (int l = 0; l + 1 < n; ++l) {
    block(l, l + 1) = Kron(c.cross[l].a, c.cross[l].s);
    block(l + 1, l) = block(l, l + 1).transpose();
  }
  for (int gap = 2; gap < n; ++gap) {
    for (int l = 0; l + gap < n; ++l) {
      const Eigen::MatrixXd psi =
          block(l, l + 1) * Eigen::MatrixXd(block(l + 1, l + 1)).inverse();
      block(l, l + gap) = psi * block(l + 1, l + gap);
      block(l + gap, l) = block(l, l + gap).transpose();
    }
  }
  return f;
}

TEST(NngBlkTriTest, CrossMomentsMatchTheirPerExampleDefinitions) {
  // With beta = 1: A_{0,1} = mean_r a_0 a_1^T with a_0 = [x, 1] and
  // a_1 = [tanh(W~_0 a_0), 1] computed by hand; S_{l,l+1} = mean_r
  // g_l g_{l+1}^T over the rows' pre-activation gradients.
  const auto c = MakeCurvature({3, 3}, 1);
  const LayerShape& s0 = c->net->layers()[0];
  Eigen::MatrixXd a01 = Eigen::MatrixXd::Zero(3, 4);
  for (int r = 0; r < 16; ++r) {
    const int sample = r / 8, row = r % 8;
    const Eigen::Vector3d a0(c->x(row, 0), c->x(row, 1), 1.0);
    const Eigen::Map<const Eigen::MatrixXd> w0(
        c->theta.col(sample).data() + s0.offset, s0.out, s0.in + 1);
    Eigen::Vector4d a1;
    a1 << (w0 * a0).array().tanh().matrix(), 1.0;
    a01 += a0 * a1.transpose() / 16;
  }
  EXPECT_LT(MaxAbs(c->cross[0].a - a01), 1e-12);
  for (int l = 0; l < 2; ++l) {
    Eigen::MatrixXd s =
        Eigen::MatrixXd::Zero(c->cross[l].s.rows(), c->cross[l].s.cols());
    for (int r = 0; r < 16; ++r) {
      s += c->grads.deltas(l).row(r).transpose() *
           c->grads.deltas(l + 1).row(r) / 16;
    }
    EXPECT_LT(MaxAbs(c->cross[l].s - s), 1e-12 * (1 + MaxAbs(s))) << l;
  }
}

TEST(NngBlkTriTest, ChainIsTheInverseOfTheBlockTridiagonalApproximation) {
  // 2-3-3-1: three layers, D = 9 + 12 + 4 = 25.
  const auto c = MakeCurvature({3, 3}, 2);
  const std::vector<LayerShape>& shapes = c->net->layers();
  const double gamma_in = 0.05, scale = 0.1;
  const Eigen::MatrixXd f = DenseChainFisher(*c, gamma_in);
  const Eigen::MatrixXd f_inv = f.inverse();
  // The approximation's defining property: F^-1 is block-tridiagonal.
  const Eigen::MatrixXd far = f_inv.block(shapes[0].offset, shapes[2].offset,
                                          shapes[0].size(), shapes[2].size());
  EXPECT_LT(MaxAbs(far), 1e-9 * MaxAbs(f_inv));
  // Without the completion, F's far block is zero; it is not here.
  EXPECT_GT(MaxAbs(f.block(shapes[0].offset, shapes[2].offset, shapes[0].size(),
                           shapes[2].size())),
            1e-6);

  auto chain = internal::BuildKfacChain(c->factors, c->cross, gamma_in, scale);
  ASSERT_TRUE(chain.ok()) << chain.status();
  ASSERT_TRUE(chain->Check(shapes).ok());
  const Eigen::MatrixXd sigma = scale * f_inv;
  const double tol = 1e-9 * MaxAbs(sigma);
  EXPECT_LT(MaxAbs(chain->DenseCovariance(shapes) - sigma), tol);
  EXPECT_LT((chain->MarginalVariances(shapes) - sigma.diagonal())
                .cwiseAbs()
                .maxCoeff(),
            tol);
  const double log_det = 2 * Eigen::LLT<Eigen::MatrixXd>(sigma)
                                 .matrixLLT()
                                 .diagonal()
                                 .array()
                                 .log()
                                 .sum();
  EXPECT_NEAR(chain->LogDetCovariance(shapes), log_det,
              1e-8 * std::abs(log_det));
  // Linearised variances g^T Sigma g of the pass's per-example gradients.
  const Eigen::MatrixXd j = c->grads.Materialize();
  const Eigen::VectorXd dense = (j.transpose() * sigma * j).diagonal();
  EXPECT_LT((chain->QuadraticForms(c->grads) - dense).cwiseAbs().maxCoeff(),
            1e-8 * dense.cwiseAbs().maxCoeff());

  // The mean step: F_g^-1 v with g = g_in + g_ex (scale 1) against a dense
  // solve.
  const double gamma = gamma_in + 0.3;
  auto update = internal::BuildKfacChain(c->factors, c->cross, gamma, 1.0);
  ASSERT_TRUE(update.ok()) << update.status();
  Rng rng(3);
  const Eigen::VectorXd v = Gaussian(25, 1, rng);
  Eigen::VectorXd step;
  update->ApplyCovariance(shapes, v, &step);
  const Eigen::VectorXd want = DenseChainFisher(*c, gamma).llt().solve(v);
  EXPECT_LT((step - want).cwiseAbs().maxCoeff(),
            1e-9 * want.cwiseAbs().maxCoeff());

  // Samples (the exported posterior's sampler): covariance within 3% of
  // sd_i sd_j at 100000 draws (standard error ~0.45%).
  auto posterior =
      KroneckerChainPosterior::Create(c->spec, c->theta.col(0), *chain);
  ASSERT_TRUE(posterior.ok()) << posterior.status();
  const int n = 100000;
  const Eigen::MatrixXd draws = (*posterior)->Draw(17, n);
  const Eigen::MatrixXd centred = draws.colwise() - draws.rowwise().mean();
  const Eigen::MatrixXd cov = centred * centred.transpose() / (n - 1);
  const Eigen::VectorXd sd = sigma.diagonal().cwiseSqrt();
  for (int a = 0; a < 25; ++a)
    for (int b = 0; b < 25; ++b)
      EXPECT_NEAR(cov(a, b), sigma(a, b), 0.03 * sd[a] * sd[b])
          << a << "," << b;
}

TEST(NngBlkTriTest, TwoLayerPrecisionIsTheBlockTridiagonalFisher) {
  // 2-3-1: with two layers the approximation has no far blocks, so the
  // posterior precision is exactly (N/lambda) times the block-tridiagonal
  // damped Fisher built from the factors; samples, marginal variances and
  // the KL to the prior against it.
  const auto c = MakeCurvature({3}, 4);
  const std::vector<LayerShape>& shapes = c->net->layers();
  const double gamma_in = 0.02, scale = 0.05;
  const std::vector<internal::KfacFactors>& k = c->factors;
  Eigen::MatrixXd precision = Eigen::MatrixXd::Zero(13, 13);
  for (int l = 0; l < 2; ++l) {
    const auto& s = shapes[l];
    precision.block(s.offset, s.offset, s.size(), s.size()) =
        Kron(k[l].a + k[l].pi * std::sqrt(gamma_in) *
                          Eigen::MatrixXd::Identity(s.in + 1, s.in + 1),
             k[l].s + std::sqrt(gamma_in) / k[l].pi *
                          Eigen::MatrixXd::Identity(s.out, s.out));
  }
  precision.block(0, 9, 9, 4) = Kron(c->cross[0].a, c->cross[0].s);
  precision.block(9, 0, 4, 9) = precision.block(0, 9, 9, 4).transpose();
  precision /= scale;
  const Eigen::MatrixXd sigma = precision.inverse();

  auto chain = internal::BuildKfacChain(c->factors, c->cross, gamma_in, scale);
  ASSERT_TRUE(chain.ok()) << chain.status();
  Rng rng(5);
  const Eigen::VectorXd mean = Gaussian(13, 1, rng);
  auto posterior = KroneckerChainPosterior::Create(c->spec, mean, *chain);
  ASSERT_TRUE(posterior.ok()) << posterior.status();
  const Posterior& q = **posterior;
  EXPECT_LT((q.MarginalVariances() - sigma.diagonal()).cwiseAbs().maxCoeff(),
            1e-9 * sigma.diagonal().maxCoeff());
  const Eigen::VectorXd lambda = Eigen::VectorXd::Constant(13, 1.5);
  const double log_det_precision = 2 * Eigen::LLT<Eigen::MatrixXd>(precision)
                                           .matrixLLT()
                                           .diagonal()
                                           .array()
                                           .log()
                                           .sum();
  const double kl = 0.5 * ((lambda.asDiagonal() * sigma).trace() +
                           mean.dot(lambda.cwiseProduct(mean)) - 13 -
                           lambda.array().log().sum() + log_det_precision);
  auto got = q.KlToPrior(lambda);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_NEAR(*got, kl, 1e-8 * (1 + std::abs(kl)));

  const int n = 100000;
  const Eigen::MatrixXd draws = q.Draw(23, n);
  const Eigen::VectorXd m = draws.rowwise().mean();
  const Eigen::MatrixXd centred = draws.colwise() - m;
  const Eigen::MatrixXd cov = centred * centred.transpose() / (n - 1);
  const Eigen::VectorXd sd = sigma.diagonal().cwiseSqrt();
  for (int a = 0; a < 13; ++a) {
    EXPECT_NEAR(m[a], mean[a], 0.02 * sd[a]);
    for (int b = 0; b < 13; ++b)
      EXPECT_NEAR(cov(a, b), sigma(a, b), 0.03 * sd[a] * sd[b])
          << a << "," << b;
  }
}

TEST(NngBlkTriTest, WithoutCrossMomentsItIsNoisyKfac) {
  // Zero cross moments: the same draws from the same generator and the same
  // preconditioned step as noisy K-FAC's (kfac.h), up to rounding.
  auto c = MakeCurvature({3, 3}, 6);
  for (auto& link : c->cross) {
    link.a.setZero();
    link.s.setZero();
  }
  const std::vector<LayerShape>& shapes = c->net->layers();
  const double gamma_in = 0.05, scale = 0.1, gamma = 0.2;
  auto chain = internal::BuildKfacChain(c->factors, c->cross, gamma_in, scale);
  ASSERT_TRUE(chain.ok()) << chain.status();
  const Eigen::VectorXd mean = c->theta.col(1);
  Rng kfac_rng(9), chain_rng(9);
  Eigen::MatrixXd kfac_draws, draws;
  internal::SampleKfac(shapes, c->factors, mean, scale, gamma_in, 5, kfac_rng,
                       &kfac_draws);
  internal::FillKfacNormals(shapes, 5, chain_rng, &draws);
  for (int s = 0; s < 5; ++s) {
    chain->Transform(shapes, draws.col(s).data(), draws.col(s).data());
    draws.col(s) += mean;
  }
  EXPECT_LT(MaxAbs(draws - kfac_draws), 1e-12 * MaxAbs(kfac_draws));

  auto update = internal::BuildKfacChain(c->factors, c->cross, gamma, 1.0);
  ASSERT_TRUE(update.ok());
  Rng rng(10);
  const Eigen::VectorXd v = Gaussian(25, 1, rng);
  Eigen::VectorXd kfac_step, step;
  internal::PreconditionKfac(shapes, c->factors, gamma, v, &kfac_step);
  update->ApplyCovariance(shapes, v, &step);
  EXPECT_LT((step - kfac_step).cwiseAbs().maxCoeff(),
            1e-12 * kfac_step.cwiseAbs().maxCoeff());
}

Dataset SmallRegression(int n, uint64_t seed) {
  Rng rng(seed);
  Dataset data;
  data.num_features = 2;
  for (int i = 0; i < n; ++i) {
    const double a = rng.Normal(), b = rng.Normal();
    data.features.insert(data.features.end(), {a, b});
    data.targets.push_back(std::sin(a) - 0.5 * b + 0.1 * rng.Normal());
  }
  return data;
}

TEST(NngBlkTriTest, StepsAsNoisyKfacUntilTheFirstStatistics) {
  // Until cross moments exist (statistics every 2nd step), nng_blktri draws
  // and steps as noisy_kfac does from the same seeds; after statistics
  // (beta 0.5, so the cross moments matter) its steps differ.
  const Dataset data = SmallRegression(16, 11);
  const ModelSpec spec =
      ModelSpec::ForTask(Task::kRegression, 2, 0, {3, 3}, Activation::kTanh);
  const ParamMap params = {{"stats_interval", "2"},
                           {"inverse_interval", "1"},
                           {"batch_size", "8"},
                           {"beta", "0.5"},
                           {"init_std", "0.1"}};
  std::vector<Eigen::VectorXd> means[2];
  const char* const names[2] = {"noisy_kfac", "nng_blktri"};
  for (int m = 0; m < 2; ++m) {
    auto method = MethodRegistry::Builtin().Create(names[m], params);
    ASSERT_TRUE(method.ok()) << method.status();
    Rng rng(12);
    ASSERT_TRUE((*method)->Initialize(spec, data, rng).ok());
    for (int step = 0; step < 4; ++step) {
      auto stats = (*method)->Step({0, 2, 4, 6, 8, 10, 12, 14}, rng);
      ASSERT_TRUE(stats.ok()) << stats.status();
      means[m].push_back((*method)->ExportPosterior()->mean());
    }
  }
  const double size = MaxAbs(means[0][0]);
  EXPECT_LT(MaxAbs(means[1][0] - means[0][0]), 1e-12 * size);
  EXPECT_GT(MaxAbs(means[1][3] - means[0][3]), 1e-3 * size);
}

TEST(NngBlkTriTest, ExportsAServableKroneckerChainThatRoundTrips) {
  const Dataset data = SmallRegression(64, 13);
  TrainRequest r;
  r.method = "nng_blktri";
  r.hidden_sizes = {4, 3};
  r.params = {{"batch_size", "16"}, {"inverse_interval", "2"}};
  r.options.epochs = 5;
  auto fit = Train(r, data, MethodRegistry::Builtin());
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->posterior->family(), "kronecker_chain");
  const auto& chain =
      static_cast<const KroneckerChainPosterior&>(*fit->posterior).chain();
  // The training statistics coupled the layers.
  EXPECT_GT(MaxAbs(chain.links[0].psi_in), 0);
  EXPECT_GT(chain.layers[0].in_coupling.maxCoeff(), 0);
  snapshot::Posterior proto;
  fit->posterior->ToProto(&proto);
  const ModelSpec spec =
      ModelSpec::ForTask(Task::kRegression, 2, 0, {4, 3}, Activation::kTanh);
  auto back = PosteriorFromProto(proto, spec);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->family(), "kronecker_chain");
  EXPECT_EQ((*back)->mean(), fit->posterior->mean());
  EXPECT_EQ((*back)->Draw(3, 4), fit->posterior->Draw(3, 4));
  EXPECT_EQ((*back)->MarginalVariances(), fit->posterior->MarginalVariances());
}

}  // namespace
}  // namespace bnn
