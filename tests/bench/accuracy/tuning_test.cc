#include "bench/accuracy/tuning.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/numbers.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/random.h"

#include "bench/accuracy/data_splits.h"
#include "tests/test_util/test_util.h"

namespace bnn::experiment {
namespace {

using ::bnn::testing::Msg;
using ::testing::HasSubstr;

TEST(TuningGridTest, EnumeratesTheCartesianProduct) {
  auto grid = ParseTuningGrid({"a=1,2,3", "b=x,y"});
  ASSERT_TRUE(grid.ok()) << grid.status();
  ASSERT_EQ(grid->size(), 6);
  std::set<ParamMap> points;
  for (int64_t p = 0; p < grid->size(); ++p) points.insert(grid->Point(p));
  EXPECT_EQ(points.size(), 6u);
  EXPECT_EQ(grid->Point(0), (ParamMap{{"a", "1"}, {"b", "x"}}));
  EXPECT_EQ(grid->Point(1), (ParamMap{{"a", "1"}, {"b", "y"}}));
  EXPECT_EQ(grid->Point(5), (ParamMap{{"a", "3"}, {"b", "y"}}));
}

TEST(TuningGridTest, TiedParametersShareAValue) {
  auto grid = ParseTuningGrid({"w+b=0.1,10", "tau=3"});
  ASSERT_TRUE(grid.ok()) << grid.status();
  ASSERT_EQ(grid->size(), 2);
  EXPECT_EQ(grid->Point(1), (ParamMap{{"w", "10"}, {"b", "10"}, {"tau", "3"}}));
  EXPECT_THAT(Msg(ParseTuningGrid({"w+=1"}).status()),
              HasSubstr("empty parameter name"));
  EXPECT_THAT(Msg(ParseTuningGrid({"w+b=1", "b=2"}).status()),
              HasSubstr("'b' more than once"));
}

TEST(TuningGridTest, RejectsMalformedSpecs) {
  EXPECT_THAT(Msg(ParseTuningGrid({"a"}).status()), HasSubstr("key=value1"));
  EXPECT_THAT(Msg(ParseTuningGrid({"a=1,,2"}).status()),
              HasSubstr("empty value"));
  EXPECT_THAT(Msg(ParseTuningGrid({"a=1", "a=2"}).status()),
              HasSubstr("more than once"));
  EXPECT_TRUE(ParseTuningGrid({})->empty());
}

TEST(KFoldsTest, PartitionsEveryRowOnce) {
  Rng rng(3);
  const std::vector<Fold> folds = KFolds(23, 5, rng);
  ASSERT_EQ(folds.size(), 5u);
  std::vector<int> seen(23, 0);
  for (const Fold& f : folds) {
    EXPECT_GE(f.validation.size(), 4u);
    EXPECT_LE(f.validation.size(), 5u);
    EXPECT_EQ(f.fit.size() + f.validation.size(), 23u);
    for (int64_t i : f.validation) ++seen[i];
    for (int64_t i : f.fit) {
      EXPECT_FALSE(
          std::binary_search(f.validation.begin(), f.validation.end(), i));
    }
  }
  for (int count : seen) EXPECT_EQ(count, 1);
}

Dataset Rows(int n) {
  Dataset d;
  d.num_features = 1;
  for (int i = 0; i < n; ++i) {
    d.features.push_back(i);
    d.targets.push_back(i);
  }
  return d;
}

double Value(const ParamMap& p, const std::string& key) {
  double v = 0;
  EXPECT_TRUE(absl::SimpleAtod(p.at(key), &v));
  return v;
}

// The score peaks at x = 2; x = 3 fails (a diverging setting) and must be
// disqualified rather than abort the search.
TEST(CrossValidateTest, PicksTheBestMeanAndSurvivesFailures) {
  auto grid = ParseTuningGrid({"x=1,2,3,4"});
  ASSERT_TRUE(grid.ok());
  std::set<uint64_t> seeds;
  auto score = [&](const ParamMap& p, const Dataset& fit,
                   const Dataset& validation,
                   uint64_t seed) -> absl::StatusOr<double> {
    EXPECT_EQ(fit.num_rows() + validation.num_rows(), 20);
    seeds.insert(seed);
    const double x = Value(p, "x");
    if (x == 3) return absl::InternalError("diverged");
    return -(x - 2) * (x - 2) + 0.01 * validation.num_rows();
  };
  auto result = CrossValidate(*grid, Rows(20), 4, 7, score);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->best, (ParamMap{{"x", "2"}}));
  ASSERT_EQ(result->points.size(), 4u);
  EXPECT_EQ(result->points[1].fold_scores.size(), 4u);
  EXPECT_TRUE(std::isinf(result->points[2].mean));
  EXPECT_THAT(result->points[2].error, HasSubstr("diverged"));
  // One training seed per fold, shared by all grid points.
  EXPECT_EQ(seeds.size(), 4u);
}

TEST(CrossValidateTest, FailsWhenEveryPointFails) {
  auto grid = ParseTuningGrid({"x=1,2"});
  auto score = [](const ParamMap&, const Dataset&, const Dataset&,
                  uint64_t) -> absl::StatusOr<double> { return std::nan(""); };
  auto result = CrossValidate(*grid, Rows(10), 2, 1, score);
  EXPECT_THAT(Msg(result.status()), HasSubstr("every grid point failed"));
  EXPECT_FALSE(CrossValidate(*grid, Rows(3), 5, 1, score).ok());
}

}  // namespace
}  // namespace bnn::experiment
