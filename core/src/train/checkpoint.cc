#include "bnn/train/checkpoint.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "bnn/core/checkpoint.pb.h"
#include "bnn/io/file.h"
#include "bnn/io/record.h"
#include "bnn/status.h"

#include "io/snapshot_proto.h"

namespace bnn {
namespace {

// The checkpoint's record frame (bnn/io/record.h).
constexpr RecordFormat kCheckpointRecord{"BNNCKPT1", kCheckpointFormatVersion,
                                         "checkpoint"};

void PlanToProto(const TrainingPlan& plan, checkpoint::Plan* p) {
  p->set_method(plan.method);
  for (const auto& [k, v] : plan.params) (*p->mutable_params())[k] = v;
  p->set_epochs_requested(plan.options.epochs);
  p->set_steps_requested(plan.options.steps);
  p->set_seed(plan.options.seed);
  p->set_standardize(plan.options.standardize);
  internal::ModelSpecToProto(plan.model, p->mutable_model());
  p->set_task(std::string(TaskToString(plan.data.task)));
  p->set_num_rows(plan.data.num_rows);
  p->set_num_features(plan.data.num_features);
  p->set_num_classes(plan.data.num_classes);
  for (double v : plan.data.class_values) p->add_class_values(v);
  p->set_dataset_id(plan.dataset_id);
  p->set_dataset_version(plan.dataset_version);
  p->set_warm_start(plan.warm_start);
  p->set_parent_snapshot_id(plan.parent_snapshot_id);
  p->set_prior_from_parent(plan.prior_from_parent);
  p->set_batch_rows(plan.batch_rows);
  p->set_steps_per_epoch(plan.steps_per_epoch);
  p->set_total_steps(plan.total_steps);
  p->set_epochs(plan.epochs);
}

absl::StatusOr<TrainingPlan> PlanFromProto(const checkpoint::Plan& p) {
  TrainingPlan plan;
  plan.method = p.method();
  for (const auto& [k, v] : p.params()) plan.params[k] = v;
  plan.options.epochs = p.epochs_requested();
  plan.options.steps = p.steps_requested();
  plan.options.seed = p.seed();
  plan.options.standardize = p.standardize();
  BNN_ASSIGN_OR_RETURN(plan.model, internal::ModelSpecFromProto(p.model()));
  BNN_ASSIGN_OR_RETURN(plan.data.task, StringToTask(p.task()));
  plan.data.num_rows = p.num_rows();
  plan.data.num_features = p.num_features();
  plan.data.num_classes = p.num_classes();
  plan.data.class_values.assign(p.class_values().begin(),
                                p.class_values().end());
  plan.dataset_id = p.dataset_id();
  plan.dataset_version = p.dataset_version();
  plan.warm_start = p.warm_start();
  plan.parent_snapshot_id = p.parent_snapshot_id();
  plan.prior_from_parent = p.prior_from_parent();
  plan.batch_rows = p.batch_rows();
  plan.steps_per_epoch = p.steps_per_epoch();
  plan.total_steps = p.total_steps();
  plan.epochs = p.epochs();
  if (plan.data.num_rows < 1 || plan.batch_rows < 1 ||
      plan.steps_per_epoch < 1 || plan.total_steps < 1 || plan.epochs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint plan is not a valid run: ", plan.data.num_rows,
                     " rows, ", plan.batch_rows, " per batch, ",
                     plan.steps_per_epoch, " steps per pass, ",
                     plan.total_steps, " steps, ", plan.epochs, " passes"));
  }
  return plan;
}

// The trainer's state against the plan it claims to belong to.
absl::Status CheckTrainerState(const TrainerState& t,
                               const TrainingPlan& plan) {
  auto bad = [](auto&&... what) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint trainer state: ", what...));
  };
  const int64_t n = plan.data.num_rows;
  if (t.step < 0 || t.step > plan.total_steps) {
    return bad("step ", t.step, " is outside [0, ", plan.total_steps, "]");
  }
  if (t.epoch < 0 || t.epoch > plan.epochs) {
    return bad("epoch ", t.epoch, " is outside [0, ", plan.epochs, "]");
  }
  if (t.position < 0 || t.position >= n) {
    return bad("position ", t.position, " is outside [0, ", n, ")");
  }
  if (t.epoch_rows < 0 || t.epoch_rows > n) {
    return bad("epoch_rows ", t.epoch_rows, " is outside [0, ", n, "]");
  }
  if (static_cast<int64_t>(t.order.size()) != n) {
    return bad("the minibatch order has ", t.order.size(),
               " rows; the plan's training set has ", n);
  }
  std::vector<bool> seen(n, false);
  for (int64_t row : t.order) {
    if (row < 0 || row >= n || seen[row]) {
      return bad("the minibatch order is not a permutation of the ", n,
                 " rows");
    }
    seen[row] = true;
  }
  if (!(t.seconds >= 0) || !std::isfinite(t.seconds)) {
    return bad("seconds = ", t.seconds, " is not a duration");
  }
  if (t.batch_rng.empty() || t.step_rng.empty()) {
    return bad("a random generator's state is missing");
  }
  return absl::OkStatus();
}

