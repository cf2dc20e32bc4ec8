// Checkpoints and resuming (issue 12): for every registered method, a run
// stopped between two steps (mid-pass and at a pass boundary), checkpointed,
// encoded, decoded and resumed ends with the snapshot of the same run
// without the stop, bit for bit; corrupt, newer and foreign checkpoints are
// refused with messages that say so.
#include "bnn/train/checkpoint.h"

#include <cmath>
#include <cstring>
#include <omp.h>
#include <set>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/core/checkpoint.pb.h"
#include "bnn/core/snapshot.pb.h"
#include "bnn/io/file.h"
#include "bnn/io/snapshot.h"
#include "bnn/methods/registry.h"
#include "bnn/posterior/posterior.h"
#include "bnn/train/trainer.h"

#include "tests/test_util/test_util.h"

namespace bnn {
namespace {

using ::bnn::testing::Msg;
using ::testing::AllOf;
using ::testing::HasSubstr;

// y = 5 + 2 (sin x_0 + x_1 x_2 / 2 + noise) or its sign as a class.
Dataset Data(bool binary, int n = 30) {
  Dataset d;
  d.num_features = 3;
  Rng rng(7);
  if (binary) {
    d.task = Task::kBinary;
    d.num_classes = 2;
    d.class_values = {0, 1};
  }
  for (int i = 0; i < n; ++i) {
    double x[3];
    for (double& v : x) {
      v = rng.Normal();
      d.features.push_back(v);
    }
    const double s = std::sin(x[0]) + 0.5 * x[1] * x[2] + 0.2 * rng.Normal();
    d.targets.push_back(binary ? (s > 0 ? 1 : 0) : 5 + 2 * s);
  }
  return d;
}

struct MethodCase {
  std::string label;  // unique, a valid test name
  std::string method;
  ParamMap params;
  bool binary = false;
  std::vector<int> hidden;
  int epochs = 3;
};

// Every registered method, small enough that a run takes milliseconds, with
// options that exercise the state a checkpoint must carry: schedules (SLANG
// and VOGN's decay, NNG's lr drop, BALI's beta decay in every run), a learned
// noise, Fisher statistics and factorisations refreshed every few steps,
// HMC's warm-up and kept samples, float32 arithmetic.
std::vector<MethodCase> Cases() {
  // 30 rows in batches of 8: 4 steps per pass, the last of 6 rows.
  const ParamMap b8 = {{"batch_size", "8"}};
  auto with = [&](ParamMap extra) {
    extra.insert(b8.begin(), b8.end());
    return extra;
  };
  return {
      {"slang",
       "slang",
       with({{"rank", "2"}, {"mc_samples", "2"}}),
       false,
       {6}},
      {"slang_decay",
       "slang",
       with({{"rank", "2"}, {"decay", "0.5"}}),
       false,
       {6}},
      {"slang_float32",
       "slang",
       with({{"rank", "2"}, {"precision", "float32"}}),
       false,
       {6}},
      {"slang_exact_eig",
       "slang",
       with({{"rank", "2"}, {"eig_solver", "exact"}}),
       false,
       {6}},
      {"slang_online_eig",
       "slang_online_eig",
       with({{"rank", "2"}}),
       false,
       {6}},
      {"noisy_adam",
       "noisy_adam",
       with({{"noise_model", "gamma"}, {"lr_decay_at", "0.5"}}),
       false,
       {6}},
      {"noisy_kfac",
       "noisy_kfac",
       with({{"inverse_interval", "3"},
             {"stats_interval", "2"},
             {"trust_region", "0.01"}}),
       false,
       {6}},
      {"nng_blktri",
       "nng_blktri",
       with({{"inverse_interval", "3"},
             {"stats_interval", "2"},
             {"extrinsic_damping", "0.1"}}),
       false,
       {6, 5}},
      {"nng_full",
       "nng_full",
       with({{"inverse_interval", "3"}, {"mc_samples", "2"}}),
       false,
       {4}},
      {"bali", "bali", b8, false, {6}},
      {"bali_w", "bali_w", b8, true, {6}},
      {"bali_l", "bali_l", b8, false, {6}},
      {"bbb", "bbb", with({{"mc_samples", "3"}}), false, {6}},
      {"vogn_full",
       "vogn_full",
       with({{"momentum", "0.9"}, {"mc_samples", "2"}}),
       false,
       {4}},
      {"vogn_diag",
       "vogn_diag",
       with({{"decay", "0.3"}, {"mc_samples", "3"}}),
       false,
       {6}},
      {"von_full", "von_full", b8, true, {}},
      {"von_diag", "von_diag", b8, true, {}},
      {"mc_dropout", "mc_dropout", with({{"dropout", "0.2"}}), false, {6}},
      {"map", "map", b8, true, {6}},
      // One step per pass (the whole training set): 12 steps, warm-up 5.
      {"hmc",
       "hmc",
       {{"chains", "2"},
        {"warmup", "5"},
        {"leapfrog_steps", "3"},
        {"max_samples", "4"}},
       false,
       {4},
       12},
      {"exact_full", "exact_full", {}, true, {}, 12},
      {"exact_diag", "exact_diag", {}, true, {}, 12},
  };
}

void PrintTo(const MethodCase& c, std::ostream* os) { *os << c.label; }

TrainingPlan PlanFor(const MethodCase& c, const Dataset& data) {
  TrainRequest r;
  r.method = c.method;
  r.params = c.params;
  r.params["epochs"] = std::to_string(c.epochs);
  r.params["seed"] = "5";
  r.hidden_sizes = c.hidden;
  r.dataset_id = "ds-ckpt";
  auto plan =
      ResolveTrainingPlan(r, ShapeOf(data), nullptr, MethodRegistry::Builtin());
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : TrainingPlan{};
}

// The snapshot's bytes without its times (training seconds, creation).
std::string Timeless(Snapshot s) {
  s.training.seconds = 0;
  s.created_unix_ms = 0;
  absl::StatusOr<std::string> bytes = EncodeSnapshot(s);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

// Bit-for-bit equality of everything but the times, and on a difference the
// first posterior value that differs.
void ExpectSameSnapshot(const Snapshot& expected, const Snapshot& actual,
                        const std::string& what) {
  EXPECT_EQ(actual.training.steps, expected.training.steps) << what;
  EXPECT_EQ(actual.training.epochs, expected.training.epochs) << what;
  EXPECT_EQ(std::memcmp(&actual.training.final_loss,
                        &expected.training.final_loss, sizeof(double)),
            0)
      << what << ": final_loss " << actual.training.final_loss << " vs "
      << expected.training.final_loss;
  EXPECT_EQ(std::memcmp(&actual.noise_precision, &expected.noise_precision,
                        sizeof(double)),
            0)
      << what << ": noise_precision";
  snapshot::Posterior a, e;
  actual.posterior->ToProto(&a);
  expected.posterior->ToProto(&e);
  if (a.SerializeAsString() != e.SerializeAsString()) {
    const Eigen::VectorXd am = actual.posterior->mean(),
                          em = expected.posterior->mean();
    Eigen::Index first = 0;
    while (first < am.size() && first < em.size() && am[first] == em[first]) {
      ++first;
    }
    ADD_FAILURE() << what << ": the posteriors differ (first differing mean "
                  << "entry " << first << " of " << em.size() << ")";
  }
  EXPECT_EQ(Timeless(actual), Timeless(expected)) << what;
}

// Stops training before step `at` + 1 (after `at` steps).
Interrupt StopAfter(int64_t at, int64_t* checks) {
  return Interrupt([at, checks] {
    return (*checks)++ == at ? absl::CancelledError("training cancelled")
                             : absl::OkStatus();
  });
}

class ResumeTest : public ::testing::TestWithParam<MethodCase> {
 protected:
  static void SetUpTestSuite() {
    // One thread: a step's bits then do not depend on the machine.
    Eigen::setNbThreads(1);
    omp_set_num_threads(1);
  }
};

// A run stopped by its interrupt after `stop` steps hands over a checkpoint
// of that point (checkpoint_on_interrupt); its encoded and decoded bytes
// resume to the uninterrupted run's snapshot. The stops: mid-pass and at a
// pass boundary (one step per pass: during and after HMC's warm-up).
TEST_P(ResumeTest, StoppedAndResumedRunIsBitIdentical) {
  const MethodCase& c = GetParam();
  const Dataset data = Data(c.binary);
  const TrainingPlan plan = PlanFor(c, data);
  const MethodRegistry& registry = MethodRegistry::Builtin();
  absl::StatusOr<Snapshot> full = Train(plan, data, nullptr, registry);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(full->training.steps, 12);

  const int64_t per_pass = plan.steps_per_epoch;
  const std::vector<int64_t> stops =
      per_pass > 1 ? std::vector<int64_t>{per_pass + 1, 2 * per_pass}
                   : std::vector<int64_t>{3, 8};
  for (const int64_t stop : stops) {
    SCOPED_TRACE(::testing::Message() << "stopped after " << stop << " steps");
    std::vector<std::string> saved;
    TrainCallbacks callbacks;
    callbacks.checkpoint_on_interrupt = true;
    callbacks.on_checkpoint = [&](const Checkpoint& checkpoint) {
      absl::StatusOr<std::string> bytes = EncodeCheckpoint(checkpoint);
      if (!bytes.ok()) return bytes.status();
      saved.push_back(*std::move(bytes));
      return absl::OkStatus();
    };
    int64_t checks = 0;
    const absl::StatusOr<Snapshot> stopped = Train(
        plan, data, nullptr, registry, callbacks, StopAfter(stop, &checks));
    EXPECT_EQ(stopped.status().code(), absl::StatusCode::kCancelled);
    EXPECT_THAT(Msg(stopped.status()),
                HasSubstr(absl::StrCat("after ", stop, " steps")));
    ASSERT_EQ(saved.size(), 1u);

    absl::StatusOr<Checkpoint> checkpoint = DecodeCheckpoint(saved[0]);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    EXPECT_EQ(checkpoint->trainer.step, stop);
    EXPECT_EQ(checkpoint->trainer.epoch, stop / per_pass);
    EXPECT_EQ(checkpoint->trainer.position,
              (stop % per_pass) * plan.batch_rows);
    absl::StatusOr<Snapshot> resumed =
        Train(plan, data, nullptr, registry, {}, Interrupt(), &*checkpoint);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    ExpectSameSnapshot(*full, *resumed, "resumed");
  }
}

// Periodic checkpoints after every step leave the run's own result
// unchanged, and each one resumes to it; so does a resumed run stopped and
// resumed again.
TEST_P(ResumeTest, EveryStepsCheckpointResumesToTheSameSnapshot) {
  const MethodCase& c = GetParam();
  const Dataset data = Data(c.binary);
  const TrainingPlan plan = PlanFor(c, data);
  const MethodRegistry& registry = MethodRegistry::Builtin();
  absl::StatusOr<Snapshot> full = Train(plan, data, nullptr, registry);
  ASSERT_TRUE(full.ok()) << full.status();

  std::vector<Checkpoint> checkpoints;
  TrainCallbacks callbacks;
  callbacks.checkpoint_every_steps = 1;
  callbacks.on_checkpoint = [&](const Checkpoint& checkpoint) {
    checkpoints.push_back(checkpoint);
    return absl::OkStatus();
  };
  absl::StatusOr<Snapshot> observed =
      Train(plan, data, nullptr, registry, callbacks);
  ASSERT_TRUE(observed.ok()) << observed.status();
  ExpectSameSnapshot(*full, *observed, "checkpointed run");
  // After steps 1..11; never after the last.
  ASSERT_EQ(checkpoints.size(), 11u);
  for (const Checkpoint& checkpoint : checkpoints) {
    const std::string what =
        absl::StrCat("resumed after ", checkpoint.trainer.step, " steps");
    absl::StatusOr<Snapshot> resumed =
        Train(plan, data, nullptr, registry, {}, Interrupt(), &checkpoint);
    ASSERT_TRUE(resumed.ok()) << what << ": " << resumed.status();
    ExpectSameSnapshot(*full, *resumed, what);
  }

  // Resume after 2 steps, stop after 7, resume again.
  std::vector<Checkpoint> second;
  TrainCallbacks on_stop;
  on_stop.checkpoint_on_interrupt = true;
  on_stop.on_checkpoint = [&](const Checkpoint& checkpoint) {
    second.push_back(checkpoint);
    return absl::OkStatus();
  };
  int64_t checks = 0;
  EXPECT_EQ(Train(plan, data, nullptr, registry, on_stop, StopAfter(5, &checks),
                  &checkpoints[1])
                .status()
                .code(),
            absl::StatusCode::kCancelled);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].trainer.step, 7);
  absl::StatusOr<Snapshot> twice =
      Train(plan, data, nullptr, registry, {}, Interrupt(), &second[0]);
  ASSERT_TRUE(twice.ok()) << twice.status();
  ExpectSameSnapshot(*full, *twice, "resumed twice");
}

INSTANTIATE_TEST_SUITE_P(EveryMethod, ResumeTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<MethodCase>& info) {
                           return info.param.label;
                         });

