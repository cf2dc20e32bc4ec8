// DatasetHash and its incremental form DatasetHasher: the hash depends on
// every value, the task and the classes, and extending a saved state with
// more rows gives the hash of all rows, however they were split.
#include "bnn/data/dataset_hash.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bnn/data/dataset.h"

namespace bnn {
namespace {

class DatasetHashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_.task = Task::kBinary;
    data_.num_features = 2;
    data_.features = {0.5, -1.0, 2.0, 3.25, 0.0, 1e-3};
    data_.targets = {0, 1, 1};
    data_.num_classes = 2;
    data_.class_values = {-1, 1};
  }
  Dataset data_;
};

TEST_F(DatasetHashTest, IsHexSha256AndDeterministic) {
  const std::string h = DatasetHash(data_);
  ASSERT_EQ(h.size(), 64u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos);
  const Dataset copy = data_;
  EXPECT_EQ(DatasetHash(copy), h);
}

TEST_F(DatasetHashTest, ChangesWithAnyValue) {
  const std::string h = DatasetHash(data_);
  Dataset d = data_;
  d.features[4] = 1e-300;  // one tiny change
  EXPECT_NE(DatasetHash(d), h);
  d = data_;
  d.targets[0] = 1;
  EXPECT_NE(DatasetHash(d), h);
  d = data_;
  d.class_values = {0, 1};
  EXPECT_NE(DatasetHash(d), h);
  // The same values as one row of four features hash differently.
  d = data_;
  d.num_features = 4;
  d.features.resize(4);
  d.targets.resize(1);
  Dataset two_rows = data_;
  two_rows.features.resize(4);
  two_rows.targets.resize(2);
  EXPECT_NE(DatasetHash(d), DatasetHash(two_rows));
}

TEST_F(DatasetHashTest, SameRowsAsRegressionHashDifferently) {
  const std::string h = DatasetHash(data_);
  Dataset d = data_;
  d.task = Task::kRegression;
  d.num_classes = 0;
  d.class_values.clear();
  EXPECT_NE(DatasetHash(d), h);
}

TEST_F(DatasetHashTest, ResumedStatesExtendToTheHashOfAllRows) {
  const std::string whole = DatasetHash(data_);
  for (int split = 0; split <= 3; ++split) {
    DatasetHasher first(data_.task, data_.num_features);
    first.AddRows(data_.features.data(), data_.targets.data(), split);
    absl::StatusOr<DatasetHasher> resumed =
        DatasetHasher::FromState(first.State(), data_.num_features);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    EXPECT_EQ(resumed->num_rows(), split);
    resumed->AddRows(data_.features.data() + 2 * split,
                     data_.targets.data() + split, 3 - split);
    EXPECT_EQ(resumed->HexDigest(data_.class_values), whole) << split;
    // A digest does not end the hash.
    EXPECT_EQ(resumed->HexDigest(data_.class_values), whole);
  }
}

TEST_F(DatasetHashTest, RejectsForeignStates) {
  DatasetHasher hasher(data_.task, data_.num_features);
  hasher.AddRows(data_.features.data(), data_.targets.data(), 1);
  EXPECT_EQ(DatasetHasher::FromState(hasher.State(), 3).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DatasetHasher::FromState("not a state", 2).status().code(),
            absl::StatusCode::kDataLoss);
  std::string truncated = hasher.State();
  truncated.pop_back();
  EXPECT_FALSE(DatasetHasher::FromState(truncated, 2).ok());
}

}  // namespace
}  // namespace bnn
