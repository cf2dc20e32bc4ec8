// bnn_crash_test: kills the real bnn-server with SIGKILL at random moments
// during uploads, appends, snapshot imports, training jobs (a third of them
// publishing their snapshot as a model version) and runs of model publishes
// and alias moves, restarts it on the same data directory and checks the
// store (StoreModel::Verify, ModelTracker::Verify), for --cycles cycles. Exits
// 1 if any guarantee was broken, listing each.
//
// Each cycle runs a primary operation, often with one or two others beside
// it, and kills the server after a delay drawn from a seeded RNG: half the
// time uniform over the primary's expected duration (learnt from the
// operations that completed), half the time near its end, where the commit
// happens (for training, near the end of one of its queued jobs).
//
//   bnn_crash_test --cycles 200 --seed 1 --json_out crash.json
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <absl/strings/strip.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <nlohmann/json.hpp>

#include "bnn/data/dataset_hash.h"

#include "bench/common/provenance.h"
#include "bench/faults/model_tracker.h"
#include "bench/faults/store_model.h"
#include "bench/faults/workload.h"
#include "client/bnn_client.h"
#include "tests/test_util/subprocess.h"

ABSL_FLAG(int, cycles, 200, "kill/restart cycles");
ABSL_FLAG(uint64_t, seed, 1,
          "seed of every random choice (operations, sizes, "
          "kill moments)");
ABSL_FLAG(std::string, server, BNN_SERVER_PATH, "the bnn-server binary");
ABSL_FLAG(std::string, work_dir, "",
          "directory for the server's data (DIR/data, which must not exist "
          "or be empty) and log (DIR/server.log); default: a new directory "
          "under $TMPDIR, deleted after a run without violations");
ABSL_FLAG(std::string, json_out, "", "write the run's record (JSON) here");
ABSL_FLAG(int64_t, max_upload_rows, 100000,
          "largest upload, rows (sizes are log-uniform from 1)");
ABSL_FLAG(int64_t, max_append_rows, 20000,
          "largest append, rows (log-uniform from 1)");
ABSL_FLAG(bool, large_models, true,
          "also train and import a 256x256 model (snapshots of a few MB)");
ABSL_FLAG(double, job_timeout, 120,
          "seconds a restarted server may take to finish every job");

namespace bnn::faults {
namespace {

using ::bnn::client::BnnClient;
using ::bnn::testing::ServerProcess;
using Json = nlohmann::json;

constexpr int kMaxConcurrentJobs = 1;
// Probability that a cycle runs other operations beside its primary one.
constexpr double kExtraOpsProbability = 0.5;
// Probability that the kill aims at the end of the primary operation.
constexpr double kAimAtEndProbability = 0.5;
constexpr absl::Duration kJobPoll = absl::Milliseconds(20);
constexpr absl::Duration kRpcTimeout = absl::Seconds(120);
constexpr absl::Duration kStartupTimeout = absl::Seconds(60);
// Probability that a training job publishes its snapshot as the next
// version of ModelTracker::kJobModel when it succeeds.
constexpr double kPublishingJobProbability = 1.0 / 3;
// The models model operations publish to, and the most calls of one.
constexpr int kNumModels = 3;
constexpr int kMaxModelCalls = 8;

// The server's flags besides --listen, --data-dir and --metrics-listen: one
// thread per computation and one job at a time, on a shared machine.
std::vector<std::string> ServerFlags() {
  return {"--threads",
          "1",
          "--compute-workers",
          "1",
          "--max-concurrent-jobs",
          absl::StrCat(kMaxConcurrentJobs)};
}

// A SLANG model the test trains (on version 1 of one of its two training
// datasets) and whose snapshots it imports.
struct TrainConfig {
  const char* name;
  std::vector<int> hidden;
  int rank;
  int epochs;
};
const std::vector<TrainConfig>& TrainConfigs() {
  static const auto* configs = new std::vector<TrainConfig>{
      {"tiny", {8}, 1, 20},
      {"medium", {64, 64}, 4, 4},
      {"large", {256, 256}, 8, 1},
  };
  return *configs;
}

// The expected duration of an operation from its size: a fixed overhead
// plus seconds per unit (values sent, bytes), the rate an exponential moving
// average over the operations that completed and took long enough for
// their size, not the overhead, to dominate.
class DurationModel {
 public:
  double Predict(double units) const {
    return kOverheadSeconds + units * seconds_per_unit_;
  }
  void Observe(double units, double seconds) {
    if (units <= 0 || seconds < 4 * kOverheadSeconds) return;
    const double rate = std::max(seconds - kOverheadSeconds, 0.0) / units;
    seconds_per_unit_ = seen_ ? 0.7 * seconds_per_unit_ + 0.3 * rate : rate;
    seen_ = true;
  }

 private:
  static constexpr double kOverheadSeconds = 0.005;
  double seconds_per_unit_ = 1e-7;
  bool seen_ = false;
};

// One training job of a train operation.
struct JobPlan {
  v1::StartTrainingRequest request;
  int config = 0;
  int dataset = 0;  // index into the training datasets
};

// One operation of a cycle. The planning fields are set before its thread
// starts; the results under the cycle's mutex while it runs, read after it
// joined.
struct Op {
  OpKind kind = OpKind::kUpload;
  bool primary = false;
  double expected_seconds = 0;
  double units = 0;  // DurationModel units: values sent or bytes