TEST(CheckpointTest, EveryRegisteredMethodIsCovered) {
  std::set<std::string> covered;
  for (const MethodCase& c : Cases()) covered.insert(c.method);
  for (const std::string& name : MethodRegistry::Builtin().Names()) {
    EXPECT_EQ(covered.count(name), 1u) << name << " has no resume test";
  }
}

// A checkpoint of a short SLANG run, and its plan and data.
struct Fixture {
  Dataset data = Data(false);
  TrainingPlan plan;
  Checkpoint checkpoint;
  std::string bytes;
};

Fixture SlangCheckpoint() {
  Fixture f;
  f.plan = PlanFor(Cases()[0], f.data);
  TrainCallbacks callbacks;
  callbacks.checkpoint_every_steps = 5;
  callbacks.on_checkpoint = [&](const Checkpoint& checkpoint) {
    f.checkpoint = checkpoint;
    return absl::CancelledError("enough");
  };
  const absl::StatusOr<Snapshot> s =
      Train(f.plan, f.data, nullptr, MethodRegistry::Builtin(), callbacks);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kCancelled);
  absl::StatusOr<std::string> bytes = EncodeCheckpoint(f.checkpoint);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  f.bytes = *std::move(bytes);
  return f;
}

TEST(CheckpointTest, RoundTripsEveryField) {
  const Fixture f = SlangCheckpoint();
  EXPECT_EQ(f.checkpoint.trainer.step, 5);
  EXPECT_EQ(f.bytes.substr(0, 8), "BNNCKPT1");
  absl::StatusOr<Checkpoint> c = DecodeCheckpoint(f.bytes);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->format_version, kCheckpointFormatVersion);
  EXPECT_EQ(c->library_version, f.checkpoint.library_version);
  EXPECT_TRUE(CheckCheckpointFitsPlan(*c, f.plan).ok());
  EXPECT_EQ(c->plan.params, f.plan.params);
  EXPECT_EQ(c->plan.dataset_id, "ds-ckpt");
  EXPECT_EQ(c->dataset_hash, DatasetHash(f.data));
  EXPECT_EQ(c->trainer.order, f.checkpoint.trainer.order);
  EXPECT_EQ(c->trainer.position, 8);  // one batch into the second pass
  EXPECT_EQ(c->trainer.epoch, 1);
  EXPECT_EQ(c->trainer.epoch_loss, f.checkpoint.trainer.epoch_loss);
  EXPECT_EQ(c->trainer.batch_rng, f.checkpoint.trainer.batch_rng);
  EXPECT_EQ(c->trainer.step_rng, f.checkpoint.trainer.step_rng);
  EXPECT_EQ(c->method_state, f.checkpoint.method_state);
  // Encoding is deterministic.
  EXPECT_EQ(*EncodeCheckpoint(*c), f.bytes);

  checkpoint::MethodState state;
  ASSERT_TRUE(state.ParseFromString(c->method_state));
  EXPECT_EQ(state.method(), "slang");
  EXPECT_EQ(state.version(), 1u);
  EXPECT_TRUE(state.posterior().has_low_rank());  // the snapshot's encoding
}

