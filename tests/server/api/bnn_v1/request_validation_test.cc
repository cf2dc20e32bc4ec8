#include "server/api/bnn_v1/request_validation.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;

v1::DatasetHeader GoodHeader() {
  v1::DatasetHeader header;
  header.set_name("cubic");
  header.set_task(v1::TASK_REGRESSION);
  header.set_num_features(4);
  return header;
}

v1::Example Row(std::vector<double> x, double y) {
  v1::Example example;
  example.mutable_x()->Add(x.begin(), x.end());
  example.set_y(y);
  return example;
}

TEST(RequireIdTest, NamesTheField) {
  EXPECT_TRUE(RequireId("snapshot_id", "snap-1").ok());
  EXPECT_THAT(RequireId("header.dataset_id", ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "header.dataset_id is required"));
}

TEST(ValidateStreamMessageTest, HeaderFirstAndOnce) {
  EXPECT_TRUE(
      ValidateStreamMessage("upload", StreamPayload::kHeader, 0, false).ok());
  EXPECT_TRUE(
      ValidateStreamMessage("upload", StreamPayload::kChunk, 1, true).ok());
  EXPECT_THAT(ValidateStreamMessage("upload", StreamPayload::kChunk, 0, false),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "upload message 0 is a row chunk before the header"));
  EXPECT_THAT(ValidateStreamMessage("append", StreamPayload::kHeader, 3, true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "append message 3 is a second header"));
  EXPECT_THAT(ValidateStreamMessage("upload", StreamPayload::kNone, 2, true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "upload message 2 has neither a header nor a chunk"));
}

TEST(PayloadOfTest, BothStreamRequestTypes) {
  v1::UploadDatasetRequest upload;
  EXPECT_EQ(PayloadOf(upload), StreamPayload::kNone);
  upload.mutable_header();
  EXPECT_EQ(PayloadOf(upload), StreamPayload::kHeader);
  v1::AppendRowsRequest append;
  append.mutable_chunk();
  EXPECT_EQ(PayloadOf(append), StreamPayload::kChunk);
}

TEST(ValidateDatasetHeaderTest, AcceptsAGoodHeader) {
  EXPECT_TRUE(ValidateDatasetHeader(GoodHeader()).ok());
}

TEST(ValidateDatasetHeaderTest, NameLength) {
  v1::DatasetHeader header = GoodHeader();
  header.set_name("");
  EXPECT_THAT(ValidateDatasetHeader(header),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "header.name must be 1..128 characters; it has 0"));
  header.set_name(std::string(129, 'n'));
  EXPECT_THAT(ValidateDatasetHeader(header),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "header.name must be 1..128 characters; it has 129"));
  // Characters, not bytes: 128 two-byte characters are fine.
  std::string wide;
  for (int i = 0; i < 128; ++i) wide += "\xC3\xA9";
  header.set_name(wide);
  EXPECT_TRUE(ValidateDatasetHeader(header).ok());
}

TEST(ValidateDatasetHeaderTest, TaskMustBeSpecified) {
  v1::DatasetHeader header = GoodHeader();
  header.set_task(v1::TASK_UNSPECIFIED);
  EXPECT_THAT(ValidateDatasetHeader(header),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "header.task must be TASK_REGRESSION or "
                       "TASK_CLASSIFICATION; got TASK_UNSPECIFIED"));
  header.set_task(static_cast<v1::Task>(17));
  EXPECT_THAT(ValidateDatasetHeader(header),
              StatusIs(absl::StatusCode::kInvalidArgument, "got 17"));
}

TEST(ValidateDatasetHeaderTest, FeatureCountAndNames) {
  v1::DatasetHeader header = GoodHeader();
  header.set_num_features(0);
  EXPECT_THAT(ValidateDatasetHeader(header),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "header.num_features = 0 must be in [1, 65536]"));
  header = GoodHeader();
  header.add_feature_names("a");
  EXPECT_THAT(ValidateDatasetHeader(header),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "header.feature_names has 1 names; send none or one "
                       "per feature (num_features = 4)"));
  for (const char* name : {"b", "", "d"}) header.add_feature_names(name);
  EXPECT_THAT(ValidateDatasetHeader(header),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "header.feature_names[2] must be 1..128 characters"));
  header = GoodHeader();
  header.set_target_name(std::string(200, 't'));
  EXPECT_THAT(ValidateDatasetHeader(header),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "header.target_name must be 0..128 characters"));
}

