// Dataset: validation (sizes, finiteness, class indices) with messages naming
// the row and column, Subset/Append, label encoding and the Task names.
#include "bnn/data/dataset.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util/test_util.h"

namespace bnn {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ::bnn::testing::Msg;

// 3 rows x 2 features, regression.
Dataset Regression() {
  Dataset d;
  d.task = Task::kRegression;
  d.num_features = 2;
  d.features = {1, 2, 3, 4, 5, 6};
  d.targets = {10, 20, 30};
  d.feature_names = {"a", "b"};
  d.target_name = "y";
  return d;
}

// 4 rows x 1 feature, 3 classes with original labels {2, 5, 7}.
Dataset Multiclass() {
  Dataset d;
  d.task = Task::kMulticlass;
  d.num_features = 1;
  d.features = {0.5, 1.5, 2.5, 3.5};
  d.targets = {0, 2, 1, 2};
  d.num_classes = 3;
  d.class_values = {2, 5, 7};
  return d;
}

TEST(ColumnRangesTest, RowsInPiecesGiveTheRangesOfTheWhole) {
  const std::vector<double> x = {1, -2, 3, 4, -5, 6};  // 3 rows x 2
  const std::vector<double> y = {7, -8, 9};
  ColumnRanges whole(2, /*with_target=*/true);
  whole.AddRows(x.data(), y.data(), 3);
  ColumnRanges pieces(2, /*with_target=*/true);
  pieces.AddRows(x.data(), y.data(), 1);
  pieces.AddRows(x.data() + 2, y.data() + 1, 2);
  EXPECT_THAT(pieces.min(), ElementsAre(-5, -2, -8));
  EXPECT_THAT(pieces.max(), ElementsAre(3, 6, 9));
  EXPECT_EQ(pieces.min(), whole.min());
  EXPECT_EQ(pieces.max(), whole.max());
  EXPECT_TRUE(pieces.Check().ok());
  ColumnRanges features_only(2, /*with_target=*/false);
  features_only.AddRows(x.data(), y.data(), 3);
  EXPECT_EQ(features_only.min().size(), 2u);
}

TEST(ColumnRangesTest, OverflowingSpanNamesTheColumn) {
  const std::vector<double> x = {0, 0};
  const std::vector<double> y = {-1e308, 1e308};
  ColumnRanges ranges(1, /*with_target=*/true);
  ranges.AddRows(x.data(), y.data(), 1);
  EXPECT_TRUE(ranges.Check().ok());
  ranges.AddRows(x.data() + 1, y.data() + 1, 1);  // a later piece
  EXPECT_EQ(ranges.Check().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(ranges.Check()), HasSubstr("target spans [-1e+308, 1e+308]"));
  const std::vector<double> wide = {-1e308, 0, 1e308, 0};
  ColumnRanges features(2, /*with_target=*/false);
  features.AddRows(wide.data(), y.data(), 2);
  EXPECT_THAT(Msg(features.Check()), HasSubstr("feature 0 spans"));
}

TEST(ColumnRangesTest, FromMinMaxChecksSizes) {
  const absl::StatusOr<ColumnRanges> kept =
      ColumnRanges::FromMinMax(1, true, {0, -1e308}, {0, 1e308});
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->Check().ok());
  EXPECT_THAT(Msg(ColumnRanges::FromMinMax(2, true, {0, 0}, {1, 1}).status()),
              HasSubstr("the dataset has 3 columns"));
}

TEST(DatasetValidateTest, AcceptsWellFormedDatasets) {
  EXPECT_TRUE(Regression().Validate().ok());
  EXPECT_TRUE(Multiclass().Validate().ok());
  Dataset binary = Regression();
  binary.task = Task::kBinary;
  binary.num_classes = 2;
  binary.targets = {0, 1, 1};
  EXPECT_TRUE(binary.Validate().ok());
  // class_values and feature_names are optional.
  binary.class_values.clear();
  binary.feature_names.clear();
  EXPECT_TRUE(binary.Validate().ok());
}