TEST(CheckpointTest, FilesRoundTrip) {
  const Fixture f = SlangCheckpoint();
  bnn::testing::ScopedTempDir dir;
  const std::string path = dir.File("job.ckpt");
  EXPECT_EQ(ReadCheckpointFile(path).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(WriteCheckpointFile(path, f.checkpoint).ok());
  absl::StatusOr<Checkpoint> c = ReadCheckpointFile(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*EncodeCheckpoint(*c), f.bytes);
}

TEST(CheckpointTest, CorruptionAndTruncationAreDataLoss) {
  const Fixture f = SlangCheckpoint();
  // A flipped byte in the payload (the middle of the file).
  std::string flipped = f.bytes;
  flipped[flipped.size() / 2] ^= 0x40;
  absl::Status s = DecodeCheckpoint(flipped).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("checkpoint"), HasSubstr("corrupt")));

  for (const size_t size : {size_t{0}, size_t{5}, size_t{19},
                            f.bytes.size() / 2, f.bytes.size() - 1}) {
    s = DecodeCheckpoint(f.bytes.substr(0, size)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << size;
    EXPECT_THAT(Msg(s), HasSubstr("checkpoint")) << size;
    if (size >= 8) {
      EXPECT_THAT(Msg(s), HasSubstr("truncated")) << size;
    }
  }
  // Another kind of record.
  s = DecodeCheckpoint("BNNSNAP1" + f.bytes.substr(8)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(s), HasSubstr("not a bnn-serve checkpoint"));

  // A method state that does not parse (behind a valid frame).
  Checkpoint bad = f.checkpoint;
  bad.method_state = "\xff\xff\xff";
  s = Train(f.plan, f.data, nullptr, MethodRegistry::Builtin(), {}, Interrupt(),
            &bad)
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(s), HasSubstr("checkpoint is corrupt"));
}