  // kUpload and kAppend.
  std::string name;  // upload: the dataset's unique name
  Rows rows;
  Schema schema;
  DatasetHasher hasher{Task::kRegression, 1};  // after the rows
  std::string dataset_id;                      // append
  int64_t version = 0;                         // append: the one it creates
  // kImport.
  const ImportSource* source = nullptr;
  // kTrain: jobs submitted one after another, then polled to the end;
  // job_end_seconds[i] is when job i is expected to end.
  std::vector<JobPlan> jobs;
  std::vector<double> job_end_seconds;
  // kModel: calls on one model, made one after another.
  std::string model_name;
  std::vector<ModelCall> calls;

  // Results.
  bool returned = false;
  bool in_flight_at_kill = false;
  absl::Status status;
  absl::Duration duration;
  v1::DatasetInfo dataset_info;
  v1::SnapshotInfo snapshot_info;
  std::vector<std::string> job_ids;  // acknowledged, in order
  std::vector<v1::Job> job_seen;     // the last GetJob of each
  bool submit_failed = false;        // StartTraining of jobs[job_ids.size()]
  // kModel: the version each call that returned OK answered with (a
  // publish's new version, a SetAlias's version); the next call failed.
  std::vector<int64_t> call_versions;
};

struct KindStats {
  int64_t primary_cycles = 0;
  int64_t ops = 0;
  int64_t in_flight_at_kill = 0;
  int64_t primary_in_flight_at_kill = 0;
  // Acknowledged: operations whose RPC returned OK (for kTrain, jobs whose
  // StartTraining did), of which some returned while the kill was sent.
  int64_t acknowledged = 0;
  int64_t in_flight_acknowledged = 0;
  int64_t refused = 0;
  int64_t jobs_submitted = 0;  // kTrain
  std::vector<double> completed_seconds;
};

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

Json Summary(const std::vector<double>& values) {
  if (values.empty()) return Json::object();
  double sum = 0;
  for (double v : values) sum += v;
  return {{"mean", sum / values.size()},
          {"median", Median(values)},
          {"max", *std::max_element(values.begin(), values.end())}};
}

std::string CommandOutput(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[256];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  pclose(pipe);
  return std::string(absl::StripAsciiWhitespace(out));
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

class CrashTest {
 public:
  CrashTest(std::string work_dir, uint64_t seed)
      : work_dir_(std::move(work_dir)),
        data_dir_(work_dir_ + "/data"),
        log_path_(work_dir_ + "/server.log"),
        rng_(seed),
        model_(data_dir_, kMaxConcurrentJobs) {}

  // Starts the server and creates what the cycles build on; false (after
  // printing why) if that fails.
  bool Setup();
  void RunCycle(int cycle);
  // Stops the server cleanly.
  void Finish();

  bool restart_failed() const { return restart_failed_; }
  const StoreModel& model() const { return model_; }
  Json ToJson() const;

 private:
  bool StartServer(int cycle);
  double Uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng_);
  }
  int64_t LogUniform(int64_t lo, int64_t hi) {
    return static_cast<int64_t>(
        std::exp(Uniform(std::log(static_cast<double>(lo)),
                         std::log(static_cast<double>(hi) + 1.0))));
  }

  std::unique_ptr<Op> UploadOp(std::string name, Rows rows,
                               bool classification);
  std::unique_ptr<Op> PlanUpload(int cycle, int index);
  std::unique_ptr<Op> PlanAppend(const std::vector<std::string>& taken);
  std::unique_ptr<Op> PlanImport();
  std::unique_ptr<Op> PlanTrain();
  std::unique_ptr<Op> PlanModel(const std::vector<std::string>& taken);
  JobPlan PlanJob(int config, int dataset);
  double KillDelay(const Op& primary);

  void Run(Op& op, BnnClient& client);
  void RunTrain(Op& op, BnnClient& client);
  void RunModel(Op& op, BnnClient& client);
  // Acknowledges or records as pending what `op` did.
  void Apply(int cycle, Op& op);

  const std::string work_dir_;
  const std::string data_dir_;
  const std::string log_path_;
  std::mt19937_64 rng_;
  StoreModel model_;
  ModelTracker models_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<BnnClient> client_;
  bool restart_failed_ = false;

  absl::Mutex mu_;  // guards the results of the running cycle's ops

  // Built by Setup.
  std::vector<std::string> train_datasets_;
  std::vector<int> train_configs_;  // indices into TrainConfigs()
  std::vector<ImportSource> sources_;
  std::map<std::pair<int, int>, double> train_seconds_;  // (config, dataset)
  DurationModel upload_model_, append_model_, import_model_, model_ops_model_;
  uint64_t next_job_seed_ = 1000;
  int64_t next_row_seed_ = 1;

  // Statistics.
  double setup_seconds_ = 0;
  KindStats stats_[kNumOpKinds];
  Outcomes outcomes_;
  int64_t kills_mid_operation_ = 0;
  std::vector<double> restart_seconds_;
  std::vector<double> verify_seconds_;
  std::vector<Json> cycles_;
};

bool CrashTest::StartServer(int cycle) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start(absl::GetFlag(FLAGS_server), data_dir_, log_path_,
                           ServerFlags(), kStartupTimeout);
  if (!server.ok()) {
    model_.AddViolation(
        cycle, "restart",
        absl::StrCat("bnn-server did not start: ", server.status().ToString()));
    restart_failed_ = true;
    return false;
  }
  if (cycle > 0) {
    restart_seconds_.push_back(absl::ToDoubleSeconds(absl::Now() - start));
  }
  server_ = *std::move(server);
  BnnClient::Options options;
  options.target = server_->address();
  options.rpc_timeout = kRpcTimeout;
  absl::StatusOr<std::unique_ptr<BnnClient>> client =
      BnnClient::Create(options);
  if (!client.ok()) {
    std::cerr << "client: " << client.status() << "\n";
    restart_failed_ = true;
    return false;
  }
  client_ = *std::move(client);
  return true;
}