TEST(DatasetValidateTest, RejectsNonPositiveFeatureCount) {
  Dataset d = Regression();
  d.num_features = 0;
  d.features.clear();
  d.feature_names.clear();
  const absl::Status s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("num_features = 0"));
}

TEST(DatasetValidateTest, RejectsFeatureCountThatDisagreesWithRows) {
  Dataset d = Regression();
  d.features.pop_back();  // 5 values for 3 x 2
  const absl::Status s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("features has 5 values"),
                            HasSubstr("3 rows x 2 features")));
}

TEST(DatasetValidateTest, RejectsFeatureNamesOfTheWrongLength) {
  Dataset d = Regression();
  d.feature_names = {"a", "b", "c"};
  const absl::Status s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s),
              AllOf(HasSubstr("feature_names has 3"), HasSubstr("expected 2")));
}

TEST(DatasetValidateTest, NanFeatureNamesRowAndFeature) {
  Dataset d = Regression();
  d.features[3] = std::numeric_limits<double>::quiet_NaN();  // row 1, col 1
  const absl::Status s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s),
              AllOf(HasSubstr("row 1, feature 1"), HasSubstr("not finite")));
}

TEST(DatasetValidateTest, InfFeatureNamesRowAndFeature) {
  Dataset d = Regression();
  d.features[4] = -std::numeric_limits<double>::infinity();  // row 2, col 0
  const absl::Status s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s),
              AllOf(HasSubstr("row 2, feature 0"), HasSubstr("not finite")));
}

TEST(DatasetValidateTest, NonFiniteTargetNamesRow) {
  Dataset d = Regression();
  d.targets[2] = std::numeric_limits<double>::infinity();
  const absl::Status s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("row 2"), HasSubstr("target"),
                            HasSubstr("not finite")));
}

// Issue 10, finding 9: y = +-1e308 overflowed the standardisation's mean and
// variance, and training "succeeded" with NaN predictions. A column whose
// max - min overflows is refused naming it; a large but finite range is
// accepted.
TEST(DatasetValidateTest, RangeThatOverflowsStandardisationIsRejected) {
  Dataset d = Regression();
  d.targets = {1e308, -1e308, 0};
  absl::Status s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("target spans [-1e+308, 1e+308]"),
                            HasSubstr("standardised")));

  d = Regression();
  d.features[3] = -1.5e308;  // row 1, feature 1
  d.features[5] = 1.5e308;   // row 2, feature 1
  s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("feature 1 spans"));

  d = Regression();
  d.targets = {1e308, 1.7e308, 1.2e308};
  EXPECT_TRUE(d.Validate().ok());
  // Class indices are not standardised; their labels may be anything finite.
  EXPECT_TRUE(Multiclass().Validate().ok());
}

TEST(DatasetValidateTest, RejectsClassIndexOutOfRange) {
  Dataset d = Multiclass();
  d.targets[3] = 3;  // num_classes = 3
  absl::Status s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("row 3"), HasSubstr("class index 3"),
                            HasSubstr("[0, 3)")));

  d = Multiclass();
  d.targets[1] = -1;
  s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("row 1"), HasSubstr("class index -1")));
}

TEST(DatasetValidateTest, RejectsFractionalClassIndex) {
  Dataset d = Multiclass();
  d.targets[0] = 0.5;
  const absl::Status s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("row 0"), HasSubstr("class index 0.5")));
}

TEST(DatasetValidateTest, RejectsClassCountInconsistentWithTask) {
  Dataset d = Multiclass();
  d.task = Task::kBinary;  // but 3 classes
  absl::Status s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("num_classes = 3"), HasSubstr("binary")));

  d = Multiclass();
  d.num_classes = 1;
  d.class_values = {2};
  d.targets = {0, 0, 0, 0};
  s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("num_classes = 1"));
}