TEST(LabelledRowsTest, RowWidthNamesTheUploadRow) {
  v1::RowChunk chunk;
  *chunk.add_rows() = Row({1, 2, 3, 4}, 0);
  *chunk.add_rows() = Row({1, 2}, 0);
  const RowLimit limit = UploadRowLimit(ServerLimits());
  // An empty chunk of an upload is allowed.
  EXPECT_TRUE(LabelledRows("", v1::RowChunk(), 4, 0, limit).ok());
  // Rows are counted from the start of the upload: this chunk starts at 2.
  EXPECT_THAT(LabelledRows("", chunk, 4, 2, limit).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rows[3].x has 2 values; the dataset has 4 features"));
}

TEST(LabelledRowsTest, NonFiniteValues) {
  const RowLimit limit = UploadRowLimit(ServerLimits());
  v1::RowChunk chunk;
  *chunk.add_rows() = Row({0, 0, std::nan(""), 0}, 0);
  EXPECT_THAT(
      LabelledRows("", chunk, 4, 7, limit).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "rows[7].x[2] is NaN"));
  chunk.Clear();
  *chunk.add_rows() =
      Row({-std::numeric_limits<double>::infinity(), 0, 0, 0}, 0);
  EXPECT_THAT(
      LabelledRows("", chunk, 4, 0, limit).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "rows[0].x[0] is -Inf"));
  chunk.Clear();
  *chunk.add_rows() =
      Row({0, 0, 0, 0}, std::numeric_limits<double>::infinity());
  EXPECT_THAT(
      LabelledRows("", chunk, 4, 5, limit).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "rows[5].y is +Inf"));
}

TEST(LabelledRowsTest, UploadRowLimit) {
  ServerLimits limits;
  limits.max_upload_rows = 3;
  v1::RowChunk chunk;
  *chunk.add_rows() = Row({0, 0, 0, 0}, 0);
  *chunk.add_rows() = Row({0, 0, 0, 0}, 0);
  EXPECT_TRUE(LabelledRows("", chunk, 4, 1, UploadRowLimit(limits)).ok());
  EXPECT_THAT(LabelledRows("", chunk, 4, 2, UploadRowLimit(limits)).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "rows has 4 rows; the server limit is 3 "
                       "(--max-upload-rows)"));
}

TEST(LabelledRowsTest, PackedRowsAreTheSameMatrix) {
  v1::RowChunk per_row;
  *per_row.add_rows() = Row({1, 2}, 5);
  *per_row.add_rows() = Row({3, 4}, 6);
  v1::RowChunk packed;
  packed.mutable_features()->add_shape(2);
  packed.mutable_features()->add_shape(2);
  for (const float v : {1, 2, 3, 4}) packed.mutable_features()->add_f32(v);
  packed.mutable_targets()->add_shape(2);
  packed.mutable_targets()->add_f64(5);
  packed.mutable_targets()->add_f64(6);
  const RowLimit limit = PredictRowLimit(ServerLimits());
  const absl::StatusOr<RowMatrix> a =
      LabelledRows("rows.", per_row, 2, 0, limit);
  const absl::StatusOr<RowMatrix> b =
      LabelledRows("rows.", packed, 2, 0, limit);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->features, b->features);
  EXPECT_EQ(a->targets, b->targets);
  EXPECT_EQ(b->num_rows, 2);
  // Both forms at once, and targets without features.
  *packed.add_rows() = Row({1, 2}, 0);
  EXPECT_THAT(LabelledRows("rows.", packed, 2, 0, limit).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rows.rows and rows.features/rows.targets are both "
                       "set"));
  packed.clear_rows();
  packed.clear_features();
  EXPECT_THAT(LabelledRows("rows.", packed, 2, 0, limit).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rows.features and rows.targets go together"));
}

TEST(ValidateStreamCompleteTest, NeedsHeaderAndRows) {
  EXPECT_TRUE(ValidateStreamComplete("upload", true, 1).ok());
  EXPECT_THAT(
      ValidateStreamComplete("upload", false, 0),
      StatusIs(absl::StatusCode::kInvalidArgument, "upload has no header"));
  EXPECT_THAT(
      ValidateStreamComplete("append", true, 0),
      StatusIs(absl::StatusCode::kInvalidArgument, "append has no rows"));
}