bool CrashTest::Setup() {
  const absl::Time start = absl::Now();
  if (!StartServer(0)) {
    std::cerr << model_.violations().back().detail << "\n";
    return false;
  }
  BnnClient& client = *client_;
  // The training datasets: regression and three classes.
  const std::vector<std::pair<Rows, bool>> train_rows = {
      {MakeRows(next_row_seed_++, 400, 2, {}), false},
      {MakeRows(next_row_seed_++, 300, 3, {-1.0, 2.0, 5.0}), true}};
  for (size_t i = 0; i < train_rows.size(); ++i) {
    const auto& [rows, classification] = train_rows[i];
    const Schema schema = SchemaOf(rows, classification);
    v1::DatasetHeader header;
    header.set_name(absl::StrCat("train-", i));
    header.set_task(classification ? v1::TASK_CLASSIFICATION
                                   : v1::TASK_REGRESSION);
    header.set_num_features(static_cast<int>(rows.num_features));
    absl::StatusOr<v1::DatasetInfo> info =
        client.UploadDataset(header, rows.features, rows.labels);
    if (!info.ok()) {
      std::cerr << "setup upload: " << info.status() << "\n";
      return false;
    }
    DatasetHasher hasher(schema.task, schema.num_features);
    HashRows(schema, rows, &hasher);
    model_.AckUpload(0, header.name(), schema, hasher, *info);
    train_datasets_.push_back(info->dataset_id());
  }

  // Calibration of the stream rates: an upload and an append.
  {
    std::unique_ptr<Op> upload =
        UploadOp("calibration", MakeRows(next_row_seed_++, 20000, 3, {}),
                 /*classification=*/false);
    Run(*upload, client);
    if (!upload->status.ok()) {
      std::cerr << "setup upload: " << upload->status << "\n";
      return false;
    }
    Apply(0, *upload);
    upload_model_.Observe(upload->units,
                          absl::ToDoubleSeconds(upload->duration));
    std::unique_ptr<Op> append = PlanAppend({});
    Run(*append, client);
    if (!append->status.ok()) {
      std::cerr << "setup append: " << append->status << "\n";
      return false;
    }
    Apply(0, *append);
    append_model_.Observe(append->units,
                          absl::ToDoubleSeconds(append->duration));
  }

  // One job per model and training dataset, timed; their snapshots are the
  // files the cycles import.
  for (int c = 0; c < static_cast<int>(TrainConfigs().size()); ++c) {
    if (!absl::GetFlag(FLAGS_large_models) &&
        std::string(TrainConfigs()[c].name) == "large") {
      continue;
    }
    train_configs_.push_back(c);
    for (int d = 0; d < static_cast<int>(train_datasets_.size()); ++d) {
      const JobPlan plan = PlanJob(c, d);
      const absl::Time submitted = absl::Now();
      absl::StatusOr<std::string> job_id = client.StartTraining(plan.request);
      if (!job_id.ok()) {
        std::cerr << "setup training: " << job_id.status() << "\n";
        return false;
      }
      model_.AckJob(*job_id, plan.request.seed(), plan.request.dataset_id());
      absl::StatusOr<v1::Job> job =
          client.WaitForJob(*job_id, absl::Seconds(600));
      if (!job.ok() || job->state() != v1::JOB_STATE_SUCCEEDED) {
        std::cerr << "setup training " << TrainConfigs()[c].name << ": "
                  << (job.ok() ? job->DebugString() : job.status().ToString())
                  << "\n";
        return false;
      }
      model_.SawJob(*job);
      train_seconds_[{c, d}] = absl::ToDoubleSeconds(absl::Now() - submitted);
      ImportSource source;
      source.name = absl::StrCat(TrainConfigs()[c].name, "-", d);
      absl::StatusOr<std::string> bytes =
          client.ExportSnapshotToString(job->snapshot_id());
      absl::StatusOr<v1::SnapshotInfo> info =
          client.GetSnapshot(job->snapshot_id());
      if (!bytes.ok() || !info.ok()) {
        std::cerr << "setup export: "
                  << (bytes.ok() ? info.status() : bytes.status()) << "\n";
        return false;
      }
      source.bytes = *std::move(bytes);
      source.sha256 = Sha256Hex(source.bytes);
      source.num_features = info->num_features();
      absl::StatusOr<std::vector<double>> fingerprint =
          PredictFingerprint(client, job->snapshot_id(), source.num_features);
      if (!fingerprint.ok()) {
        std::cerr << "setup predict: " << fingerprint.status() << "\n";
        return false;
      }
      source.fingerprint = *std::move(fingerprint);
      sources_.push_back(std::move(source));
    }
  }
  // The import rate, from one import of each file.
  for (const ImportSource& source : sources_) {
    Op op;
    op.kind = OpKind::kImport;
    op.source = &source;
    op.units = static_cast<double>(source.bytes.size());
    Run(op, client);
    if (!op.status.ok()) {
      std::cerr << "setup import: " << op.status << "\n";
      return false;
    }
    Apply(0, op);
    import_model_.Observe(op.units, absl::ToDoubleSeconds(op.duration));
  }
  // The rate of model calls, from one run of them on each model.
  for (int m = 0; m < kNumModels; ++m) {
    std::unique_ptr<Op> op = PlanModel({});
    Run(*op, client);
    if (!op->status.ok()) {
      std::cerr << "setup models: " << op->status << "\n";
      return false;
    }
    Apply(0, *op);
  }
  Outcomes ignored;
  model_.Verify(client, 0, std::nullopt,
                absl::Seconds(absl::GetFlag(FLAGS_job_timeout)), &ignored);
  models_.Verify(client, 0, model_, &ignored);
  setup_seconds_ = absl::ToDoubleSeconds(absl::Now() - start);
  std::cout << absl::StrFormat(
      "setup: %d datasets, %d import files (%s bytes), %.1f s; %d "
      "violations\n",
      model_.Datasets().size(), sources_.size(),
      absl::StrJoin(sources_, "/",
                    [](std::string* out, const ImportSource& s) {
                      absl::StrAppend(out, s.bytes.size());
                    }),
      setup_seconds_, model_.violations().size());
  return true;
}