TEST(DatasetValidateTest, RejectsClassValuesOfTheWrongLength) {
  Dataset d = Multiclass();
  d.class_values = {2, 5};
  const absl::Status s = d.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("class_values has 2"),
                            HasSubstr("num_classes = 3")));
}

TEST(DatasetValidateTest, RegressionTargetsNeedNotBeClassIndices) {
  Dataset d = Regression();
  d.targets = {-1.5, 1e9, 0.25};
  EXPECT_TRUE(d.Validate().ok());
}

TEST(DatasetSubsetTest, CopiesRowsInTheGivenOrderAndKeepsSchema) {
  const Dataset d = Multiclass();
  const Dataset s = d.Subset({3, 0, 3});
  EXPECT_EQ(s.num_rows(), 3);
  EXPECT_EQ(s.num_features, 1);
  EXPECT_THAT(s.features, ElementsAre(3.5, 0.5, 3.5));
  EXPECT_THAT(s.targets, ElementsAre(2, 0, 2));
  EXPECT_EQ(s.task, Task::kMulticlass);
  EXPECT_EQ(s.num_classes, 3);
  EXPECT_THAT(s.class_values, ElementsAre(2, 5, 7));
  EXPECT_TRUE(s.Validate().ok());
}

TEST(DatasetSubsetTest, MultiFeatureRowsStayTogether) {
  const Dataset d = Regression();
  const Dataset s = d.Subset({2, 1});
  EXPECT_THAT(s.features, ElementsAre(5, 6, 3, 4));
  EXPECT_THAT(s.targets, ElementsAre(30, 20));
  EXPECT_THAT(s.feature_names, ElementsAre("a", "b"));
  EXPECT_EQ(s.target_name, "y");
}

TEST(DatasetSubsetTest, EmptyIndicesGiveEmptyDatasetWithSchema) {
  const Dataset s = Regression().Subset({});
  EXPECT_EQ(s.num_rows(), 0);
  EXPECT_TRUE(s.features.empty());
  EXPECT_EQ(s.num_features, 2);
}

TEST(DatasetAppendTest, AppendsRowsOfTheSameSchema) {
  Dataset d = Regression();
  Dataset more = Regression().Subset({0});
  ASSERT_TRUE(d.Append(more).ok());
  EXPECT_EQ(d.num_rows(), 4);
  EXPECT_THAT(d.features, ElementsAre(1, 2, 3, 4, 5, 6, 1, 2));
  EXPECT_THAT(d.targets, ElementsAre(10, 20, 30, 10));
  EXPECT_TRUE(d.Validate().ok());
}

TEST(DatasetAppendTest, RejectsDifferentFeatureCount) {
  Dataset d = Regression();
  Dataset other;
  other.num_features = 3;
  other.features = {1, 2, 3};
  other.targets = {4};
  const absl::Status s = d.Append(other);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("schema mismatch"),
                            HasSubstr("3 features"), HasSubstr("2 features")));
  EXPECT_EQ(d.num_rows(), 3);  // unchanged
  EXPECT_EQ(d.features.size(), 6u);
}

TEST(DatasetAppendTest, RejectsDifferentTask) {
  Dataset d = Regression();
  Dataset other = Regression();
  other.task = Task::kBinary;
  other.num_classes = 2;
  other.targets = {0, 1, 0};
  const absl::Status s = d.Append(other);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("schema mismatch"), HasSubstr("binary"),
                            HasSubstr("regression")));
  EXPECT_EQ(d.num_rows(), 3);
}

TEST(DatasetAppendTest, RejectsDifferentClassValues) {
  Dataset d = Multiclass();
  Dataset other = Multiclass();
  other.class_values = {1, 5, 7};  // same count, different labels
  const absl::Status s = d.Append(other);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  // The message says what differs, even when counts and tasks agree.
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("schema mismatch"),
                            HasSubstr("3 classes: 1, 5, 7"),
                            HasSubstr("3 classes: 2, 5, 7")));
  EXPECT_EQ(d.num_rows(), 4);
}