TEST(ValidateClassLabelsTest, NeedsTwoDistinctLabels) {
  const std::vector<double> two = {4, 2, 4};
  const std::vector<double> one = {3, 3, 3};
  EXPECT_TRUE(ValidateClassLabels(two).ok());
  EXPECT_THAT(ValidateClassLabels(one),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "classification needs at least 2 distinct labels in "
                       "rows[].y; the upload has 1"));
}

TEST(ValidateClassLabelsTest, BoundsTheClassCount) {
  std::vector<double> labels(70000);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = i;
  EXPECT_THAT(ValidateClassLabels(labels),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "take 70000 distinct values; at most 65536 classes"));
}

TEST(EncodeAppendedLabelsTest, KnownLabelsBecomeClassIndices) {
  const std::vector<double> classes = {-1, 2, 4};
  std::vector<double> labels = {4, -1, 2, 4};
  ASSERT_TRUE(EncodeAppendedLabels(absl::MakeSpan(labels), 0, classes).ok());
  EXPECT_THAT(labels, ::testing::ElementsAre(2, 0, 1, 2));
}

TEST(EncodeAppendedLabelsTest, ANewLabelIsNamedWithItsRow) {
  const std::vector<double> classes = {2, 4};
  std::vector<double> labels = {2, 3};
  // The chunk starts at row 10 of the append.
  EXPECT_THAT(EncodeAppendedLabels(absl::MakeSpan(labels), 10, classes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rows[11].y = 3 is not a class of the dataset; its "
                       "class labels are 2, 4"));
  std::vector<double> above = {5};
  EXPECT_THAT(EncodeAppendedLabels(absl::MakeSpan(above), 0, classes),
              StatusIs(absl::StatusCode::kInvalidArgument, "rows[0].y = 5"));
}

TEST(RequestedVersionTest, UnsetIsLatestAndSetMustBePositive) {
  EXPECT_EQ(*RequestedVersion("version", false, 0), std::nullopt);
  EXPECT_EQ(*RequestedVersion("version", true, 3), 3);
  EXPECT_THAT(RequestedVersion("dataset_version", true, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "dataset_version = 0 must be >= 1"));
}

TEST(ValidateModelSpecTest, Widths) {
  v1::ModelSpec model;
  EXPECT_TRUE(ValidateModelSpec(model).ok());  // logistic/linear regression
  model.add_hidden_sizes(50);
  model.add_hidden_sizes(0);
  EXPECT_THAT(ValidateModelSpec(model),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "model.hidden_sizes[1] = 0 must be in [1, 65536]"));
  model.set_hidden_sizes(1, 65537);
  EXPECT_THAT(ValidateModelSpec(model),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "model.hidden_sizes[1] = 65537 must be in [1, 65536]"));
  model.Clear();
  for (int i = 0; i < 17; ++i) model.add_hidden_sizes(2);
  EXPECT_THAT(ValidateModelSpec(model),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "model.hidden_sizes has 17 layers; at most 16"));
}

TEST(ValidateModelSpecTest, Activations) {
  v1::ModelSpec model;
  model.add_hidden_sizes(8);
  model.add_hidden_sizes(8);
  model.add_activations("tanh");
  EXPECT_TRUE(ValidateModelSpec(model).ok());  // one for all layers
  model.add_activations("leaky_tanh");
  EXPECT_TRUE(ValidateModelSpec(model).ok());  // one per layer
  model.set_activations(1, "sigmoid");
  EXPECT_THAT(
      ValidateModelSpec(model),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "model.activations[1] = 'sigmoid' is not an activation"));
  model.set_activations(1, "relu");
  model.add_activations("relu");
  EXPECT_THAT(ValidateModelSpec(model),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "model.activations has 3 entries"));
}

google::protobuf::RepeatedPtrField<v1::Features> Rows(
    const std::vector<std::vector<double>>& rows) {
  google::protobuf::RepeatedPtrField<v1::Features> out;
  for (const auto& row : rows)
    out.Add()->mutable_x()->Add(row.begin(), row.end());
  return out;
}