std::unique_ptr<Op> CrashTest::UploadOp(std::string name, Rows rows,
                                        bool classification) {
  auto op = std::make_unique<Op>();
  op->kind = OpKind::kUpload;
  op->name = std::move(name);
  op->rows = std::move(rows);
  op->schema = SchemaOf(op->rows, classification);
  op->hasher = DatasetHasher(op->schema.task, op->schema.num_features);
  HashRows(op->schema, op->rows, &op->hasher);
  op->units =
      static_cast<double>(op->rows.num_rows() * (op->rows.num_features + 1));
  op->expected_seconds = upload_model_.Predict(op->units);
  return op;
}

std::unique_ptr<Op> CrashTest::PlanUpload(int cycle, int index) {
  const int64_t num_features = 1 + static_cast<int64_t>(rng_() % 4);
  std::vector<double> labels;
  if (Uniform(0, 1) < 0.3) {
    labels = Uniform(0, 1) < 0.5 ? std::vector<double>{0.0, 1.0}
                                 : std::vector<double>{-1.0, 2.0, 5.0};
  }
  const int64_t num_rows =
      std::max<int64_t>(static_cast<int64_t>(labels.size()),
                        LogUniform(1, absl::GetFlag(FLAGS_max_upload_rows)));
  return UploadOp(absl::StrCat("c", cycle, "-upload", index),
                  MakeRows(next_row_seed_++, num_rows, num_features, labels),
                  !labels.empty());
}

std::unique_ptr<Op> CrashTest::PlanAppend(
    const std::vector<std::string>& taken) {
  std::vector<StoreModel::DatasetSummary> datasets = model_.Datasets();
  datasets.erase(std::remove_if(datasets.begin(), datasets.end(),
                                [&](const StoreModel::DatasetSummary& d) {
                                  return std::find(taken.begin(), taken.end(),
                                                   d.id) != taken.end();
                                }),
                 datasets.end());
  if (datasets.empty()) return nullptr;
  const StoreModel::DatasetSummary& target = datasets[rng_() % datasets.size()];
  auto op = std::make_unique<Op>();
  op->kind = OpKind::kAppend;
  op->dataset_id = target.id;
  op->version = target.version + 1;
  op->schema = *target.schema;
  const int64_t num_rows = LogUniform(1, absl::GetFlag(FLAGS_max_append_rows));
  op->rows = MakeRows(next_row_seed_++, num_rows, target.num_features,
                      op->schema.class_values);
  op->hasher = *target.hasher;
  HashRows(op->schema, op->rows, &op->hasher);
  op->units = static_cast<double>(num_rows * (target.num_features + 1));
  op->expected_seconds = append_model_.Predict(op->units);
  return op;
}

std::unique_ptr<Op> CrashTest::PlanImport() {
  auto op = std::make_unique<Op>();
  op->kind = OpKind::kImport;
  op->source = &sources_[rng_() % sources_.size()];
  op->units = static_cast<double>(op->source->bytes.size());
  op->expected_seconds = import_model_.Predict(op->units);
  return op;
}

JobPlan CrashTest::PlanJob(int config, int dataset) {
  const TrainConfig& c = TrainConfigs()[config];
  JobPlan plan;
  plan.config = config;
  plan.dataset = dataset;
  v1::StartTrainingRequest& request = plan.request;
  request.set_dataset_id(train_datasets_[dataset]);
  request.set_dataset_version(1);
  request.set_method("slang");
  for (int width : c.hidden) request.mutable_model()->add_hidden_sizes(width);
  request.set_seed(next_job_seed_++);
  request.set_epochs(c.epochs);
  (*request.mutable_params())["rank"] = absl::StrCat(c.rank);
  (*request.mutable_params())["mc_samples"] = "1";
  (*request.mutable_params())["batch_size"] = "32";
  if (Uniform(0, 1) < kPublishingJobProbability) {
    request.set_model_name(ModelTracker::kJobModel);
    request.set_publish(true);
  }
  return plan;
}

std::unique_ptr<Op> CrashTest::PlanModel(
    const std::vector<std::string>& taken) {
  std::vector<std::string> free;
  for (int m = 0; m < kNumModels; ++m) {
    std::string name = absl::StrCat("m", m);
    if (std::find(taken.begin(), taken.end(), name) == taken.end()) {
      free.push_back(std::move(name));
    }
  }
  const std::vector<std::string> snapshots = model_.SnapshotIds();
  if (free.empty() || snapshots.empty()) return nullptr;
  auto op = std::make_unique<Op>();
  op->kind = OpKind::kModel;
  op->model_name = free[rng_() % free.size()];
  // Alias moves name versions acknowledged before this operation.
  const std::vector<int64_t> versions = models_.Versions(op->model_name);
  const std::vector<std::string>& aliases = ModelTracker::UserAliases();
  const int num_calls = 1 + static_cast<int>(rng_() % kMaxModelCalls);
  for (int i = 0; i < num_calls; ++i) {
    ModelCall call;
    call.publish = versions.empty() || Uniform(0, 1) < 0.5;
    if (call.publish) {
      call.snapshot_id = snapshots[rng_() % snapshots.size()];
      if (Uniform(0, 1) < 0.5) {
        call.aliases.push_back(aliases[rng_() % aliases.size()]);
      }
    } else {
      call.alias = aliases[rng_() % aliases.size()];
      call.version = versions[rng_() % versions.size()];
    }
    op->calls.push_back(std::move(call));
  }
  op->units = num_calls;
  op->expected_seconds = model_ops_model_.Predict(op->units);
  return op;
}

