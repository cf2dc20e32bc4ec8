// fast_inverse, fast_sample and fast_eig against dense Eigen references.
#include "bnn/linalg/low_rank.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include <Eigen/Dense>
#include <gtest/gtest.h>

#include "bnn/random.h"

namespace bnn {
namespace {

Eigen::MatrixXd Gaussian(int rows, int cols, Rng& rng) {
  Eigen::MatrixXd m(rows, cols);
  for (int j = 0; j < cols; ++j) {
    for (int i = 0; i < rows; ++i) m(i, j) = rng.Normal();
  }
  return m;
}

Eigen::VectorXd PositiveVector(int n, Rng& rng) {
  Eigen::VectorXd d(n);
  for (int i = 0; i < n; ++i) d[i] = rng.Uniform(0.2, 3.0);
  return d;
}

Eigen::MatrixXd DenseCovariance(const Eigen::MatrixXd& u,
                                const Eigen::VectorXd& d) {
  Eigen::MatrixXd precision = u * u.transpose();
  precision.diagonal() += d;
  return precision.inverse();
}

struct Case {
  int dim;
  int rank;
};

class LowRankPrecisionTest : public ::testing::TestWithParam<Case> {};

TEST_P(LowRankPrecisionTest, SolveMatchesDenseInverse) {
  const Case c = GetParam();
  Rng rng(c.dim * 31 + c.rank);
  const Eigen::MatrixXd u = Gaussian(c.dim, c.rank, rng);
  const Eigen::VectorXd d = PositiveVector(c.dim, rng);
  const Eigen::MatrixXd g = Gaussian(c.dim, 3, rng);
  LowRankPrecision<double> f;
  ASSERT_TRUE(f.Factor(u, d).ok());
  Eigen::MatrixXd x;
  f.Solve(g, &x);
  const Eigen::MatrixXd expected = DenseCovariance(u, d) * g;
  EXPECT_LT((x - expected).norm() / expected.norm(), 1e-8);
  // The paper-named one-shot form agrees.
  const Eigen::VectorXd x0 = FastInverse<double>(g.col(0), u, d);
  EXPECT_LT((x0 - expected.col(0)).norm() / expected.col(0).norm(), 1e-8);
}

TEST_P(LowRankPrecisionTest, SampleFactorReproducesCovarianceExactly) {
  // With eps = I the samples minus mu are the columns of the factor T used by
  // fast_sample, so T T^T must equal (U U^T + D)^-1 (no Monte Carlo error).
  const Case c = GetParam();
  Rng rng(c.dim * 7 + c.rank);
  const Eigen::MatrixXd u = Gaussian(c.dim, c.rank, rng);
  const Eigen::VectorXd d = PositiveVector(c.dim, rng);
  const Eigen::VectorXd mu = Gaussian(c.dim, 1, rng);
  LowRankPrecision<double> f;
  ASSERT_TRUE(f.Factor(u, d).ok());
  Eigen::MatrixXd samples;
  f.Sample(mu, Eigen::MatrixXd::Identity(c.dim, c.dim), &samples);
  const Eigen::MatrixXd t = samples.colwise() - mu;
  const Eigen::MatrixXd sigma = DenseCovariance(u, d);
  EXPECT_LT((t * t.transpose() - sigma).cwiseAbs().maxCoeff(),
            1e-10 * sigma.cwiseAbs().maxCoeff());
}

TEST_P(LowRankPrecisionTest, MarginalVariancesAndLogDet) {
  const Case c = GetParam();
  Rng rng(c.dim + 100 * c.rank);
  const Eigen::MatrixXd u = Gaussian(c.dim, c.rank, rng);
  const Eigen::VectorXd d = PositiveVector(c.dim, rng);
  LowRankPrecision<double> f;
  ASSERT_TRUE(f.Factor(u, d).ok());
  const Eigen::MatrixXd sigma = DenseCovariance(u, d);
  EXPECT_LT((f.MarginalVariances() - sigma.diagonal()).cwiseAbs().maxCoeff(),
            1e-10);
  Eigen::MatrixXd precision = u * u.transpose();
  precision.diagonal() += d;
  const double log_det = 2 * Eigen::LLT<Eigen::MatrixXd>(precision)
                                 .matrixLLT()
                                 .diagonal()
                                 .array()
                                 .log()
                                 .sum();
  EXPECT_NEAR(f.LogDetPrecision(), log_det, 1e-9 * std::abs(log_det) + 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Sizes, LowRankPrecisionTest,
                         ::testing::Values(Case{1, 1}, Case{5, 0}, Case{8, 3},
                                           Case{20, 5}, Case{50, 10},
                                           Case{12, 12}, Case{6, 9}));

TEST(LowRankPrecisionTest, RankDeficientUStillSamplesExactly) {
  // Zero and duplicated columns make U^T D^-1 U singular; the factorisation
  // must drop the null directions, not fail or lose covariance.
  Rng rng(4);
  const int dim = 10;
  Eigen::MatrixXd u = Eigen::MatrixXd::Zero(dim, 4);
  u.col(0) = Gaussian(dim, 1, rng);
  u.col(2) = u.col(0);
  u.col(3) = Gaussian(dim, 1, rng);
  const Eigen::VectorXd d = PositiveVector(dim, rng);
  LowRankPrecision<double> f;
  ASSERT_TRUE(f.Factor(u, d).ok());
  EXPECT_EQ(f.rank(), 2);
  Eigen::MatrixXd samples;
  f.Sample(Eigen::VectorXd::Zero(dim), Eigen::MatrixXd::Identity(dim, dim),
           &samples);
  const Eigen::MatrixXd sigma = DenseCovariance(u, d);
  EXPECT_LT((samples * samples.transpose() - sigma).cwiseAbs().maxCoeff(),
            1e-10);
  Eigen::MatrixXd g = Gaussian(dim, 1, rng), x;
  f.Solve(g, &x);
  EXPECT_LT((x - sigma * g).norm(), 1e-9 * (sigma * g).norm());
}

TEST(LowRankPrecisionTest, MonteCarloCovarianceWithinThreePercent) {
  Rng rng(8);
  const int dim = 10, rank = 3, draws = 200000;
  const Eigen::MatrixXd u = Gaussian(dim, rank, rng);
  const Eigen::VectorXd d = PositiveVector(dim, rng);
  const Eigen::VectorXd mu = Gaussian(dim, 1, rng);
  LowRankPrecision<double> f;
  ASSERT_TRUE(f.Factor(u, d).ok());
  const Eigen::MatrixXd eps = Gaussian(dim, draws, rng);
  Eigen::MatrixXd samples;
  f.Sample(mu, eps, &samples);
  const Eigen::VectorXd mean = samples.rowwise().mean();
  const Eigen::MatrixXd centered = samples.colwise() - mean;
  const Eigen::MatrixXd cov = centered * centered.transpose() / (draws - 1);
  const Eigen::MatrixXd sigma = DenseCovariance(u, d);
  for (int i = 0; i < dim; ++i) {
    for (int j = 0; j < dim; ++j) {
      // Relative to the scale sqrt(S_ii S_jj): the MC standard error there is
      // about 0.3%, so 3% cannot flake but catches any wrong factor.
      EXPECT_LT(std::abs(cov(i, j) - sigma(i, j)),
                0.03 * std::sqrt(sigma(i, i) * sigma(j, j)))
          << i << "," << j;
    }
  }
}

// Sample and Solve are const, and a Predictor calls Sample on its snapshot's
// posterior from every request at once: each call must give what it gives
// alone. (They shared a mutable scratch matrix: concurrent Predicts mixed
// each other's samples, or corrupted the heap when their sample counts
// differed, found by bench/load.)
TEST(LowRankPrecisionTest, SampleAndSolveMayRunConcurrently) {
  Rng rng(5);
  const int dim = 300, rank = 6;
  const Eigen::MatrixXd u = Gaussian(dim, rank, rng);
  const Eigen::VectorXd d = PositiveVector(dim, rng);
  const Eigen::VectorXd mu = Gaussian(dim, 1, rng);
  LowRankPrecision<double> f;
  ASSERT_TRUE(f.Factor(u, d).ok());
  // Different widths, as requests for different sample counts.
  const std::vector<Eigen::MatrixXd> eps = {
      Gaussian(dim, 1, rng), Gaussian(dim, 40, rng), Gaussian(dim, 7, rng),
      Gaussian(dim, 120, rng)};
  std::vector<Eigen::MatrixXd> sampled(eps.size()), solved(eps.size());
  for (size_t i = 0; i < eps.size(); ++i) {
    f.Sample(mu, eps[i], &sampled[i]);
    f.Solve(eps[i], &solved[i]);
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Eigen::MatrixXd out;
      for (int k = 0; k < 300; ++k) {
        const size_t i = (t + k) % eps.size();
        f.Sample(mu, eps[i], &out);
        if ((out - sampled[i]).norm() > 1e-12 * sampled[i].norm()) ++wrong;
        f.Solve(eps[i], &out);
        if ((out - solved[i]).norm() > 1e-12 * solved[i].norm()) ++wrong;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong, 0);
}

TEST(LowRankPrecisionTest, RejectsNonPositiveDiagonal) {
  LowRankPrecision<double> f;
  Eigen::VectorXd d = Eigen::VectorXd::Ones(3);
  d[1] = 0;
  const absl::Status s = f.Factor(Eigen::MatrixXd::Zero(3, 1), d);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("d[1]"), absl::string_view::npos) << s;
}

TEST(LowRankPrecisionTest, FloatSolveIsAccurate) {
  Rng rng(12);
  const Eigen::MatrixXd u = Gaussian(40, 4, rng);
  const Eigen::VectorXd d = PositiveVector(40, rng);
  const Eigen::MatrixXd g = Gaussian(40, 1, rng);
  LowRankPrecision<float> f;
  ASSERT_TRUE(f.Factor(u.cast<float>(), d.cast<float>()).ok());
  Eigen::MatrixXf x;
  f.Solve(g.cast<float>(), &x);
  const Eigen::MatrixXd expected = DenseCovariance(u, d) * g;
  EXPECT_LT((x.cast<double>() - expected).norm() / expected.norm(), 1e-4);
}

// A = (1-b) U U^T + b G G^T of exact rank r, applied through factors only.
struct LowRankOperator {
  Eigen::MatrixXd factor;  // A = F F^T
  void operator()(const Eigen::MatrixXd& x, Eigen::MatrixXd* out) const {
    *out = factor * (factor.transpose() * x);
  }
};

class FastEigTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {
};

TEST_P(FastEigTest, TopEigenvaluesMatchDenseSolverOnExactlyLowRankInputs) {
  const auto [dim, true_rank, rank] = GetParam();
  Rng rng(dim * 13 + true_rank);
  LowRankOperator op{Gaussian(dim, true_rank, rng)};
  const Eigen::MatrixXd dense = op.factor * op.factor.transpose();
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(dense);
  RandomizedEigSolver<double> solver;
  RandomizedEigSolver<double>::Result result;
  solver.Solve(op, dim, rank, 4, rng, &result);
  ASSERT_EQ(result.values.size(), rank);
  ASSERT_EQ(result.vectors.cols(), rank);
  for (int i = 0; i < rank; ++i) {
    const double expected = es.eigenvalues()[dim - 1 - i];
    EXPECT_NEAR(result.values[i], expected, 1e-6 * es.eigenvalues()[dim - 1])
        << "eigenvalue " << i;
    // A v = lambda v for every returned pair with a non-negligible value.
    if (expected > 1e-8 * es.eigenvalues()[dim - 1]) {
      const Eigen::VectorXd v = result.vectors.col(i);
      EXPECT_NEAR(v.norm(), 1.0, 1e-8);
      EXPECT_LT((dense * v - result.values[i] * v).norm(),
                1e-6 * es.eigenvalues()[dim - 1]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FastEigTest,
    ::testing::Values(std::make_tuple(30, 3, 1), std::make_tuple(30, 3, 3),
                      std::make_tuple(50, 5, 3), std::make_tuple(50, 12, 10),
                      std::make_tuple(8, 8, 8), std::make_tuple(40, 2, 5)));

// Checks TopEigenSolver's `count` pairs of `a` against the full dense
// solver: the eigenvalues, A v = lambda v and orthonormal vectors, to
// rounding of |A|.
// `route`, when given, receives the route the solver took; `lanczos`
// false pins the Householder route.
void ExpectTopEigenpairs(const Eigen::MatrixXd& a, int count,
                         TopEigenSolver::Route* route = nullptr,
                         bool lanczos = true) {
  TopEigenSolver solver;
  if (!lanczos) solver.set_lanczos_min_size(std::numeric_limits<int>::max());
  Eigen::VectorXd values;
  Eigen::MatrixXd vectors;
  solver.Compute(a, count, &values, &vectors);
  if (route != nullptr) *route = solver.last_route();
  SCOPED_TRACE(::testing::Message()
               << "n = " << a.rows() << ", count = " << count << ", route "
               << static_cast<int>(solver.last_route()) << " after "
               << solver.last_lanczos_iterations() << " Lanczos iterations");
  const int n = static_cast<int>(a.rows());
  const int wanted = std::min(count, n);
  ASSERT_EQ(values.size(), count);
  ASSERT_EQ(vectors.rows(), n);
  ASSERT_EQ(vectors.cols(), count);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> dense(a);
  const Eigen::VectorXd expected = dense.eigenvalues().reverse();
  const double scale = std::max(1.0, expected.cwiseAbs().maxCoeff());
  for (int k = 0; k < wanted; ++k) {
    EXPECT_NEAR(values[k], expected[k], 1e-12 * scale) << "pair " << k;
    EXPECT_LT((a * vectors.col(k) - values[k] * vectors.col(k)).norm(),
              1e-10 * scale)
        << "pair " << k;
  }
  const Eigen::MatrixXd v = vectors.leftCols(wanted);
  EXPECT_LT((v.transpose() * v - Eigen::MatrixXd::Identity(wanted, wanted))
                .cwiseAbs()
                .maxCoeff(),
            1e-12);
  for (int k = wanted; k < count; ++k) {
    EXPECT_EQ(values[k], 0.0);
    EXPECT_EQ(vectors.col(k).norm(), 0.0);
  }
}

TEST(TopEigenSolverTest, MatchesTheDenseSolver) {
  Rng rng(3);
  auto gaussian = [&](int rows, int cols) { return Gaussian(rows, cols, rng); };
  // A Gram matrix of full rank, as of SLANG's exact solver.
  const Eigen::MatrixXd f = gaussian(60, 41);
  ExpectTopEigenpairs(f.transpose() * f, 1);
  ExpectTopEigenpairs(f.transpose() * f, 8);
  ExpectTopEigenpairs(f.transpose() * f, 41);  // all of them
  // Rank 3 (dead units, duplicated rows): the zero eigenvalues are wanted.
  const Eigen::MatrixXd low = gaussian(30, 3);
  ExpectTopEigenpairs(low * low.transpose(), 6);
  // A repeated top eigenvalue: any orthonormal basis of its space is right.
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(gaussian(20, 20));
  const Eigen::MatrixXd q = qr.householderQ();
  Eigen::VectorXd spectrum = Eigen::VectorXd::LinSpaced(20, 0.0, 1.0);
  spectrum.head(3).setConstant(5.0);
  ExpectTopEigenpairs(q * spectrum.asDiagonal() * q.transpose(), 5);
  // Indefinite, and more pairs asked for than the matrix has.
  const Eigen::MatrixXd g = gaussian(7, 7);
  ExpectTopEigenpairs(g + g.transpose(), 10);
  ExpectTopEigenpairs(Eigen::MatrixXd::Constant(1, 1, 2.5), 3);
  // A diagonal matrix (T splits into 1 x 1 blocks).
  ExpectTopEigenpairs(
      Eigen::VectorXd::LinSpaced(9, 1, 9).asDiagonal().toDenseMatrix(), 4);
  // Hard cases, with few pairs wanted (bisection: fewer than n / 8) and
  // with many (QL): eigenvalues over 16 decades (rotated so that T is not
  // diagonal), all negative, a repeated top eigenvalue, and Wilkinson's
  // W21+, whose top eigenvalues come in pairs that agree to 14 digits.
  Eigen::VectorXd graded(20);
  for (int i = 0; i < 20; ++i) graded[i] = std::pow(10.0, 8 - 0.8 * i);
  const Eigen::MatrixXd wide = q * graded.asDiagonal() * q.transpose();
  Eigen::MatrixXd wilkinson = Eigen::MatrixXd::Zero(21, 21);
  for (int i = 0; i < 21; ++i) {
    wilkinson(i, i) = std::abs(10 - i);
    if (i + 1 < 21) wilkinson(i, i + 1) = wilkinson(i + 1, i) = 1;
  }
  for (const int count : {2, 6}) {
    ExpectTopEigenpairs(wide, count);
    ExpectTopEigenpairs(-(f.transpose() * f), 2 * count);
    ExpectTopEigenpairs(q * spectrum.asDiagonal() * q.transpose(), count);
    ExpectTopEigenpairs(wilkinson, count);
  }
}

// The Lanczos route (n >= kLanczosMinSize, fewer than n / 8 pairs wanted)
// on the matrices it must certify or hand over: every case against the
// dense solver, and the route each took.
TEST(TopEigenSolverTest, LanczosRouteIsExactOrHandsOver) {
  using Route = TopEigenSolver::Route;
  Rng rng(11);
  auto gaussian = [&](int rows, int cols) { return Gaussian(rows, cols, rng); };
  Route route = Route::kNone;
  // A gradient Gram matrix as SLANG's small job forms (129 = L + M S): the
  // per-example gradients share a mean direction, so the top eigenvalue
  // stands out and Lanczos converges well before its cap.
  Eigen::MatrixXd f = gaussian(400, 129);
  f.rowwise() += 3 * gaussian(1, 129).row(0);
  const Eigen::MatrixXd gram = f.transpose() * f;
  ExpectTopEigenpairs(gram, 1, &route);
  EXPECT_EQ(route, Route::kLanczos);
  for (const int count : {1, 4, 16}) {
    ExpectTopEigenpairs(gram, count);
    ExpectTopEigenpairs(gram, count, &route, /*lanczos=*/false);
    EXPECT_EQ(route, Route::kHouseholder) << count;
  }
  // Below kLanczosMinSize, or with n / 8 or more wanted: the Householder
  // route.
  const int below = TopEigenSolver::kLanczosMinSize - 1;
  ExpectTopEigenpairs(gram.topLeftCorner(below, below), 1, &route);
  EXPECT_EQ(route, Route::kHouseholder);
  ExpectTopEigenpairs(gram, 17, &route);
  EXPECT_EQ(route, Route::kHouseholder);
  // A top eigenvalue repeated three times: the start vector has one
  // component in its eigenspace, and only rounding brings in the others
  // (which the gap then amplifies), so Lanczos may find all copies or
  // converge without them; in the second case the certificate must fail
  // and hand over. Either way the pairs are right.
  const int n = 120;
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(gaussian(n, n));
  const Eigen::MatrixXd q = qr.householderQ();
  Eigen::VectorXd spectrum = Eigen::VectorXd::LinSpaced(n, 0.0, 1.0);
  spectrum.head(3).setConstant(5.0);
  const Eigen::MatrixXd repeated = q * spectrum.asDiagonal() * q.transpose();
  for (const int count : {1, 2, 3, 5}) ExpectTopEigenpairs(repeated, count);
  // A top eigenvector orthogonal to the start vector: Lanczos cannot see
  // it (bar rounding), so whatever it converges to must not pass.
  Eigen::VectorXd start;
  TopEigenSolver::StartVector(n, &start);
  Eigen::MatrixXd basis(n, n);
  basis.col(0) = start;
  basis.rightCols(n - 1) = gaussian(n, n - 1);
  Eigen::HouseholderQR<Eigen::MatrixXd> qr2(basis);
  const Eigen::MatrixXd q2 = qr2.householderQ();  // column 1 is _|_ start
  Eigen::VectorXd hidden = Eigen::VectorXd::LinSpaced(n, 0.0, 1.0);
  hidden[1] = 10.0;
  // The start vector is an eigenvector (Lanczos stops after one step) ...
  const Eigen::MatrixXd missed = q2 * hidden.asDiagonal() * q2.transpose();
  ExpectTopEigenpairs(missed, 1);
  ExpectTopEigenpairs(missed, 3);
  // ... or a mix of two (only rounding brings in the top eigenvector, which
  // the gap then amplifies).
  Eigen::MatrixXd q3 = q2;
  q3.col(0) = (q2.col(0) + q2.col(2)) / std::sqrt(2.0);
  q3.col(2) = (q2.col(0) - q2.col(2)) / std::sqrt(2.0);
  const Eigen::MatrixXd mixed = q3 * hidden.asDiagonal() * q3.transpose();
  ExpectTopEigenpairs(mixed, 1);
  ExpectTopEigenpairs(mixed, 3);
  // Wilkinson's W101+: its top eigenvalues come in pairs that agree to
  // far more digits than Lanczos can separate; indefinite and negative
  // definite matrices; eigenvalues over 16 decades.
  Eigen::MatrixXd wilkinson = Eigen::MatrixXd::Zero(101, 101);
  for (int i = 0; i < 101; ++i) {
    wilkinson(i, i) = std::abs(50 - i);
    if (i + 1 < 101) wilkinson(i, i + 1) = wilkinson(i + 1, i) = 1;
  }
  const Eigen::MatrixXd g = gaussian(n, n);
  Eigen::VectorXd graded(n);
  for (int i = 0; i < n; ++i) graded[i] = std::pow(10.0, 8 - 0.14 * i);
  for (const int count : {1, 2, 6}) {
    ExpectTopEigenpairs(wilkinson, count);
    ExpectTopEigenpairs(g + g.transpose(), count);
    ExpectTopEigenpairs(-gram, count);
    ExpectTopEigenpairs(q * graded.asDiagonal() * q.transpose(), count);
  }
  // The zero matrix (no scale to converge against) and a non-finite one
  // are the Householder route's.
  ExpectTopEigenpairs(Eigen::MatrixXd::Zero(80, 80), 2, &route);
  EXPECT_EQ(route, Route::kHouseholder);
}

TEST(FastEigTest, FloatPrecisionOnLowRankInput) {
  Rng rng(21);
  LowRankOperator op{Gaussian(200, 4, rng)};
  const Eigen::MatrixXd dense = op.factor * op.factor.transpose();
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(dense);
  RandomizedEigSolver<float> solver;
  auto fop = [&](const Eigen::MatrixXf& x, Eigen::MatrixXf* out) {
    const Eigen::MatrixXf f = op.factor.cast<float>();
    *out = f * (f.transpose() * x);
  };
  RandomizedEigSolver<float>::Result result;
  solver.Solve(fop, 200, 2, 4, rng, &result);
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(result.values[i], es.eigenvalues()[199 - i],
                1e-4 * es.eigenvalues()[199]);
  }
}

}  // namespace
}  // namespace bnn
