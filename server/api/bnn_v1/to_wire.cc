#include "server/api/bnn_v1/to_wire.h"

#include <algorithm>

#include <absl/strings/str_cat.h>

#include "bnn/data/dataset.h"

#include "server/store/model_store.h"

namespace bnn::server {
namespace {

v1::JobState ToJobState(store::JobRecord::State state) {
  switch (state) {
    case store::JobRecord::QUEUED:
      return v1::JOB_STATE_QUEUED;
    case store::JobRecord::RUNNING:
      return v1::JOB_STATE_RUNNING;
    case store::JobRecord::SUCCEEDED:
      return v1::JOB_STATE_SUCCEEDED;
    case store::JobRecord::FAILED:
      return v1::JOB_STATE_FAILED;
    case store::JobRecord::CANCELLED:
      return v1::JOB_STATE_CANCELLED;
    case store::JobRecord::INTERRUPTED:
      return v1::JOB_STATE_INTERRUPTED;
    case store::JobRecord::CANCELLING:
      return v1::JOB_STATE_CANCELLING;
    default:
      return v1::JOB_STATE_UNSPECIFIED;
  }
}

}  // namespace

v1::Task ToWireTask(absl::string_view task) {
  return task == TaskToString(Task::kRegression) ? v1::TASK_REGRESSION
                                                 : v1::TASK_CLASSIFICATION;
}

void ToDatasetInfo(const store::DatasetMeta& meta, v1::DatasetInfo* info) {
  info->set_dataset_id(meta.dataset_id());
  info->set_name(meta.name());
  info->set_task(ToWireTask(meta.task()));
  info->set_num_rows(meta.num_rows());
  info->set_num_features(meta.num_features());
  info->set_num_classes(meta.num_classes());
  *info->mutable_class_values() = meta.class_values();
  info->set_version(meta.version());
  info->set_hash(meta.hash());
  info->set_created_unix_ms(meta.created_unix_ms());
  *info->mutable_feature_names() = meta.feature_names();
  info->set_target_name(meta.target_name());
}

void ToJob(const store::JobRecord& record, v1::Job* job) {
  job->set_job_id(record.job_id());
  job->set_state(ToJobState(record.state()));
  job->set_dataset_id(record.dataset_id());
  job->set_method(record.method());
  // The wire lists the trainer's options among the parameters, as a
  // request may give them; the store keeps them once, in their own fields.
  *job->mutable_params() = record.params();
  auto& params = *job->mutable_params();
  params["epochs"] = absl::StrCat(record.epochs());
  params["seed"] = absl::StrCat(record.seed());
  if (record.steps() > 0) params["steps"] = absl::StrCat(record.steps());
  if (record.has_standardize() && !record.standardize()) {
    params["standardize"] = "false";
  }
  job->set_progress(record.progress());
  job->set_epoch(record.epoch());
  job->set_step(record.step());
  job->set_total_steps(record.total_steps());
  job->set_last_loss(record.last_loss());
  job->set_snapshot_id(record.snapshot_id());
  job->set_error(record.error());
  job->set_created_unix_ms(record.created_unix_ms());
  job->set_started_unix_ms(record.started_unix_ms());
  job->set_finished_unix_ms(record.finished_unix_ms());
  job->set_dataset_version(record.dataset_version());
  job->set_model_name(record.model_name());
  job->set_publish(record.publish());
  const int points =
      std::min(record.loss_curve_steps_size(), record.loss_curve_losses_size());
  job->mutable_loss_curve()->Reserve(points);
  for (int i = 0; i < points; ++i) {
    v1::LossPoint* out = job->add_loss_curve();
    out->set_step(record.loss_curve_steps(i));
    out->set_loss(record.loss_curve_losses(i));
  }
}

absl::StatusOr<store::JobRecord::State> FromWireJobState(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_QUEUED:
      return store::JobRecord::QUEUED;
    case v1::JOB_STATE_RUNNING:
      return store::JobRecord::RUNNING;
    case v1::JOB_STATE_SUCCEEDED:
      return store::JobRecord::SUCCEEDED;
    case v1::JOB_STATE_FAILED:
      return store::JobRecord::FAILED;
    case v1::JOB_STATE_CANCELLED:
      return store::JobRecord::CANCELLED;
    case v1::JOB_STATE_INTERRUPTED:
      return store::JobRecord::INTERRUPTED;
    case v1::JOB_STATE_CANCELLING:
      return store::JobRecord::CANCELLING;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("job state ", static_cast<int>(state),
                       " is not a state; see JobState"));
  }
}