std::unique_ptr<Op> CrashTest::PlanTrain() {
  auto op = std::make_unique<Op>();
  op->kind = OpKind::kTrain;
  const int num_jobs = 1 + static_cast<int>(rng_() % 3);
  double end = 0;
  for (int i = 0; i < num_jobs; ++i) {
    const int config = train_configs_[rng_() % train_configs_.size()];
    const int dataset = static_cast<int>(rng_() % train_datasets_.size());
    op->jobs.push_back(PlanJob(config, dataset));
    end += train_seconds_.at({config, dataset});
    op->job_end_seconds.push_back(end);
  }
  op->expected_seconds = end;
  return op;
}

double CrashTest::KillDelay(const Op& primary) {
  const double expected = primary.expected_seconds;
  if (Uniform(0, 1) >= kAimAtEndProbability) return Uniform(0, 1.1 * expected);
  double end = expected;
  double length = expected;
  if (primary.kind == OpKind::kTrain) {
    const size_t job = rng_() % primary.jobs.size();
    end = primary.job_end_seconds[job];
    length = end - (job == 0 ? 0.0 : primary.job_end_seconds[job - 1]);
  }
  return std::max(0.0, Uniform(end - 0.3 * length, end + 0.05 * length));
}

void CrashTest::Run(Op& op, BnnClient& client) {
  const absl::Time start = absl::Now();
  if (op.kind == OpKind::kTrain) {
    RunTrain(op, client);
    return;
  }
  if (op.kind == OpKind::kModel) {
    RunModel(op, client);
    return;
  }
  absl::Status status;
  v1::DatasetInfo dataset_info;
  v1::SnapshotInfo snapshot_info;
  switch (op.kind) {
    case OpKind::kUpload: {
      v1::DatasetHeader header;
      header.set_name(op.name);
      header.set_task(IsClassification(op.schema.task) ? v1::TASK_CLASSIFICATION
                                                       : v1::TASK_REGRESSION);
      header.set_num_features(static_cast<int>(op.rows.num_features));
      absl::StatusOr<v1::DatasetInfo> info =
          client.UploadDataset(header, op.rows.features, op.rows.labels);
      status = info.status();
      if (info.ok()) dataset_info = *std::move(info);
      break;
    }
    case OpKind::kAppend: {
      absl::StatusOr<v1::DatasetInfo> info = client.AppendRows(
          op.dataset_id, op.rows.features, op.rows.num_features, op.rows.labels,
          /*expected_version=*/op.version - 1);
      status = info.status();
      if (info.ok()) dataset_info = *std::move(info);
      break;
    }
    case OpKind::kImport: {
      absl::StatusOr<v1::SnapshotInfo> info =
          client.ImportSnapshot(op.source->bytes);
      status = info.status();
      if (info.ok()) snapshot_info = *std::move(info);
      break;
    }
    case OpKind::kTrain:
    case OpKind::kModel:
      break;
  }
  absl::MutexLock lock(&mu_);
  op.returned = true;
  op.status = status;
  op.duration = absl::Now() - start;
  op.dataset_info = std::move(dataset_info);
  op.snapshot_info = std::move(snapshot_info);
}

void CrashTest::RunTrain(Op& op, BnnClient& client) {
  const absl::Time start = absl::Now();
  for (const JobPlan& job : op.jobs) {
    absl::StatusOr<std::string> id = client.StartTraining(job.request);
    absl::MutexLock lock(&mu_);
    if (!id.ok()) {
      op.returned = true;
      op.status = id.status();
      op.submit_failed = true;
      return;
    }
    op.job_ids.push_back(*id);
    op.job_seen.emplace_back();
  }
  while (true) {
    bool all_done = true;
    for (size_t i = 0; i < op.job_ids.size(); ++i) {
      {
        absl::MutexLock lock(&mu_);
        if (client::IsTerminal(op.job_seen[i].state())) continue;
      }
      absl::StatusOr<v1::Job> job = client.GetJob(op.job_ids[i]);
      absl::MutexLock lock(&mu_);
      if (!job.ok()) {
        op.returned = true;
        op.status = job.status();
        return;
      }
      op.job_seen[i] = *std::move(job);
      all_done = all_done && client::IsTerminal(op.job_seen[i].state());
    }
    if (all_done) break;
    absl::SleepFor(kJobPoll);
  }
  absl::MutexLock lock(&mu_);
  op.returned = true;
  op.duration = absl::Now() - start;
}

void CrashTest::RunModel(Op& op, BnnClient& client) {
  const absl::Time start = absl::Now();
  for (const ModelCall& call : op.calls) {
    absl::Status status;
    int64_t version = 0;
    if (call.publish) {
      absl::StatusOr<v1::ModelVersion> published =
          client.PublishModel(op.model_name, call.snapshot_id, call.aliases);
      status = published.status();
      if (published.ok()) version = published->version();
    } else {
      status =
          client.SetAlias(op.model_name, call.alias, call.version).status();
      version = call.version;
    }
    absl::MutexLock lock(&mu_);
    if (!status.ok()) {
      op.returned = true;
      op.status = status;
      return;
    }
    op.call_versions.push_back(version);
  }
  absl::MutexLock lock(&mu_);
  op.returned = true;
  op.duration = absl::Now() - start;
}

