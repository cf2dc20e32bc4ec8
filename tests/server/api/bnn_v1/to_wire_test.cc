#include "server/api/bnn_v1/to_wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bnn::server {
namespace {

using ::testing::ElementsAre;

TEST(ToWireTaskTest, ClassificationTasksShareOneWireTask) {
  EXPECT_EQ(ToWireTask("regression"), v1::TASK_REGRESSION);
  EXPECT_EQ(ToWireTask("binary"), v1::TASK_CLASSIFICATION);
  EXPECT_EQ(ToWireTask("multiclass"), v1::TASK_CLASSIFICATION);
}

TEST(ToSnapshotInfoTest, CopiesEveryField) {
  store::SnapshotMeta meta;
  meta.set_snapshot_id("snap-00000000000000aa");
  meta.set_method("slang");
  (*meta.mutable_params())["rank"] = "2";
  meta.set_task("binary");
  meta.add_class_values(2);
  meta.add_class_values(4);
  meta.set_num_features(3);
  meta.add_hidden_sizes(8);
  meta.add_activations("tanh");
  meta.set_num_parameters(41);
  meta.set_posterior_family("low_rank");
  meta.set_dataset_id("ds-00000000000000bb");
  meta.set_dataset_version(4);
  meta.set_dataset_hash("abc");
  meta.set_steps(60);
  meta.set_epochs(20);
  meta.set_final_loss(0.25);
  meta.set_train_seconds(1.5);
  meta.set_seed(7);
  meta.set_parent_snapshot_id("snap-00000000000000cc");
  meta.set_prior_from_parent(true);
  meta.set_created_unix_ms(1234);
  meta.set_size_bytes(999);
  meta.set_format_version(1);
  meta.set_library_version("0.1.0");
  meta.set_job_id("job-00000000000000dd");
  v1::SnapshotInfo info;
  ToSnapshotInfo(meta, &info);
  EXPECT_EQ(info.snapshot_id(), "snap-00000000000000aa");
  EXPECT_EQ(info.method(), "slang");
  EXPECT_EQ(info.params().at("rank"), "2");
  EXPECT_EQ(info.task(), v1::TASK_CLASSIFICATION);
  EXPECT_THAT(info.class_values(), ElementsAre(2, 4));
  EXPECT_EQ(info.num_features(), 3);
  EXPECT_THAT(info.model().hidden_sizes(), ElementsAre(8));
  EXPECT_THAT(info.model().activations(), ElementsAre("tanh"));
  EXPECT_EQ(info.num_parameters(), 41);
  EXPECT_EQ(info.posterior_family(), "low_rank");
  EXPECT_EQ(info.dataset_id(), "ds-00000000000000bb");
  EXPECT_EQ(info.dataset_version(), 4);
  EXPECT_EQ(info.dataset_hash(), "abc");
  EXPECT_EQ(info.steps(), 60);
  EXPECT_EQ(info.epochs(), 20);
  EXPECT_EQ(info.final_loss(), 0.25);
  EXPECT_EQ(info.train_seconds(), 1.5);
  EXPECT_EQ(info.seed(), 7u);
  EXPECT_EQ(info.parent_snapshot_id(), "snap-00000000000000cc");
  EXPECT_TRUE(info.prior_from_parent());
  EXPECT_EQ(info.created_unix_ms(), 1234);
  EXPECT_EQ(info.size_bytes(), 999);
  EXPECT_EQ(info.format_version(), 1u);
  EXPECT_EQ(info.library_version(), "0.1.0");
  EXPECT_EQ(info.job_id(), "job-00000000000000dd");
  // Every wire field is set from the record (none is left at its default).
  std::vector<const google::protobuf::FieldDescriptor*> set;
  info.GetReflection()->ListFields(info, &set);
  EXPECT_EQ(static_cast<int>(set.size()), info.GetDescriptor()->field_count());
}

TEST(ToJobTest, CopiesTheStateModelAndLossCurve) {
  store::JobRecord record;
  record.set_job_id("job-00000000000000aa");
  record.set_state(store::JobRecord::INTERRUPTED);
  record.set_dataset_version(2);
  record.set_model_name("m");
  record.set_publish(true);
  record.add_loss_curve_steps(4);
  record.add_loss_curve_losses(0.5);
  v1::Job job;
  ToJob(record, &job);
  EXPECT_EQ(job.state(), v1::JOB_STATE_INTERRUPTED);
  EXPECT_EQ(job.dataset_version(), 2);
  EXPECT_EQ(job.model_name(), "m");
  EXPECT_TRUE(job.publish());
  ASSERT_EQ(job.loss_curve_size(), 1);
  EXPECT_EQ(job.loss_curve(0).step(), 4);
  EXPECT_EQ(job.loss_curve(0).loss(), 0.5);
  record.set_state(store::JobRecord::CANCELLING);
  ToJob(record, &job);
  EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLING);
}

TEST(FromWireJobStateTest, RoundTripsEveryStateAndRejectsTheRest) {
  for (int value = v1::JOB_STATE_QUEUED; value <= v1::JOB_STATE_CANCELLING;
       ++value) {
    const auto state = static_cast<v1::JobState>(value);
    absl::StatusOr<store::JobRecord::State> stored = FromWireJobState(state);
    ASSERT_TRUE(stored.ok()) << value;
    store::JobRecord record;
    record.set_state(*stored);
    v1::Job job;
    ToJob(record, &job);
    EXPECT_EQ(job.state(), state);
  }
  EXPECT_FALSE(FromWireJobState(v1::JOB_STATE_UNSPECIFIED).ok());
  EXPECT_FALSE(FromWireJobState(static_cast<v1::JobState>(99)).ok());
}

TEST(ToDatasetInfoTest, CopiesTheVersion) {
  store::DatasetMeta meta;
  meta.set_dataset_id("ds-00000000000000bb");
  meta.set_task("regression");
  meta.set_version(3);
  meta.set_num_rows(25);
  v1::DatasetInfo info;
  ToDatasetInfo(meta, &info);
  EXPECT_EQ(info.version(), 3);
  EXPECT_EQ(info.num_rows(), 25);
  EXPECT_EQ(info.task(), v1::TASK_REGRESSION);
}

}  // namespace
}  // namespace bnn::server