void ToJobEvent(const JobEvent& event, v1::JobEvent* out) {
  switch (event.kind) {
    case JobEvent::Kind::kCurrent:
      out->set_kind(v1::JobEvent::KIND_CURRENT);
      break;
    case JobEvent::Kind::kProgress:
      out->set_kind(v1::JobEvent::KIND_PROGRESS);
      break;
    case JobEvent::Kind::kState:
      out->set_kind(v1::JobEvent::KIND_STATE);
      break;
  }
  out->set_state(ToJobState(event.state));
  out->set_epoch(event.epoch);
  out->set_step(event.step);
  out->set_total_steps(event.total_steps);
  out->set_loss(event.loss);
  out->set_steps_per_second(event.steps_per_second);
  out->set_eta_seconds(event.eta_seconds);
  out->set_unix_ms(event.unix_ms);
  out->set_error(event.error);
  out->set_snapshot_id(event.snapshot_id);
}

void ToSnapshotInfo(const store::SnapshotMeta& meta, v1::SnapshotInfo* info) {
  info->set_snapshot_id(meta.snapshot_id());
  info->set_method(meta.method());
  *info->mutable_params() = meta.params();
  info->set_dataset_id(meta.dataset_id());
  info->set_dataset_version(meta.dataset_version());
  info->set_dataset_hash(meta.dataset_hash());
  info->set_task(ToWireTask(meta.task()));
  *info->mutable_model()->mutable_hidden_sizes() = meta.hidden_sizes();
  *info->mutable_model()->mutable_activations() = meta.activations();
  info->set_num_features(meta.num_features());
  info->set_num_parameters(meta.num_parameters());
  info->set_posterior_family(meta.posterior_family());
  info->set_steps(meta.steps());
  info->set_epochs(meta.epochs());
  info->set_final_loss(meta.final_loss());
  info->set_train_seconds(meta.train_seconds());
  info->set_seed(meta.seed());
  info->set_created_unix_ms(meta.created_unix_ms());
  info->set_size_bytes(meta.size_bytes());
  info->set_format_version(meta.format_version());
  info->set_library_version(meta.library_version());
  info->set_parent_snapshot_id(meta.parent_snapshot_id());
  info->set_prior_from_parent(meta.prior_from_parent());
  *info->mutable_class_values() = meta.class_values();
  info->set_job_id(meta.job_id());
}

void ToModelVersion(const Model& model, int64_t version,
                    v1::ModelVersion* out) {
  out->set_model_name(model.info.name());
  out->set_version(version);
  for (const store::ModelVersion& v : model.versions) {
    if (v.version() != version) continue;
    out->set_snapshot_id(v.snapshot_id());
    out->set_created_unix_ms(v.created_unix_ms());
  }
  for (const std::string& alias : AliasesOf(model, version)) {
    out->add_aliases(alias);
  }
}

void ToModelInfo(const Model& model, bool with_versions, v1::ModelInfo* info) {
  info->set_name(model.info.name());
  if (with_versions) {
    for (const store::ModelVersion& v : model.versions) {
      ToModelVersion(model, v.version(), info->add_versions());
    }
  }
  for (const store::ModelAlias& alias : model.aliases) {
    (*info->mutable_aliases())[alias.alias()] = alias.version();
  }
  info->set_num_versions(static_cast<int64_t>(model.versions.size()));
  info->set_latest_version(LatestVersion(model));
  info->set_created_unix_ms(model.info.created_unix_ms());
  info->set_updated_unix_ms(model.info.updated_unix_ms());
}

}  // namespace bnn::server