void CrashTest::Apply(int cycle, Op& op) {
  KindStats& stats = stats_[static_cast<int>(op.kind)];
  if (cycle > 0) {
    ++stats.ops;
    if (op.in_flight_at_kill) ++stats.in_flight_at_kill;
    if (op.in_flight_at_kill && op.primary) ++stats.primary_in_flight_at_kill;
  }
  // An error before the kill is a refusal: nothing may be stored.
  const bool refused = !op.status.ok() && !op.in_flight_at_kill;
  if (refused) {
    ++stats.refused;
    model_.AddViolation(
        cycle, "rpc",
        absl::StrCat(OpKindName(op.kind),
                     " failed before the kill: ", op.status.ToString()));
  }
  switch (op.kind) {
    case OpKind::kUpload:
      if (op.status.ok()) {
        model_.AckUpload(cycle, op.name, op.schema, op.hasher, op.dataset_info);
      } else if (!refused) {
        model_.AddPendingUpload(PendingUpload{
            op.name, op.schema,
            VersionExpect{op.hasher.num_rows(),
                          op.hasher.HexDigest(op.schema.class_values)},
            op.hasher});
      }
      break;
    case OpKind::kAppend:
      if (op.status.ok()) {
        model_.AckAppend(cycle, op.dataset_id, op.hasher, op.hasher.num_rows(),
                         op.dataset_info);
      } else if (!refused) {
        model_.AddPendingAppend(PendingAppend{
            op.dataset_id, op.version,
            VersionExpect{op.hasher.num_rows(),
                          op.hasher.HexDigest(op.schema.class_values)},
            op.hasher});
      }
      break;
    case OpKind::kImport:
      if (op.status.ok()) {
        model_.AckImport(cycle, *op.source, op.snapshot_info);
      } else if (!refused) {
        model_.AddPendingImport(op.source);
      }
      break;
    case OpKind::kTrain:
      if (cycle > 0) stats.jobs_submitted += op.job_ids.size();
      for (size_t i = 0; i < op.job_ids.size(); ++i) {
        const v1::StartTrainingRequest& request = op.jobs[i].request;
        model_.AckJob(op.job_ids[i], request.seed(), request.dataset_id());
        if (op.job_seen[i].state() != v1::JOB_STATE_UNSPECIFIED) {
          model_.SawJob(op.job_seen[i]);
        }
        // The rate of completed jobs, for later kill moments.
        const v1::Job& seen = op.job_seen[i];
        if (seen.state() == v1::JOB_STATE_SUCCEEDED) {
          double& estimate =
              train_seconds_[{op.jobs[i].config, op.jobs[i].dataset}];
          const double seconds =
              (seen.finished_unix_ms() - seen.started_unix_ms()) / 1000.0 +
              0.05;
          estimate = 0.7 * estimate + 0.3 * seconds;
        }
      }
      if (op.submit_failed && !refused) {
        const v1::StartTrainingRequest& request =
            op.jobs[op.job_ids.size()].request;
        model_.AddPendingJob(PendingJob{request.seed(), request.dataset_id()});
        if (cycle > 0) ++stats.jobs_submitted;
      }
      break;
    case OpKind::kModel:
      for (size_t i = 0; i < op.call_versions.size(); ++i) {
        models_.AckCall(op.model_name, op.calls[i], op.call_versions[i]);
      }
      if (!op.status.ok() && !refused) {
        models_.AddPending(op.model_name, op.calls[op.call_versions.size()]);
      }
      break;
  }
  if (cycle > 0 && op.kind == OpKind::kTrain) {
    stats.acknowledged += op.job_ids.size();
  } else if (cycle > 0 && op.status.ok()) {
    ++stats.acknowledged;
    if (op.in_flight_at_kill) ++stats.in_flight_acknowledged;
  }
  if (op.status.ok()) {
    if (op.returned && !op.in_flight_at_kill) {
      const double seconds = absl::ToDoubleSeconds(op.duration);
      stats.completed_seconds.push_back(seconds);
      if (op.kind == OpKind::kUpload) upload_model_.Observe(op.units, seconds);
      if (op.kind == OpKind::kAppend) append_model_.Observe(op.units, seconds);
      if (op.kind == OpKind::kImport) import_model_.Observe(op.units, seconds);
      if (op.kind == OpKind::kModel) {
        model_ops_model_.Observe(op.units, seconds);
      }
    }
  }
}

