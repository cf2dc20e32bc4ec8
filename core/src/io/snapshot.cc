#include "bnn/io/snapshot.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "bnn/core/snapshot.pb.h"
#include "bnn/io/file.h"
#include "bnn/io/record.h"
#include "bnn/posterior/posterior.h"
#include "bnn/status.h"

#include "io/snapshot_proto.h"

namespace bnn {
namespace internal {

void ModelSpecToProto(const ModelSpec& spec, snapshot::ModelSpec* m) {
  m->set_input_dim(spec.input_dim);
  for (int h : spec.hidden_sizes) m->add_hidden_sizes(h);
  for (Activation a : spec.activations) {
    m->add_activations(std::string(ActivationToString(a)));
  }
  m->set_output_dim(spec.output_dim);
  m->set_likelihood(std::string(LikelihoodToString(spec.likelihood)));
}

absl::StatusOr<ModelSpec> ModelSpecFromProto(const snapshot::ModelSpec& p) {
  ModelSpec m;
  m.input_dim = p.input_dim();
  m.hidden_sizes.assign(p.hidden_sizes().begin(), p.hidden_sizes().end());
  for (const std::string& a : p.activations()) {
    BNN_ASSIGN_OR_RETURN(Activation act, StringToActivation(a));
    m.activations.push_back(act);
  }
  m.output_dim = p.output_dim();
  BNN_ASSIGN_OR_RETURN(m.likelihood, StringToLikelihood(p.likelihood()));
  BNN_RETURN_IF_ERROR(m.Validate());
  return m;
}

}  // namespace internal

namespace {

// The snapshot's record frame (bnn/io/record.h); the magic and layout
// predate the shared record format, which adopted them.
constexpr RecordFormat kSnapshotRecord{"BNNSNAP1", kSnapshotFormatVersion,
                                       "snapshot"};

absl::Status CheckFiniteField(absl::string_view field, double value) {
  if (std::isfinite(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("snapshot ", field, " = ", value, " is not finite"));
}

absl::Status CheckPositiveField(absl::string_view field, double value) {
  if (value > 0 && std::isfinite(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "snapshot ", field, " = ", value, " must be positive and finite"));
}

absl::StatusOr<Snapshot> FromProto(const snapshot::Snapshot& p) {
  Snapshot s;
  s.format_version = p.format_version();
  s.library_version = p.library_version();
  s.method = p.method();
  for (const auto& [k, v] : p.params()) s.params[k] = v;
  BNN_ASSIGN_OR_RETURN(s.model, internal::ModelSpecFromProto(p.model()));
  const ModelSpec& m = s.model;
  BNN_ASSIGN_OR_RETURN(s.task, StringToTask(p.task()));
  s.class_values.assign(p.class_values().begin(), p.class_values().end());
  const auto& st = p.standardization();
  s.standardization.feature_mean.assign(st.feature_mean().begin(),
                                        st.feature_mean().end());
  s.standardization.feature_std.assign(st.feature_std().begin(),
                                       st.feature_std().end());
  s.standardization.target_mean = st.target_mean();
  s.standardization.target_std = st.target_std();
  if (static_cast<int>(s.standardization.feature_mean.size()) != m.input_dim ||
      s.standardization.feature_std.size() !=
          s.standardization.feature_mean.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot standardisation has ", s.standardization.feature_mean.size(),
        " features; the model has ", m.input_dim));
  }
  // Every number a prediction is computed from must be finite: a NaN or Inf
  // here turns into NaN outputs served as answers.
  const Standardization& z = s.standardization;
  for (size_t j = 0; j < z.feature_mean.size(); ++j) {
    BNN_RETURN_IF_ERROR(
        CheckFiniteField(absl::StrCat("standardization.feature_mean[", j, "]"),
                         z.feature_mean[j]));
    BNN_RETURN_IF_ERROR(
        CheckPositiveField(absl::StrCat("standardization.feature_std[", j, "]"),
                           z.feature_std[j]));
  }
  BNN_RETURN_IF_ERROR(
      CheckFiniteField("standardization.target_mean", z.target_mean));
  BNN_RETURN_IF_ERROR(
      CheckPositiveField("standardization.target_std", z.target_std));
  if (m.likelihood != LikelihoodForTask(s.task)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot task ", TaskToString(s.task), " does not match its ",
        LikelihoodToString(m.likelihood), " likelihood"));
  }
  if (IsClassification(s.task)) {
    const size_t classes =
        m.likelihood == Likelihood::kCategorical ? m.output_dim : 2;
    if (s.class_values.size() != classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("snapshot has ", s.class_values.size(),
                       " class_values; the model has ", classes, " classes"));
    }
  }
  for (size_t c = 0; c < s.class_values.size(); ++c) {
    BNN_RETURN_IF_ERROR(CheckFiniteField(absl::StrCat("class_values[", c, "]"),
                                         s.class_values[c]));
  }
  s.noise_precision = p.noise_precision();
  if (m.likelihood == Likelihood::kGaussian) {
    BNN_RETURN_IF_ERROR(
        CheckPositiveField("noise_precision", s.noise_precision));
  }
  const auto& t = p.training();
  s.training = {t.dataset_id(),
                t.dataset_version(),
                t.dataset_hash(),
                t.num_train(),
                t.steps(),
                t.epochs(),
                t.final_loss(),
                t.seconds(),
                t.seed(),
                t.parent_snapshot_id(),
                t.prior_from_parent()};
  absl::StatusOr<std::unique_ptr<Posterior>> posterior =
      PosteriorFromProto(p.posterior(), m);
  if (!posterior.ok()) {
    return absl::Status(
        posterior.status().code(),
        absl::StrCat("snapshot posterior: ", posterior.status().message()));
  }
  s.posterior = *std::move(posterior);
  s.created_unix_ms = p.created_unix_ms();
  return s;
}

}  // namespace