TEST(CheckpointTest, NewerFormatsAreRefused) {
  const Fixture f = SlangCheckpoint();
  // The frame's version (bytes 8-11, little-endian; the CRC covers the
  // payload only).
  std::string newer = f.bytes;
  newer[8] = static_cast<char>(kCheckpointFormatVersion + 1);
  absl::Status s = DecodeCheckpoint(newer).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("checkpoint format version 2"),
                            HasSubstr("newer")));

  // A method state of a newer layout.
  checkpoint::MethodState state;
  ASSERT_TRUE(state.ParseFromString(f.checkpoint.method_state));
  state.set_version(state.version() + 1);
  Checkpoint later = f.checkpoint;
  later.method_state = state.SerializeAsString();
  s = Train(f.plan, f.data, nullptr, MethodRegistry::Builtin(), {}, Interrupt(),
            &later)
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("slang"), HasSubstr("layout version 2"),
                            HasSubstr("newer")));
}

TEST(CheckpointTest, OtherPlansAndDataAreRefused) {
  const Fixture f = SlangCheckpoint();
  const MethodRegistry& registry = MethodRegistry::Builtin();
  auto resume = [&](const TrainingPlan& plan, const Dataset& data) {
    return Train(plan, data, nullptr, registry, {}, Interrupt(), &f.checkpoint)
        .status();
  };
  TrainingPlan seed = f.plan;
  seed.options.seed = 6;
  absl::Status s = resume(seed, f.data);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("the checkpoint is of another plan"),
                            HasSubstr("seed is 5, the plan's 6")));

  TrainingPlan rank = f.plan;
  rank.params["rank"] = "3";
  EXPECT_THAT(Msg(resume(rank, f.data)),
              HasSubstr("parameter 'rank' is '2', the plan's '3'"));

  MethodCase other;
  for (const MethodCase& c : Cases()) {
    if (c.method == "bbb") other = c;
  }
  ASSERT_EQ(other.method, "bbb");
  EXPECT_THAT(Msg(resume(PlanFor(other, f.data), f.data)),
              HasSubstr("method is 'slang', the plan's 'bbb'"));

  TrainingPlan wider = f.plan;
  wider.model.hidden_sizes = {7};
  EXPECT_THAT(Msg(resume(wider, f.data)), HasSubstr("its model is"));

  // Same shape, other rows.
  Dataset changed = f.data;
  changed.targets[3] += 1;
  s = resume(f.plan, changed);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("another training set"));

  // A method state of another method under the right plan.
  Checkpoint swapped = f.checkpoint;
  checkpoint::MethodState state;
  ASSERT_TRUE(state.ParseFromString(swapped.method_state));
  state.set_method("bbb");
  swapped.method_state = state.SerializeAsString();
  s = Train(f.plan, f.data, nullptr, registry, {}, Interrupt(), &swapped)
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("state of method 'bbb', not of 'slang'"));

  // A method state whose arrays do not fit the model.
  ASSERT_TRUE(state.ParseFromString(f.checkpoint.method_state));
  for (checkpoint::Array& array : *state.mutable_arrays()) {
    if (array.name() == "momentum") array.mutable_f64()->RemoveLast();
  }
  swapped.method_state = state.SerializeAsString();
  s = Train(f.plan, f.data, nullptr, registry, {}, Interrupt(), &swapped)
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("checkpoint state of slang"),
                            HasSubstr("'momentum'")));
}