void CrashTest::RunCycle(int cycle) {
  // Plan: the primary operation and maybe others beside it.
  std::vector<OpKind> kinds = {kAllOpKinds[rng_() % kNumOpKinds]};
  if (Uniform(0, 1) < kExtraOpsProbability) {
    const int extra = 1 + static_cast<int>(rng_() % 2);
    for (int i = 0; i < extra; ++i) {
      kinds.push_back(kAllOpKinds[rng_() % kNumOpKinds]);
    }
  }
  std::vector<std::unique_ptr<Op>> ops;
  std::vector<std::string> appended;
  std::vector<std::string> modelled;
  for (size_t i = 0; i < kinds.size(); ++i) {
    std::unique_ptr<Op> op;
    switch (kinds[i]) {
      case OpKind::kUpload:
        op = PlanUpload(cycle, static_cast<int>(i));
        break;
      case OpKind::kAppend:
        op = PlanAppend(appended);
        if (op != nullptr) appended.push_back(op->dataset_id);
        break;
      case OpKind::kImport:
        op = PlanImport();
        break;
      case OpKind::kTrain:
        op = PlanTrain();
        break;
      case OpKind::kModel:
        op = PlanModel(modelled);
        if (op != nullptr) modelled.push_back(op->model_name);
        break;
    }
    if (op == nullptr) continue;
    op->primary = ops.empty();
    ops.push_back(std::move(op));
  }
  Op& primary = *ops.front();
  ++stats_[static_cast<int>(primary.kind)].primary_cycles;
  const double delay = KillDelay(primary);

  // Run, kill, and wait for every client call to give up.
  std::vector<std::thread> threads;
  for (const std::unique_ptr<Op>& op : ops) {
    threads.emplace_back([this, op = op.get()] { Run(*op, *client_); });
  }
  absl::SleepFor(absl::Seconds(delay));
  absl::Time kill_time;
  std::vector<std::string> in_flight;
  {
    absl::MutexLock lock(&mu_);
    for (const std::unique_ptr<Op>& op : ops) {
      if (op->returned) continue;
      op->in_flight_at_kill = true;
      in_flight.push_back(OpKindName(op->kind));
    }
    kill_time = absl::Now();
    server_->process().Signal(SIGKILL);
  }
  server_->Kill();
  for (std::thread& thread : threads) thread.join();
  const double calls_ended = absl::ToDoubleSeconds(absl::Now() - kill_time);
  if (!in_flight.empty()) ++kills_mid_operation_;
  client_.reset();
  for (const std::unique_ptr<Op>& op : ops) Apply(cycle, *op);

  // Restart and check.
  const size_t violations_before = model_.violations().size();
  double restart = 0;
  double verify = 0;
  const absl::Time start_time = absl::Now();
  if (StartServer(cycle)) {
    restart = restart_seconds_.back();
    const absl::Time verify_start = absl::Now();
    model_.Verify(*client_, cycle, Restart{kill_time, start_time},
                  absl::Seconds(absl::GetFlag(FLAGS_job_timeout)), &outcomes_);
    models_.Verify(*client_, cycle, model_, &outcomes_);
    verify = absl::ToDoubleSeconds(absl::Now() - verify_start);
    verify_seconds_.push_back(verify);
  }
  const size_t new_violations = model_.violations().size() - violations_before;

  std::vector<std::string> op_names;
  for (const std::unique_ptr<Op>& op : ops) {
    op_names.push_back(OpKindName(op->kind));
  }
  std::cout << absl::StrFormat(
      "cycle %d: %s; in flight at the kill: %s; kill after %.3f s (primary "
      "expected %.3f s); calls ended %.2f s after it; restart %.2f s, "
      "checks %.2f s; %d violations\n",
      cycle, absl::StrJoin(op_names, "+"),
      in_flight.empty() ? "none" : absl::StrJoin(in_flight, "+"), delay,
      primary.expected_seconds, calls_ended, restart, verify, new_violations);
  for (size_t i = violations_before; i < model_.violations().size(); ++i) {
    const Violation& v = model_.violations()[i];
    std::cout << "  VIOLATION [" << v.kind << "] " << v.detail << "\n";
  }
  std::cout.flush();
  cycles_.push_back({{"cycle", cycle},
                     {"ops", op_names},
                     {"in_flight_at_kill", in_flight},
                     {"primary_expected_seconds", primary.expected_seconds},
                     {"kill_delay_seconds", delay},
                     {"calls_ended_seconds", calls_ended},
                     {"restart_seconds", restart},
                     {"verify_seconds", verify},
                     {"violations", new_violations}});
}

void CrashTest::Finish() {
  if (server_ == nullptr || !server_->IsRunning()) return;
  client_.reset();
  if (!server_->Stop(SIGTERM).ok()) server_->Kill();
}

Json CrashTest::ToJson() const {
  Json by_kind = Json::object();
  for (OpKind kind : kAllOpKinds) {
    const int k = static_cast<int>(kind);
    const KindStats& s = stats_[k];
    Json entry = {{"primary_cycles", s.primary_cycles},
                  {"operations", s.ops},
                  {"in_flight_at_kill", s.in_flight_at_kill},
                  {"primary_in_flight_at_kill", s.primary_in_flight_at_kill},
                  {"acknowledged", s.acknowledged},
                  {"in_flight_acknowledged", s.in_flight_acknowledged},
                  {"refused", s.refused},
                  {"in_doubt_committed", outcomes_.committed[k]},
                  {"in_doubt_not_committed", outcomes_.not_committed[k]},
                  {"completed_seconds", Summary(s.completed_seconds)}};
    if (kind == OpKind::kTrain) entry["jobs_submitted"] = s.jobs_submitted;
    by_kind[OpKindName(kind)] = entry;
  }
  Json violations = Json::array();
  for (const Violation& v : model_.violations()) {
    violations.push_back(
        {{"cycle", v.cycle}, {"kind", v.kind}, {"detail", v.detail}});
  }
  Json sources = Json::array();
  for (const ImportSource& s : sources_) {
    sources.push_back({{"name", s.name}, {"bytes", s.bytes.size()}});
  }
  return {
      {"cycles_run", cycles_.size()},
      {"setup_seconds", setup_seconds_},
      {"kills_mid_operation", kills_mid_operation_},
      {"restart_seconds", Summary(restart_seconds_)},
      {"verify_seconds", Summary(verify_seconds_)},
      {"by_kind", by_kind},
      {"jobs",
       {{"failed_by_restart", outcomes_.jobs_failed_by_restart},
        {"adopted_after_restart", outcomes_.jobs_adopted},
        {"queued_at_kill_then_run", outcomes_.jobs_queued_then_run}}},
      {"import_files", sources},
      {"final_store",
       {{"datasets", model_.Datasets().size()},
        {"dataset_versions", model_.num_dataset_versions()},
        {"snapshots", model_.num_snapshots()},
        {"jobs", model_.num_jobs()}}},
      {"violations", violations},
      {"cycles", cycles_},
  };
}