absl::StatusOr<std::string> EncodeSnapshot(const Snapshot& s) {
  if (s.posterior == nullptr) {
    return absl::InvalidArgumentError("snapshot has no posterior");
  }
  snapshot::Snapshot p;
  p.set_format_version(kSnapshotFormatVersion);
  p.set_library_version(s.library_version);
  p.set_method(s.method);
  for (const auto& [k, v] : s.params) (*p.mutable_params())[k] = v;
  internal::ModelSpecToProto(s.model, p.mutable_model());
  p.set_task(std::string(TaskToString(s.task)));
  for (double v : s.class_values) p.add_class_values(v);
  auto* st = p.mutable_standardization();
  for (double v : s.standardization.feature_mean) st->add_feature_mean(v);
  for (double v : s.standardization.feature_std) st->add_feature_std(v);
  st->set_target_mean(s.standardization.target_mean);
  st->set_target_std(s.standardization.target_std);
  p.set_noise_precision(s.noise_precision);
  auto* t = p.mutable_training();
  t->set_dataset_id(s.training.dataset_id);
  t->set_dataset_version(s.training.dataset_version);
  t->set_dataset_hash(s.training.dataset_hash);
  t->set_num_train(s.training.num_train);
  t->set_steps(s.training.steps);
  t->set_epochs(s.training.epochs);
  t->set_final_loss(s.training.final_loss);
  t->set_seconds(s.training.seconds);
  t->set_seed(s.training.seed);
  t->set_parent_snapshot_id(s.training.parent_snapshot_id);
  t->set_prior_from_parent(s.training.prior_from_parent);
  s.posterior->ToProto(p.mutable_posterior());
  p.set_created_unix_ms(s.created_unix_ms);

  return EncodeRecordMessage(kSnapshotRecord, p);
}

absl::StatusOr<Snapshot> DecodeSnapshot(absl::string_view bytes) {
  snapshot::Snapshot p;
  BNN_ASSIGN_OR_RETURN(const uint32_t version,
                       DecodeRecordMessage(kSnapshotRecord, bytes, &p));
  if (p.format_version() != version) {
    return absl::DataLossError(
        absl::StrCat("snapshot payload format_version ", p.format_version(),
                     " disagrees with its header (", version, ")"));
  }
  return FromProto(p);
}

absl::Status WriteSnapshotFile(const std::string& path,
                               const Snapshot& snapshot) {
  BNN_ASSIGN_OR_RETURN(const std::string bytes, EncodeSnapshot(snapshot));
  return WriteFileAtomically(path, bytes);
}

absl::StatusOr<Snapshot> ReadSnapshotFile(const std::string& path) {
  BNN_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  absl::StatusOr<Snapshot> snapshot = DecodeSnapshot(bytes);
  if (!snapshot.ok()) return InFile(path, snapshot.status());
  return snapshot;
}

}  // namespace bnn