TEST(CheckpointTest, TrainerStatesThatDoNotFitAreRefused) {
  const Fixture f = SlangCheckpoint();
  Checkpoint c = f.checkpoint;
  c.trainer.order[0] = c.trainer.order[1];
  absl::StatusOr<std::string> bytes = EncodeCheckpoint(c);
  ASSERT_TRUE(bytes.ok());
  absl::Status s = DecodeCheckpoint(*bytes).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("not a permutation"));
  EXPECT_FALSE(CheckCheckpointFitsPlan(c, f.plan).ok());

  c = f.checkpoint;
  c.trainer.step = f.plan.total_steps + 1;
  EXPECT_THAT(Msg(CheckCheckpointFitsPlan(c, f.plan)), HasSubstr("step 13"));

  c = f.checkpoint;
  c.trainer.step_rng = "not a generator";
  s = Train(f.plan, f.data, nullptr, MethodRegistry::Builtin(), {}, Interrupt(),
            &c)
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("random generator state"));
}

TEST(CheckpointTest, CallbacksAreValidatedAndTheirErrorsEndTraining) {
  const Dataset data = Data(false);
  const TrainingPlan plan = PlanFor(Cases()[0], data);
  TrainCallbacks callbacks;
  callbacks.checkpoint_every_steps = 2;  // without on_checkpoint
  EXPECT_EQ(Train(plan, data, nullptr, MethodRegistry::Builtin(), callbacks)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);

  // On an interrupt, a failed checkpoint says both.
  callbacks = {};
  callbacks.checkpoint_on_interrupt = true;
  callbacks.on_checkpoint = [](const Checkpoint&) {
    return absl::UnavailableError("disk full");
  };
  int64_t checks = 0;
  const absl::Status s = Train(plan, data, nullptr, MethodRegistry::Builtin(),
                               callbacks, StopAfter(3, &checks))
                             .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("cancelled after 3 steps"),
                            HasSubstr("checkpoint failed: disk full")));
}