int Main(int argc, char** argv) {
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() > 1) {
    std::cerr << "unexpected argument " << args[1] << "\n";
    return 2;
  }
  const int cycles = absl::GetFlag(FLAGS_cycles);
  std::string work_dir = absl::GetFlag(FLAGS_work_dir);
  const bool own_work_dir = work_dir.empty();
  if (own_work_dir) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/bnn-crash-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      return 2;
    }
    work_dir = pattern;
  }
  std::error_code error;
  std::filesystem::create_directories(work_dir, error);
  if (std::filesystem::exists(work_dir + "/data") &&
      !std::filesystem::is_empty(work_dir + "/data")) {
    std::cerr << work_dir << "/data is not empty; the test needs a fresh "
              << "store\n";
    return 2;
  }
  std::vector<std::string> command;
  for (int i = 0; i < argc; ++i) command.emplace_back(argv[i]);
  const std::string commit = CommandOutput(
      absl::StrCat("git -C '", BNN_SOURCE_DIR, "' rev-parse HEAD 2>/dev/null"));
  const std::string started_at = UtcNow();
  std::cout << "bnn_crash_test: " << cycles << " cycles, seed "
            << absl::GetFlag(FLAGS_seed) << ", server "
            << absl::GetFlag(FLAGS_server) << ", work dir " << work_dir << "\n";

  const absl::Time start = absl::Now();
  CrashTest test(work_dir, absl::GetFlag(FLAGS_seed));
  if (!test.Setup()) {
    test.Finish();
    return 2;
  }
  for (int cycle = 1; cycle <= cycles && !test.restart_failed(); ++cycle) {
    test.RunCycle(cycle);
  }
  test.Finish();
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);

  Json record = test.ToJson();
  record["program"] = "bnn_crash_test";
  record["command_line"] = command;
  record["git_commit"] = commit.empty() ? "unknown" : commit;
  record["build"] = bench::ProvenanceJson(absl::GetFlag(FLAGS_server));
  record["started_at"] = started_at;
  record["wall_seconds"] = wall;
  record["server"] = absl::GetFlag(FLAGS_server);
  record["server_flags"] = ServerFlags();
  record["config"] = {
      {"cycles", cycles},
      {"seed", absl::GetFlag(FLAGS_seed)},
      {"max_upload_rows", absl::GetFlag(FLAGS_max_upload_rows)},
      {"max_append_rows", absl::GetFlag(FLAGS_max_append_rows)},
      {"large_models", absl::GetFlag(FLAGS_large_models)},
      {"job_timeout_seconds", absl::GetFlag(FLAGS_job_timeout)}};
  const std::string json_out = absl::GetFlag(FLAGS_json_out);
  if (!json_out.empty()) {
    std::ofstream out(json_out);
    out << record.dump(2) << "\n";
    if (!out) {
      std::cerr << "cannot write " << json_out << "\n";
      return 2;
    }
  }

  const std::vector<Violation>& violations = test.model().violations();
  std::cout << absl::StrFormat(
      "\n%d cycles in %.1f s: %d kills during an operation; %d violations\n",
      record["cycles_run"].get<int>(), wall,
      record["kills_mid_operation"].get<int>(), violations.size());
  for (OpKind kind : kAllOpKinds) {
    const Json& k = record["by_kind"][OpKindName(kind)];
    if (kind == OpKind::kTrain) {
      std::cout << absl::StrFormat(
          "  train  primary in %3d cycles, %3d operations (%d jobs, %d "
          "acknowledged), %d with jobs unfinished at the kill; StartTraining "
          "in flight: %d committed, %d not\n",
          k["primary_cycles"].get<int>(), k["operations"].get<int>(),
          k["jobs_submitted"].get<int>(), k["acknowledged"].get<int>(),
          k["in_flight_at_kill"].get<int>(), k["in_doubt_committed"].get<int>(),
          k["in_doubt_not_committed"].get<int>());
      continue;
    }
    std::cout << absl::StrFormat(
        "  %-6s primary in %3d cycles, %3d operations, %3d in flight at the "
        "kill (%d answered OK, %d committed, %d not), %d acknowledged\n",
        OpKindName(kind), k["primary_cycles"].get<int>(),
        k["operations"].get<int>(), k["in_flight_at_kill"].get<int>(),
        k["in_flight_acknowledged"].get<int>(),
        k["in_doubt_committed"].get<int>(),
        k["in_doubt_not_committed"].get<int>(), k["acknowledged"].get<int>());
  }
  const Json& jobs = record["jobs"];
  std::cout << absl::StrFormat(
      "  jobs: %d failed by a restart, %d adopted their snapshot, %d queued "
      "at a kill and run after it\n",
      jobs["failed_by_restart"].get<int>(),
      jobs["adopted_after_restart"].get<int>(),
      jobs["queued_at_kill_then_run"].get<int>());
  for (const Violation& v : violations) {
    std::cout << "VIOLATION cycle " << v.cycle << " [" << v.kind << "] "
              << v.detail << "\n";
  }
  if (violations.empty() && own_work_dir) {
    std::filesystem::remove_all(work_dir, error);
  } else {
    std::cout << "work dir kept: " << work_dir << "\n";
  }
  return violations.empty() ? 0 : 1;
}

}  // namespace
}  // namespace bnn::faults

int main(int argc, char** argv) { return bnn::faults::Main(argc, argv); }