std::string ModelString(const ModelSpec& m) {
  std::vector<std::string> layers;
  for (size_t i = 0; i < m.hidden_sizes.size(); ++i) {
    layers.push_back(absl::StrCat(
        m.hidden_sizes[i], " ",
        i < m.activations.size() ? ActivationToString(m.activations[i]) : "?"));
  }
  return absl::StrCat(m.input_dim, " inputs, hidden [",
                      absl::StrJoin(layers, ", "), "], ", m.output_dim, " ",
                      LikelihoodToString(m.likelihood), " outputs");
}

}  // namespace

absl::StatusOr<std::string> EncodeCheckpoint(const Checkpoint& c) {
  checkpoint::Checkpoint p;
  p.set_format_version(kCheckpointFormatVersion);
  p.set_library_version(c.library_version);
  PlanToProto(c.plan, p.mutable_plan());
  p.set_dataset_hash(c.dataset_hash);
  checkpoint::TrainerState* t = p.mutable_trainer();
  t->set_step(c.trainer.step);
  t->set_epoch(c.trainer.epoch);
  t->mutable_order()->Add(c.trainer.order.begin(), c.trainer.order.end());
  t->set_position(c.trainer.position);
  t->set_epoch_loss(c.trainer.epoch_loss);
  t->set_epoch_rows(c.trainer.epoch_rows);
  t->set_batch_rng(c.trainer.batch_rng);
  t->set_step_rng(c.trainer.step_rng);
  t->set_seconds(c.trainer.seconds);
  p.set_method_state(c.method_state);
  p.set_created_unix_ms(c.created_unix_ms);
  return EncodeRecordMessage(kCheckpointRecord, p);
}

absl::StatusOr<Checkpoint> DecodeCheckpoint(absl::string_view bytes) {
  checkpoint::Checkpoint p;
  BNN_ASSIGN_OR_RETURN(const uint32_t version,
                       DecodeRecordMessage(kCheckpointRecord, bytes, &p));
  if (p.format_version() != version) {
    return absl::DataLossError(
        absl::StrCat("checkpoint payload format_version ", p.format_version(),
                     " disagrees with its header (", version, ")"));
  }
  Checkpoint c;
  c.format_version = p.format_version();
  c.library_version = p.library_version();
  absl::StatusOr<TrainingPlan> plan = PlanFromProto(p.plan());
  if (!plan.ok()) {
    return absl::Status(
        plan.status().code(),
        absl::StrCat("checkpoint plan: ", plan.status().message()));
  }
  c.plan = *std::move(plan);
  c.dataset_hash = p.dataset_hash();
  const checkpoint::TrainerState& t = p.trainer();
  c.trainer.step = t.step();
  c.trainer.epoch = t.epoch();
  c.trainer.order.assign(t.order().begin(), t.order().end());
  c.trainer.position = t.position();
  c.trainer.epoch_loss = t.epoch_loss();
  c.trainer.epoch_rows = t.epoch_rows();
  c.trainer.batch_rng = t.batch_rng();
  c.trainer.step_rng = t.step_rng();
  c.trainer.seconds = t.seconds();
  BNN_RETURN_IF_ERROR(CheckTrainerState(c.trainer, c.plan));
  c.method_state = p.method_state();
  c.created_unix_ms = p.created_unix_ms();
  return c;
}

absl::Status WriteCheckpointFile(const std::string& path,
                                 const Checkpoint& checkpoint) {
  BNN_ASSIGN_OR_RETURN(const std::string bytes, EncodeCheckpoint(checkpoint));
  return WriteFileAtomically(path, bytes);
}