TEST(CheckpointTest, IntervalCheckpointsFollowTrainingTime) {
  const Dataset data = Data(false);
  const TrainingPlan plan = PlanFor(Cases()[0], data);
  std::vector<int64_t> steps;
  TrainCallbacks callbacks;
  callbacks.checkpoint_interval = absl::Nanoseconds(1);  // after every step
  callbacks.on_checkpoint = [&](const Checkpoint& c) {
    steps.push_back(c.trainer.step);
    return absl::OkStatus();
  };
  ASSERT_TRUE(
      Train(plan, data, nullptr, MethodRegistry::Builtin(), callbacks).ok());
  EXPECT_EQ(steps.size(), 11u);

  steps.clear();
  callbacks.checkpoint_interval = absl::Hours(1);
  ASSERT_TRUE(
      Train(plan, data, nullptr, MethodRegistry::Builtin(), callbacks).ok());
  EXPECT_TRUE(steps.empty());
}

// A warm start's prior (SLANG's mu_0, U_0 and diagonal; a full Gaussian's
// dense precision) is part of the state, and the resumed run is the same.
TEST(CheckpointTest, WarmStartedRunsResume) {
  Eigen::setNbThreads(1);
  const Dataset data = Data(false);
  const MethodRegistry& registry = MethodRegistry::Builtin();
  for (const char* method : {"slang", "vogn_full"}) {
    SCOPED_TRACE(method);
    TrainRequest first;
    first.method = method;
    first.params = {{"batch_size", "8"}, {"epochs", "2"}, {"seed", "3"}};
    if (std::string(method) == "slang") first.params["rank"] = "2";
    first.hidden_sizes = {4};
    absl::StatusOr<Snapshot> parent = Train(first, data, registry);
    ASSERT_TRUE(parent.ok()) << parent.status();

    TrainRequest second = first;
    second.hidden_sizes = {};
    second.params["seed"] = "4";
    second.parent = std::make_shared<const Snapshot>(*parent);
    second.parent_snapshot_id = "parent";
    second.prior_from_parent = true;
    const ParentModel parent_model = ParentModelOf(*parent, "parent");
    absl::StatusOr<TrainingPlan> plan =
        ResolveTrainingPlan(second, ShapeOf(data), &parent_model, registry);
    ASSERT_TRUE(plan.ok()) << plan.status();
    absl::StatusOr<Snapshot> full = Train(*plan, data, &*parent, registry);
    ASSERT_TRUE(full.ok()) << full.status();

    Checkpoint saved;
    TrainCallbacks callbacks;
    callbacks.checkpoint_on_interrupt = true;
    callbacks.on_checkpoint = [&](const Checkpoint& c) {
      saved = c;
      return absl::OkStatus();
    };
    int64_t checks = 0;
    ASSERT_EQ(
        Train(*plan, data, &*parent, registry, callbacks, StopAfter(5, &checks))
            .status()
            .code(),
        absl::StatusCode::kCancelled);
    absl::StatusOr<Checkpoint> decoded =
        DecodeCheckpoint(*EncodeCheckpoint(saved));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_TRUE(decoded->plan.warm_start);
    absl::StatusOr<Snapshot> resumed =
        Train(*plan, data, &*parent, registry, {}, Interrupt(), &*decoded);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    ExpectSameSnapshot(*full, *resumed, method);
  }
}

}  // namespace
}  // namespace bnn