absl::StatusOr<RowMatrix> PerRow(absl::string_view field,
                                 const std::vector<std::vector<double>>& rows,
                                 int64_t num_features,
                                 const ServerLimits& limits) {
  return FeatureRows(field, Rows(rows), "features", false, v1::Tensor(),
                     num_features, PredictRowLimit(limits));
}

TEST(FeatureRowsTest, CountWidthAndFiniteness) {
  ServerLimits limits;
  limits.max_predict_rows = 2;
  const absl::StatusOr<RowMatrix> two =
      PerRow("rows", {{1, 2}, {3, 4}}, 2, limits);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->features, std::vector<double>({1, 2, 3, 4}));
  EXPECT_THAT(PerRow("rows", {}, 2, limits).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rows is empty and features is not set"));
  EXPECT_THAT(PerRow("rows", {{1, 2}, {1, 2}, {1, 2}}, 2, limits).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "rows has 3 rows; the server limit is 2 "
                       "(--max-predict-rows)"));
  EXPECT_THAT(PerRow("rows", {{1, 2}, {1}}, 2, limits).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rows[1].x has 1 values; the snapshot has 2 features"));
  EXPECT_THAT(
      PerRow("rows", {{1, std::nan("")}}, 2, limits).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "rows[0].x[1] is NaN"));
}

TEST(FeatureRowsTest, PathOfNestedRows) {
  EXPECT_THAT(PerRow("rows.rows", {{1}, {1, 2}}, 2, ServerLimits()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rows.rows[0].x has 1 values"));
}

TEST(FeatureRowsTest, PackedShapeDtypeAndLength) {
  v1::Tensor tensor;
  tensor.add_shape(2);
  tensor.add_shape(2);
  for (const double v : {1.0, 2.0, 3.0, 4.0}) tensor.add_f64(v);
  const RowLimit limit = PredictRowLimit(ServerLimits());
  const auto packed = [&](const v1::Tensor& t) {
    return FeatureRows("rows", Rows({}), "features", true, t, 2, limit)
        .status();
  };
  EXPECT_TRUE(packed(tensor).ok());
  v1::Tensor bad = tensor;
  bad.add_shape(1);
  EXPECT_THAT(packed(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                    "features.shape has 3 dimensions"));
  bad = tensor;
  bad.clear_f64();
  EXPECT_THAT(packed(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "features.f64 has 0 values; features.shape [2, 2] "
                       "needs 4"));
  bad = tensor;
  bad.set_f64(3, std::numeric_limits<double>::infinity());
  EXPECT_THAT(packed(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                    "features[1, 1] is +Inf"));
  EXPECT_THAT(
      FeatureRows("rows", Rows({{1, 2}}), "features", true, tensor, 2, limit)
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "rows and features are both set"));
}

TEST(ValidateResponseSizeTest, BoundedByTheMessageLimit) {
  ServerLimits limits;
  limits.max_message_bytes = 8000;
  EXPECT_TRUE(ValidateResponseSize(10, 100, limits).ok());  // 8000 bytes
  EXPECT_THAT(ValidateResponseSize(10, 101, limits),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "the response would hold 10 rows x 101 values (about "
                       "8080 bytes); the server limit is 8000 bytes "
                       "(--max-message-bytes)"));
}

TEST(ValidateStreamBytesTest, BoundedByTheFlag) {
  EXPECT_TRUE(
      ValidateStreamBytes("import", 100, 100, "--max-snapshot-bytes").ok());
  EXPECT_THAT(ValidateStreamBytes("import", 101, 100, "--max-snapshot-bytes"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "import exceeds 100 bytes, the server limit "
                       "(--max-snapshot-bytes)"));
}

TEST(ResolveNumSamplesTest, DefaultLimitAndSign) {
  ServerLimits limits;
  EXPECT_EQ(*ResolveNumSamples(0, limits), kDefaultPredictSamples);
  EXPECT_EQ(*ResolveNumSamples(4096, limits), 4096);
  EXPECT_THAT(ResolveNumSamples(100000, limits).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "num_samples 100000 exceeds the server limit 4096 "
                       "(--max-predict-samples)"));
  EXPECT_THAT(ResolveNumSamples(-1, limits).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "num_samples = -1 must be >= 1"));
  limits.max_predict_samples = 10;
  EXPECT_EQ(*ResolveNumSamples(0, limits), 10);  // default capped
}

}  // namespace
}  // namespace bnn::server
