#include "server/store/snapshot_meta.h"

#include <string>

// The one server file that sees Eigen: the posterior family is a virtual of
// the Eigen-heavy Posterior class. Reading it here, once per stored
// snapshot, keeps every other server file free of numerical headers.
#include "bnn/posterior/posterior.h"

namespace bnn::server {

store::SnapshotMeta SnapshotMetaOf(const Snapshot& snapshot,
                                   absl::string_view snapshot_id,
                                   int64_t size_bytes) {
  store::SnapshotMeta meta;
  meta.set_snapshot_id(std::string(snapshot_id));
  meta.set_method(snapshot.method);
  meta.mutable_params()->insert(snapshot.params.begin(), snapshot.params.end());
  meta.set_task(std::string(TaskToString(snapshot.task)));
  meta.mutable_class_values()->Add(snapshot.class_values.begin(),
                                   snapshot.class_values.end());
  meta.set_num_features(snapshot.model.input_dim);
  meta.mutable_hidden_sizes()->Add(snapshot.model.hidden_sizes.begin(),
                                   snapshot.model.hidden_sizes.end());
  for (const Activation activation : snapshot.model.activations) {
    meta.add_activations(std::string(ActivationToString(activation)));
  }
  meta.set_num_parameters(snapshot.model.NumParameters());
  meta.set_posterior_family(std::string(snapshot.posterior->family()));
  const TrainingInfo& training = snapshot.training;
  meta.set_dataset_id(training.dataset_id);
  meta.set_dataset_version(training.dataset_version);
  meta.set_dataset_hash(training.dataset_hash);
  meta.set_steps(training.steps);
  meta.set_epochs(training.epochs);
  meta.set_final_loss(training.final_loss);
  meta.set_train_seconds(training.seconds);
  meta.set_seed(training.seed);
  meta.set_parent_snapshot_id(training.parent_snapshot_id);
  meta.set_prior_from_parent(training.prior_from_parent);
  meta.set_created_unix_ms(snapshot.created_unix_ms);
  meta.set_size_bytes(size_bytes);
  meta.set_format_version(snapshot.format_version);
  meta.set_library_version(snapshot.library_version);
  return meta;
}

}  // namespace bnn::server