absl::StatusOr<Checkpoint> ReadCheckpointFile(const std::string& path) {
  BNN_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  absl::StatusOr<Checkpoint> checkpoint = DecodeCheckpoint(bytes);
  if (!checkpoint.ok()) return InFile(path, checkpoint.status());
  return checkpoint;
}

absl::Status CheckCheckpointFitsPlan(const Checkpoint& checkpoint,
                                     const TrainingPlan& plan) {
  const TrainingPlan& c = checkpoint.plan;
  auto differs = [](absl::string_view field, const auto& theirs,
                    const auto& ours) {
    return absl::InvalidArgumentError(
        absl::StrCat("the checkpoint is of another plan: its ", field, " is ",
                     theirs, ", the plan's ", ours));
  };
  auto quoted = [](absl::string_view s) { return absl::StrCat("'", s, "'"); };
  if (c.method != plan.method) {
    return differs("method", quoted(c.method), quoted(plan.method));
  }
  if (c.params != plan.params) {
    // The first key (in order) whose value differs or is set on one side.
    auto value = [&](const ParamMap& m, const std::string& key) {
      auto it = m.find(key);
      return it == m.end() ? std::string("unset") : quoted(it->second);
    };
    std::vector<std::string> keys;
    for (const auto& [k, v] : c.params) keys.push_back(k);
    for (const auto& [k, v] : plan.params) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    for (const std::string& k : keys) {
      if (value(c.params, k) != value(plan.params, k)) {
        return differs(absl::StrCat("parameter '", k, "'"), value(c.params, k),
                       value(plan.params, k));
      }
    }
  }
  if (c.options.seed != plan.options.seed) {
    return differs("seed", c.options.seed, plan.options.seed);
  }
  if (c.options.epochs != plan.options.epochs ||
      c.options.steps != plan.options.steps || c.epochs != plan.epochs ||
      c.total_steps != plan.total_steps) {
    return differs(
        "length",
        absl::StrCat(c.total_steps, " steps in ", c.epochs, " passes"),
        absl::StrCat(plan.total_steps, " steps in ", plan.epochs, " passes"));
  }
  if (c.options.standardize != plan.options.standardize) {
    auto yes_no = [](bool b) { return b ? "true" : "false"; };
    return differs("standardize", yes_no(c.options.standardize),
                   yes_no(plan.options.standardize));
  }
  const ModelSpec& a = c.model;
  const ModelSpec& b = plan.model;
  if (a.input_dim != b.input_dim || a.hidden_sizes != b.hidden_sizes ||
      a.activations != b.activations || a.output_dim != b.output_dim ||
      a.likelihood != b.likelihood) {
    return differs("model", ModelString(a), ModelString(b));
  }
  if (c.data.task != plan.data.task || c.data.num_rows != plan.data.num_rows ||
      c.data.num_features != plan.data.num_features ||
      c.data.num_classes != plan.data.num_classes ||
      c.data.class_values != plan.data.class_values) {
    auto shape = [](const DatasetShape& d) {
      return absl::StrCat(TaskToString(d.task), " data of ", d.num_rows,
                          " rows x ", d.num_features, " features, classes [",
                          absl::StrJoin(d.class_values, ", "), "]");
    };
    return differs("training set", shape(c.data), shape(plan.data));
  }
  if (c.dataset_id != plan.dataset_id ||
      c.dataset_version != plan.dataset_version) {
    return differs(
        "dataset",
        absl::StrCat(quoted(c.dataset_id), " version ", c.dataset_version),
        absl::StrCat(quoted(plan.dataset_id), " version ",
                     plan.dataset_version));
  }
  if (c.warm_start != plan.warm_start ||
      c.parent_snapshot_id != plan.parent_snapshot_id ||
      c.prior_from_parent != plan.prior_from_parent) {
    auto start = [&](const TrainingPlan& p) {
      return p.warm_start
                 ? absl::StrCat("a warm start from ",
                                quoted(p.parent_snapshot_id),
                                p.prior_from_parent ? " as the prior" : "")
                 : std::string("a fresh start");
    };
    return differs("start", start(c), start(plan));
  }
  if (c.batch_rows != plan.batch_rows ||
      c.steps_per_epoch != plan.steps_per_epoch) {
    return differs(
        "minibatching",
        absl::StrCat(c.batch_rows, " rows x ", c.steps_per_epoch, " steps"),
        absl::StrCat(plan.batch_rows, " rows x ", plan.steps_per_epoch,
                     " steps"));
  }
  return CheckTrainerState(checkpoint.trainer, plan);
}

}  // namespace bnn