TEST(EncodeClassLabelsTest, MinusOnePlusOneBecomesBinary) {
  Dataset d = Regression();
  d.targets = {1, -1, 1};
  ASSERT_TRUE(EncodeClassLabels(&d).ok());
  EXPECT_EQ(d.task, Task::kBinary);
  EXPECT_EQ(d.num_classes, 2);
  EXPECT_THAT(d.class_values, ElementsAre(-1, 1));
  EXPECT_THAT(d.targets, ElementsAre(1, 0, 1));
  EXPECT_TRUE(d.Validate().ok());
}

TEST(EncodeClassLabelsTest, TwoAndFourBecomeZeroAndOne) {
  Dataset d = Regression();
  d.targets = {4, 2, 4};
  ASSERT_TRUE(EncodeClassLabels(&d).ok());
  EXPECT_EQ(d.task, Task::kBinary);
  EXPECT_THAT(d.class_values, ElementsAre(2, 4));
  EXPECT_THAT(d.targets, ElementsAre(1, 0, 1));
}

TEST(EncodeClassLabelsTest, ThreeOrMoreLabelsBecomeMulticlassSorted) {
  Dataset d;
  d.num_features = 1;
  d.features = {0, 0, 0, 0, 0};
  d.targets = {9, 3, -2, 3, 9};
  ASSERT_TRUE(EncodeClassLabels(&d).ok());
  EXPECT_EQ(d.task, Task::kMulticlass);
  EXPECT_EQ(d.num_classes, 3);
  EXPECT_THAT(d.class_values, ElementsAre(-2, 3, 9));
  EXPECT_THAT(d.targets, ElementsAre(2, 1, 0, 1, 2));
  EXPECT_TRUE(d.Validate().ok());
}

TEST(EncodeClassLabelsTest, SingleLabelIsAnError) {
  Dataset d = Regression();
  d.targets = {7, 7, 7};
  const absl::Status s = EncodeClassLabels(&d);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("at least 2 distinct labels"),
                            HasSubstr("found 1")));
}

TEST(EncodeClassLabelsTest, NonIntegerLabelIsAnErrorNamingTheRow) {
  Dataset d = Regression();
  d.targets = {0, 1, 0.5};
  const absl::Status s = EncodeClassLabels(&d);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("row 2"), HasSubstr("0.5"),
                            HasSubstr("not an integer")));
}

TEST(EncodeClassLabelsTest, NonFiniteLabelIsAnError) {
  Dataset d = Regression();
  d.targets = {0, std::numeric_limits<double>::quiet_NaN(), 1};
  const absl::Status s = EncodeClassLabels(&d);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("row 1"));
}

TEST(TaskNamesTest, RoundTripsEveryTask) {
  for (Task t : {Task::kRegression, Task::kBinary, Task::kMulticlass}) {
    const absl::StatusOr<Task> back = StringToTask(TaskToString(t));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(TaskToString(Task::kRegression), "regression");
  EXPECT_EQ(TaskToString(Task::kBinary), "binary");
  EXPECT_EQ(TaskToString(Task::kMulticlass), "multiclass");
}

TEST(TaskNamesTest, UnknownNameListsTheKnownOnes) {
  const absl::StatusOr<Task> t = StringToTask("classification");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(t.status()),
              AllOf(HasSubstr("'classification'"), HasSubstr("regression"),
                    HasSubstr("binary"), HasSubstr("multiclass")));
}

TEST(TaskNamesTest, IsClassification) {
  EXPECT_FALSE(IsClassification(Task::kRegression));
  EXPECT_TRUE(IsClassification(Task::kBinary));
  EXPECT_TRUE(IsClassification(Task::kMulticlass));
}

}  // namespace
}  // namespace bnn
