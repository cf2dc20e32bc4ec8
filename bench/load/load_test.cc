// bnn_load_test: a load test of the real bnn-server (issue 10).
//
// Starts bnn-server on a free loopback port with a configuration for two
// cores (one compute worker and one training job, one thread each; the
// limits below), uploads a UCI-size regression data set (kTrainRows x
// kFeatures), trains a snapshot of a kFeatures-kHidden-1 ReLU net (SLANG),
// and starts a long training job of the same net that runs for the whole
// test (a new one starts if it ends). After --warmup_seconds, two phases of
// --seconds each:
//
//   1. --clients well-behaved Predict clients, each on its own connection,
//      each sending --rate requests per second (one at a time) of
//      --rows_min..--rows_max rows (uniform) with --samples posterior
//      samples and no seed (the server draws fresh samples every time);
//   2. the same clients, plus the abusive clients of abusers.h.
//
// It reports per phase the well-behaved clients' throughput (requests/s,
// rows/s), latency p50/p90/p99/max and errors, the training steps done, the
// CPU time of the server, of this program and of everything else on the
// machine (to spot a run disturbed by other work), the server's RSS over
// time, and what each abuser got. It exits 1 if a well-behaved request
// failed, phase 2's p99 exceeds --max_p99_ratio times phase 1's, an abuser
// got a status it should not, a training job failed, the RSS grew by more
// than --max_rss_growth_mib from a phase's second quarter to its last (means
// of the samples), or the server
// did not stay healthy and stop cleanly.
//
//   build/bench/load/bnn_load_test --seconds 60 --clients 8 --rate 25
//       --json_out docs/results/load/run.json   (one command line)
//
// docs/results/load.md has the recorded runs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <signal.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <absl/synchronization/mutex.h>
#include <absl/synchronization/notification.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <nlohmann/json.hpp>

#include "bnn/build_info.h"

#include "bench/common/provenance.h"
#include "bench/load/abusers.h"
#include "bench/load/load_util.h"
#include "client/bnn_client.h"
#include "tests/test_util/subprocess.h"

ABSL_FLAG(std::string, server_binary, BNN_SERVER_PATH,
          "The bnn-server binary to test.");
ABSL_FLAG(double, seconds, 60, "Length of each phase.");
ABSL_FLAG(double, warmup_seconds, 3,
          "Clients and training run this long before phase 1 (not "
          "measured).");
ABSL_FLAG(int, clients, 4, "Well-behaved Predict clients.");
ABSL_FLAG(double, rate, 50,
          "Requests per second of each well-behaved client (one in flight "
          "at a time; a late request is sent at once, without catching "
          "up). 0: back to back.");
ABSL_FLAG(int, rows_min, 1, "Fewest rows of a well-behaved request.");
ABSL_FLAG(int, rows_max, 100, "Most rows of a well-behaved request.");
ABSL_FLAG(int, samples, 64, "num_samples of a well-behaved request.");
ABSL_FLAG(double, max_p99_ratio, 2.0,
          "Largest allowed ratio of phase 2's p99 to phase 1's.");
ABSL_FLAG(double, max_rss_growth_mib, 32,
          "Largest allowed growth of the server's mean RSS from a phase's "
          "second quarter to its last.");
ABSL_FLAG(double, rss_interval_seconds, 1, "Period of the RSS samples.");
ABSL_FLAG(std::string, json_out, "", "Write the results as JSON here.");
ABSL_FLAG(std::string, requests_csv, "",
          "Write every well-behaved request here: client, phase, start (s "
          "from the warm-up's start), seconds, rows, status code.");
ABSL_FLAG(std::string, work_dir, "",
          "Directory for the server's store and log; default a new "
          "temporary directory, removed unless the test fails.");

// The server's configuration (its flags of the same names).
ABSL_FLAG(int, compute_workers, 2,
          "bnn-server --compute-workers (2, the server's default: with "
          "training at --training-nice, a second worker serves well-behaved "
          "calls while an abusive one computes on the first).");
ABSL_FLAG(int, server_threads, 1, "bnn-server --threads.");
ABSL_FLAG(int, training_nice, 10,
          "bnn-server --training-nice (10, the server's default).");
ABSL_FLAG(double, max_request_seconds, 10, "bnn-server --max-request-seconds.");
ABSL_FLAG(int64_t, max_predict_rows, 10000, "bnn-server --max-predict-rows.");
ABSL_FLAG(int, max_predict_samples, 256, "bnn-server --max-predict-samples.");
ABSL_FLAG(int64_t, max_message_bytes, 8 << 20,
          "bnn-server --max-message-bytes.");
ABSL_FLAG(int, max_client_streams, 8, "bnn-server --max-client-streams.");
ABSL_FLAG(double, stream_idle_seconds, 2, "bnn-server --stream-idle-seconds.");
ABSL_FLAG(std::vector<std::string>, server_args, {},
          "Further bnn-server flags, comma-separated (--flag=value).");

// The abusers of phase 2 (abusers.h).
ABSL_FLAG(int, oversized_clients, 1,
          "Clients sending requests beyond the limits.");
ABSL_FLAG(int, slow_streams, 2, "Uploads sending a row every half idle limit.");
ABSL_FLAG(int, idle_streams, 8, "Uploads sending a header and then nothing.");
ABSL_FLAG(int, abandoned_clients, 1,
          "Clients sending the largest admitted Predict with a short "
          "deadline.");
ABSL_FLAG(int, cancelled_clients, 1,
          "Clients sending the largest admitted Predict and cancelling it.");
ABSL_FLAG(double, abuse_pause_ms, 10, "Pause of an abuser between calls.");
ABSL_FLAG(double, abandon_deadline_ms, 50, "Deadline of an abandoned Predict.");
ABSL_FLAG(double, cancel_after_ms, 30,
          "Delay before a cancelled Predict is cancelled.");

namespace bnn::bench {
namespace {

using ::bnn::client::BnnClient;
using ::bnn::testing::ServerProcess;

// The workload: a UCI-size regression problem (Boston housing has 13
// features) and the 13-50-1 net of the UCI experiments.
constexpr int kFeatures = 13;
constexpr int kTrainRows = 2000;
constexpr int kHidden = 50;
// Epochs of the snapshot the clients predict from, and of the background
// training job (far more than any run lasts; it is cancelled at the end).
constexpr int kSnapshotEpochs = 20;
constexpr int kBackgroundEpochs = 1000000;

// Row-major kTrainRows x kFeatures standard normal features and a smooth
// target with noise.
void MakeTrainingData(std::vector<double>* x, std::vector<double>* y) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  x->resize(kTrainRows * kFeatures);
  y->resize(kTrainRows);
  for (int i = 0; i < kTrainRows; ++i) {
    double* row = x->data() + i * kFeatures;
    for (int j = 0; j < kFeatures; ++j) row[j] = normal(rng);
    (*y)[i] = std::sin(row[0]) + 0.5 * row[1] * row[2] - 0.3 * row[3] +
              0.1 * normal(rng);
  }
}

v1::StartTrainingRequest TrainingRequest(const std::string& dataset_id,
                                         int epochs, uint64_t seed) {
  v1::StartTrainingRequest request;
  request.set_dataset_id(dataset_id);
  request.set_method("slang");
  request.mutable_model()->add_hidden_sizes(kHidden);
  request.mutable_model()->add_activations("relu");
  request.set_epochs(epochs);
  request.set_seed(seed);
  request.mutable_slang()->set_batch_size(32);
  return request;
}

// The phases, back to back after the warm-up.
enum PhaseId { kWarmup = 0, kPhase1 = 1, kPhase2 = 2, kNumPhases = 3 };
const char* const kPhaseNames[kNumPhases] = {"warmup", "phase1", "phase2"};

struct Schedule {
  absl::Time begin[kNumPhases];
  absl::Time end[kNumPhases];

  // The phase `t` falls in, or -1 before or after the test.
  int PhaseAt(absl::Time t) const {
    for (int p = 0; p < kNumPhases; ++p) {
      if (t >= begin[p] && t < end[p]) return p;
    }
    return -1;
  }
};

// One well-behaved request.
struct Request {
  int phase;
  absl::Time start;
  double seconds;
  int rows;
  absl::StatusCode code;
};

// A well-behaved client: its own connection, one request at a time, paced.
class GoodClient {
 public:
  GoodClient(int index, std::unique_ptr<BnnClient> client,
             std::string snapshot_id, const Schedule* schedule)
      : index_(index),
        client_(std::move(client)),
        snapshot_id_(std::move(snapshot_id)),
        schedule_(schedule) {}

  void Run() {
    std::mt19937_64 rng(1000 + index_);
    std::normal_distribution<double> normal;
    std::uniform_int_distribution<int> num_rows(absl::GetFlag(FLAGS_rows_min),
                                                absl::GetFlag(FLAGS_rows_max));
    const double rate = absl::GetFlag(FLAGS_rate);
    const absl::Duration interval =
        rate > 0 ? absl::Seconds(1 / rate) : absl::ZeroDuration();
    const int samples = absl::GetFlag(FLAGS_samples);
    // Clients start at random offsets within one interval.
    absl::Time next =
        schedule_->begin[kWarmup] +
        interval * std::uniform_real_distribution<double>(0, 1)(rng);
    const absl::Time end = schedule_->end[kPhase2];
    std::vector<double> features;
    while (true) {
      const absl::Time now = absl::Now();
      if (next > now) absl::SleepFor(next - now);
      const absl::Time start = std::max(next, now);
      if (start >= end) break;
      next = start + interval;
      const int rows = num_rows(rng);
      features.resize(rows * kFeatures);
      for (double& v : features) v = normal(rng);
      const absl::StatusOr<v1::PredictResponse> response =
          client_->Predict(snapshot_id_, features, kFeatures, samples);
      const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
      absl::Status status = response.status();
      if (status.ok() && response->predictions_size() != rows) {
        status = absl::InternalError(absl::StrCat(
            response->predictions_size(), " predictions for ", rows, " rows"));
      }
      requests_.push_back(
          {schedule_->PhaseAt(start), start, seconds, rows, status.code()});
      if (!status.ok() && errors_.size() < 5) {
        errors_.push_back(
            absl::StrCat("client ", index_, ": ", status.ToString()));
      }
    }
  }

  const std::vector<Request>& requests() const { return requests_; }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  const int index_;
  const std::unique_ptr<BnnClient> client_;
  const std::string snapshot_id_;
  const Schedule* const schedule_;
  std::vector<Request> requests_;
  std::vector<std::string> errors_;  // the first few
};

// Keeps a training job running: polls it and starts another when it ends.
// Counts the steps done, across jobs, at every poll. Thread-safe.
class TrainingLoad {
 public:
  TrainingLoad(BnnClient* client, v1::StartTrainingRequest request)
      : client_(client), request_(std::move(request)) {}
  ~TrainingLoad() { Stop(); }

  absl::Status Start() {
    absl::StatusOr<std::string> job = client_->StartTraining(request_);
    if (!job.ok()) return job.status();
    {
      absl::MutexLock lock(&mu_);
      job_id_ = *job;
      ++jobs_started_;
      polls_.push_back({absl::Now(), 0});
    }
    thread_ = std::thread([this] { Monitor(); });
    return absl::OkStatus();
  }

  // Cancels the running job.
  void Stop() {
    if (!thread_.joinable()) return;
    stop_.Notify();
    thread_.join();
    absl::MutexLock lock(&mu_);
    client_->CancelJob(job_id_).IgnoreError();
  }

  // Steps done between the polls nearest before `from` and before `to`.
  int64_t StepsBetween(absl::Time from, absl::Time to) const {
    absl::MutexLock lock(&mu_);
    const auto at = [&](absl::Time t) {
      int64_t steps = 0;
      for (const auto& [when, done] : polls_) {
        if (when > t) break;
        steps = done;
      }
      return steps;
    };
    return at(to) - at(from);
  }

  nlohmann::json ToJson() const {
    absl::MutexLock lock(&mu_);
    return {{"jobs_started", jobs_started_},
            {"jobs_failed", failures_.size()},
            {"failures", failures_},
            {"poll_errors", poll_errors_},
            {"steps", polls_.empty() ? 0 : polls_.back().second}};
  }
  std::vector<std::string> failures() const {
    absl::MutexLock lock(&mu_);
    return failures_;
  }

 private:
  void Monitor() {
    int64_t finished_steps = 0;  // of the jobs before the current one
    while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(500))) {
      std::string job_id;
      {
        absl::MutexLock lock(&mu_);
        job_id = job_id_;
      }
      absl::StatusOr<v1::Job> job = client_->GetJob(job_id);
      absl::MutexLock lock(&mu_);
      if (!job.ok()) {
        ++poll_errors_;
        continue;
      }
      polls_.push_back({absl::Now(), finished_steps + job->step()});
      if (!client::IsTerminal(job->state())) continue;
      finished_steps += job->step();
      if (job->state() != v1::JOB_STATE_SUCCEEDED) {
        failures_.push_back(absl::StrCat(
            job_id, " ", v1::JobState_Name(job->state()), ": ", job->error()));
      }
      absl::StatusOr<std::string> next = client_->StartTraining(request_);
      if (!next.ok()) {
        failures_.push_back(
            absl::StrCat("StartTraining: ", next.status().ToString()));
        return;
      }
      job_id_ = *next;
      ++jobs_started_;
    }
  }

  BnnClient* const client_;
  const v1::StartTrainingRequest request_;
  absl::Notification stop_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::string job_id_ ABSL_GUARDED_BY(mu_);
  int jobs_started_ ABSL_GUARDED_BY(mu_) = 0;
  int poll_errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> failures_ ABSL_GUARDED_BY(mu_);
  // (when, steps done so far by all jobs).
  std::vector<std::pair<absl::Time, int64_t>> polls_ ABSL_GUARDED_BY(mu_);
};

// Samples the server's VmRSS periodically.
class RssSampler {
 public:
  struct Sample {
    absl::Time when;
    int64_t kib;
  };

  RssSampler(pid_t pid, absl::Duration period) : pid_(pid), period_(period) {
    thread_ = std::thread([this] {
      do {
        const int64_t kib = ReadRssKib(pid_);
        absl::MutexLock lock(&mu_);
        samples_.push_back({absl::Now(), kib});
      } while (!stop_.WaitForNotificationWithTimeout(period_));
    });
  }
  ~RssSampler() { Stop(); }

  void Stop() {
    if (!thread_.joinable()) return;
    stop_.Notify();
    thread_.join();
  }

  std::vector<Sample> samples() const {
    absl::MutexLock lock(&mu_);
    return samples_;
  }

 private:
  const pid_t pid_;
  const absl::Duration period_;
  absl::Notification stop_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<Sample> samples_ ABSL_GUARDED_BY(mu_);
};

// The RSS sample nearest to `t` (samples not empty).
int64_t RssAt(const std::vector<RssSampler::Sample>& samples, absl::Time t) {
  const RssSampler::Sample* best = &samples.front();
  for (const RssSampler::Sample& s : samples) {
    if (absl::AbsDuration(s.when - t) < absl::AbsDuration(best->when - t)) {
      best = &s;
    }
  }
  return best->kib;
}

// The mean of the RSS samples taken in [from, to), or RssAt(from) if none.
int64_t MeanRss(const std::vector<RssSampler::Sample>& samples, absl::Time from,
                absl::Time to) {
  int64_t sum = 0, n = 0;
  for (const RssSampler::Sample& s : samples) {
    if (s.when >= from && s.when < to) {
      sum += s.kib;
      ++n;
    }
  }
  return n > 0 ? sum / n : RssAt(samples, from);
}

// CPU seconds of the server, of this process and of the whole machine.
struct CpuClock {
  double server = 0;
  double self = 0;
  double machine = 0;

  static CpuClock Now(pid_t server_pid) {
    return {ProcessCpuSeconds(server_pid), ProcessCpuSeconds(getpid()),
            MachineBusyCpuSeconds()};
  }
};

// What one phase of the well-behaved clients measured.
struct PhaseResult {
  double seconds = 0;
  int64_t requests = 0;
  int64_t rows = 0;
  std::map<std::string, int64_t> errors;  // by code
  int64_t num_errors = 0;
  LatencySummary latency;
  int64_t training_steps = 0;
  CpuClock cpu;  // used during the phase
  int64_t rss_begin_kib = 0, rss_end_kib = 0, rss_max_kib = 0;
  // Means over the phase's second and last quarters: the RSS of a busy
  // server moves by tens of MiB from second to second (buffers of large
  // requests come and go), so growth compares means, not two samples.
  int64_t rss_q2_kib = 0, rss_q4_kib = 0;

  double rss_growth_mib() const {
    return static_cast<double>(rss_q4_kib - rss_q2_kib) / 1024.0;
  }

  nlohmann::json ToJson() const {
    return {
        {"seconds", seconds},
        {"requests", requests},
        {"rows", rows},
        {"requests_per_second", requests / seconds},
        {"rows_per_second", rows / seconds},
        {"errors", num_errors},
        {"errors_by_code", errors},
        {"latency", latency.ToJson()},
        {"training_steps", training_steps},
        {"training_steps_per_second", training_steps / seconds},
        {"cpu_seconds",
         {{"server", cpu.server},
          {"load_test", cpu.self},
          {"other", cpu.machine - cpu.server - cpu.self},
          {"machine_busy", cpu.machine}}},
        {"rss_kib",
         {{"begin", rss_begin_kib},
          {"mean_second_quarter", rss_q2_kib},
          {"mean_last_quarter", rss_q4_kib},
          {"end", rss_end_kib},
          {"max", rss_max_kib}}},
        {"rss_growth_mib", rss_growth_mib()},
    };
  }
};

std::string MachineDescription() {
  std::string model;
  const std::string cpuinfo = testing::ReadFileOrEmpty("/proc/cpuinfo");
  if (const size_t at = cpuinfo.find("model name"); at != std::string::npos) {
    const size_t colon = cpuinfo.find(':', at);
    const size_t end = cpuinfo.find('\n', at);
    if (colon != std::string::npos && colon < end) {
      model = cpuinfo.substr(colon + 2, end - colon - 2);
    }
  }
  return absl::StrCat(std::thread::hardware_concurrency(), " CPUs, ", model);
}

std::string LoadAverage() {
  std::string text = testing::ReadFileOrEmpty("/proc/loadavg");
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

int Run(int argc, char** argv) {
  const double phase_seconds = absl::GetFlag(FLAGS_seconds);
  const int num_clients = absl::GetFlag(FLAGS_clients);
  if (phase_seconds <= 0 || num_clients < 1 ||
      absl::GetFlag(FLAGS_rows_min) < 1 ||
      absl::GetFlag(FLAGS_rows_max) < absl::GetFlag(FLAGS_rows_min)) {
    std::cerr << "need --seconds > 0, --clients >= 1 and "
                 "1 <= --rows_min <= --rows_max\n";
    return 2;
  }
  std::string work_dir = absl::GetFlag(FLAGS_work_dir);
  const bool temporary_dir = work_dir.empty();
  if (temporary_dir) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "bnn_load_test_XXXXXX")
            .string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      return 2;
    }
    work_dir = pattern;
  }
  std::filesystem::create_directories(work_dir);
  const std::string log_path = work_dir + "/server.log";

  std::vector<std::string> server_flags = {
      "--compute-workers",
      absl::StrCat(absl::GetFlag(FLAGS_compute_workers)),
      "--threads",
      absl::StrCat(absl::GetFlag(FLAGS_server_threads)),
      "--training-nice",
      absl::StrCat(absl::GetFlag(FLAGS_training_nice)),
      "--max-concurrent-jobs",
      "1",
      "--max-request-seconds",
      absl::StrCat(absl::GetFlag(FLAGS_max_request_seconds)),
      "--max-predict-rows",
      absl::StrCat(absl::GetFlag(FLAGS_max_predict_rows)),
      "--max-predict-samples",
      absl::StrCat(absl::GetFlag(FLAGS_max_predict_samples)),
      "--max-message-bytes",
      absl::StrCat(absl::GetFlag(FLAGS_max_message_bytes)),
      "--max-client-streams",
      absl::StrCat(absl::GetFlag(FLAGS_max_client_streams)),
      "--stream-idle-seconds",
      absl::StrCat(absl::GetFlag(FLAGS_stream_idle_seconds))};
  for (const std::string& arg : absl::GetFlag(FLAGS_server_args)) {
    server_flags.push_back(arg);
  }
  const std::string binary = absl::GetFlag(FLAGS_server_binary);
  const std::vector<std::string> server_command =
      ServerProcess::Command(binary, work_dir + "/data", server_flags);
  const std::string load_before = LoadAverage();
  std::cout << "server: " << absl::StrJoin(server_command, " ") << "\n"
            << "machine: " << MachineDescription()
            << "; load average before: " << load_before << "\n";
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start(binary, work_dir + "/data", log_path, server_flags);
  if (!server.ok()) {
    std::cerr << "cannot start bnn-server: " << server.status() << "\n";
    return 1;
  }
  const pid_t pid = (*server)->pid();
  const std::string target = (*server)->address();
  const int64_t rss_started_kib = ReadRssKib(pid);

  // Set-up: data set, snapshot, background training.
  BnnClient::Options options;
  options.rpc_timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<BnnClient>> setup =
      BnnClient::Create(OwnConnection(target), options);
  if (!setup.ok()) {
    std::cerr << setup.status() << "\n";
    return 1;
  }
  std::vector<double> x, y;
  MakeTrainingData(&x, &y);
  v1::DatasetHeader header;
  // Dataset names are unique on a server: one per run.
  header.set_name(absl::StrCat("load-test-", absl::ToUnixNanos(absl::Now())));
  header.set_task(v1::TASK_REGRESSION);
  header.set_num_features(kFeatures);
  const absl::StatusOr<v1::DatasetInfo> dataset =
      (*setup)->UploadDataset(header, x, y);
  if (!dataset.ok()) {
    std::cerr << "upload: " << dataset.status() << "\n";
    return 1;
  }
  absl::StatusOr<std::string> job = (*setup)->StartTraining(
      TrainingRequest(dataset->dataset_id(), kSnapshotEpochs, 1));
  absl::StatusOr<v1::Job> trained =
      job.ok() ? (*setup)->WaitForJob(*job, absl::Minutes(5)) : job.status();
  if (!trained.ok() || trained->state() != v1::JOB_STATE_SUCCEEDED) {
    std::cerr << "training the snapshot: "
              << (trained.ok() ? trained->error() : trained.status().ToString())
              << "\n";
    return 1;
  }
  const std::string snapshot_id = trained->snapshot_id();
  const int64_t rss_setup_kib = ReadRssKib(pid);
  std::cout << "snapshot " << snapshot_id << " of a " << kFeatures << "-"
            << kHidden << "-1 net trained on " << kTrainRows << " rows\n";

  TrainingLoad training(setup->get(), TrainingRequest(dataset->dataset_id(),
                                                      kBackgroundEpochs, 2));
  if (absl::Status s = training.Start(); !s.ok()) {
    std::cerr << "background training: " << s << "\n";
    return 1;
  }

  Schedule schedule;
  schedule.begin[kWarmup] = absl::Now();
  schedule.end[kWarmup] = schedule.begin[kPhase1] =
      schedule.begin[kWarmup] +
      absl::Seconds(absl::GetFlag(FLAGS_warmup_seconds));
  schedule.end[kPhase1] = schedule.begin[kPhase2] =
      schedule.begin[kPhase1] + absl::Seconds(phase_seconds);
  schedule.end[kPhase2] =
      schedule.begin[kPhase2] + absl::Seconds(phase_seconds);

  RssSampler rss(pid, absl::Seconds(absl::GetFlag(FLAGS_rss_interval_seconds)));
  std::vector<std::unique_ptr<GoodClient>> clients;
  for (int i = 0; i < num_clients; ++i) {
    absl::StatusOr<std::unique_ptr<BnnClient>> client =
        BnnClient::Create(OwnConnection(target), options);
    if (!client.ok()) {
      std::cerr << client.status() << "\n";
      return 1;
    }
    clients.push_back(std::make_unique<GoodClient>(i, *std::move(client),
                                                   snapshot_id, &schedule));
  }
  std::vector<std::thread> threads;
  for (auto& client : clients) {
    threads.emplace_back([c = client.get()] { c->Run(); });
  }

  AbuseOptions abuse;
  abuse.target = target;
  abuse.snapshot_id = snapshot_id;
  abuse.num_features = kFeatures;
  abuse.max_predict_rows = absl::GetFlag(FLAGS_max_predict_rows);
  abuse.max_predict_samples = absl::GetFlag(FLAGS_max_predict_samples);
  abuse.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  abuse.stream_idle = absl::Seconds(absl::GetFlag(FLAGS_stream_idle_seconds));
  abuse.oversized = absl::GetFlag(FLAGS_oversized_clients);
  abuse.slow_streams = absl::GetFlag(FLAGS_slow_streams);
  abuse.idle_streams = absl::GetFlag(FLAGS_idle_streams);
  abuse.abandoned = absl::GetFlag(FLAGS_abandoned_clients);
  abuse.cancelled = absl::GetFlag(FLAGS_cancelled_clients);
  abuse.pause = absl::Milliseconds(absl::GetFlag(FLAGS_abuse_pause_ms));
  abuse.abandon_deadline =
      absl::Milliseconds(absl::GetFlag(FLAGS_abandon_deadline_ms));
  abuse.cancel_after = absl::Milliseconds(absl::GetFlag(FLAGS_cancel_after_ms));
  Abusers abusers(abuse);

  CpuClock cpu_at[kNumPhases + 1];
  absl::SleepFor(schedule.begin[kPhase1] - absl::Now());
  cpu_at[kPhase1] = CpuClock::Now(pid);
  std::cout << "phase 1: " << num_clients << " clients for " << phase_seconds
            << " s" << std::endl;
  absl::SleepFor(schedule.begin[kPhase2] - absl::Now());
  cpu_at[kPhase2] = CpuClock::Now(pid);
  std::cout << "phase 2: the same, with abusers" << std::endl;
  abusers.Start();
  absl::SleepFor(schedule.end[kPhase2] - absl::Now());
  cpu_at[kNumPhases] = CpuClock::Now(pid);
  for (std::thread& thread : threads) thread.join();
  abusers.Stop();
  rss.Stop();
  const int64_t rss_end_kib = ReadRssKib(pid);

  std::vector<std::string> problems;
  // The server must still serve and then stop cleanly.
  const bool running = (*server)->IsRunning();
  absl::StatusOr<std::string> health = (*setup)->CheckHealth();
  if (!running || !health.ok() || *health != "SERVING") {
    problems.push_back(absl::StrCat(
        "after the test the server is ", running ? "running" : "gone",
        ", health ", health.ok() ? *health : health.status().ToString()));
  }
  training.Stop();
  const absl::StatusOr<int> exit_code = (*server)->Stop(SIGTERM);
  if (!exit_code.ok() || *exit_code != 0) {
    problems.push_back(absl::StrCat("the server did not stop cleanly: ",
                                    exit_code.ok()
                                        ? absl::StrCat("exit ", *exit_code)
                                        : exit_code.status().ToString()));
  }

  // Results.
  const std::vector<RssSampler::Sample> rss_samples = rss.samples();
  PhaseResult results[kNumPhases];
  std::vector<double> seconds[kNumPhases];
  std::vector<std::string> errors;
  for (const auto& client : clients) {
    for (const Request& r : client->requests()) {
      if (r.phase < 0) continue;
      PhaseResult& result = results[r.phase];
      ++result.requests;
      result.rows += r.rows;
      seconds[r.phase].push_back(r.seconds);
      if (r.code != absl::StatusCode::kOk) {
        ++result.num_errors;
        ++result.errors[absl::StatusCodeToString(r.code)];
      }
    }
    errors.insert(errors.end(), client->errors().begin(),
                  client->errors().end());
  }
  for (int p = kPhase1; p <= kPhase2; ++p) {
    PhaseResult& r = results[p];
    r.seconds = phase_seconds;
    r.latency = Summarize(seconds[p]);
    r.training_steps =
        training.StepsBetween(schedule.begin[p], schedule.end[p]);
    const CpuClock& a = cpu_at[p];
    const CpuClock& b = cpu_at[p + 1];
    r.cpu = {b.server - a.server, b.self - a.self, b.machine - a.machine};
    const absl::Duration quarter = absl::Seconds(phase_seconds / 4);
    r.rss_begin_kib = RssAt(rss_samples, schedule.begin[p]);
    r.rss_q2_kib = MeanRss(rss_samples, schedule.begin[p] + quarter,
                           schedule.begin[p] + 2 * quarter);
    r.rss_q4_kib =
        MeanRss(rss_samples, schedule.end[p] - quarter, schedule.end[p]);
    r.rss_end_kib = RssAt(rss_samples, schedule.end[p]);
    for (const RssSampler::Sample& s : rss_samples) {
      if (s.when >= schedule.begin[p] && s.when <= schedule.end[p]) {
        r.rss_max_kib = std::max(r.rss_max_kib, s.kib);
      }
    }
    if (r.num_errors > 0) {
      problems.push_back(absl::StrCat(kPhaseNames[p], ": ", r.num_errors,
                                      " well-behaved request(s) failed"));
    }
    if (r.rss_growth_mib() > absl::GetFlag(FLAGS_max_rss_growth_mib)) {
      problems.push_back(absl::StrFormat(
          "%s: the server's mean RSS grew by %.1f MiB from the second to "
          "the last quarter (limit %.1f)",
          kPhaseNames[p], r.rss_growth_mib(),
          absl::GetFlag(FLAGS_max_rss_growth_mib)));
    }
  }
  const double p99_ratio =
      results[kPhase1].latency.p99_ms > 0
          ? results[kPhase2].latency.p99_ms / results[kPhase1].latency.p99_ms
          : 0;
  if (!(p99_ratio <= absl::GetFlag(FLAGS_max_p99_ratio))) {
    problems.push_back(
        absl::StrFormat("phase 2's p99 is %.2fx phase 1's (limit %.2fx)",
                        p99_ratio, absl::GetFlag(FLAGS_max_p99_ratio)));
  }
  for (std::string& p : abusers.Problems()) problems.push_back(std::move(p));
  for (const std::string& f : training.failures()) {
    problems.push_back(absl::StrCat("training: ", f));
  }
  for (int p = kPhase1; p <= kPhase2; ++p) {
    if (results[p].training_steps == 0) {
      problems.push_back(
          absl::StrCat(kPhaseNames[p], ": the training job made no progress"));
    }
  }

  // Report.
  std::cout << "\nwell-behaved clients: " << num_clients << " x "
            << absl::GetFlag(FLAGS_rate) << " req/s, "
            << absl::GetFlag(FLAGS_rows_min) << ".."
            << absl::GetFlag(FLAGS_rows_max)
            << " rows, S=" << absl::GetFlag(FLAGS_samples) << "\n";
  for (int p = kPhase1; p <= kPhase2; ++p) {
    const PhaseResult& r = results[p];
    std::cout << absl::StrFormat(
        "%s: %.1f req/s, %.0f rows/s, errors %d, latency %s\n"
        "        training %.0f steps/s; cpu s: server %.1f, load test %.1f, "
        "other %.1f; rss MiB begin %.1f, mean Q2 %.1f, mean Q4 %.1f, "
        "end %.1f, max %.1f\n",
        kPhaseNames[p], r.requests / r.seconds, r.rows / r.seconds,
        r.num_errors, r.latency.ToString(), r.training_steps / r.seconds,
        r.cpu.server, r.cpu.self, r.cpu.machine - r.cpu.server - r.cpu.self,
        r.rss_begin_kib / 1024.0, r.rss_q2_kib / 1024.0, r.rss_q4_kib / 1024.0,
        r.rss_end_kib / 1024.0, r.rss_max_kib / 1024.0);
  }
  std::cout
      << absl::StrFormat("p99 ratio phase2/phase1: %.2f (limit %.2f)\n",
                         p99_ratio, absl::GetFlag(FLAGS_max_p99_ratio))
      << absl::StrFormat(
             "server rss MiB: started %.1f, after set-up %.1f, end %.1f\n",
             rss_started_kib / 1024.0, rss_setup_kib / 1024.0,
             rss_end_kib / 1024.0)
      << "abusers (phase 2):\n"
      << abusers.Describe();
  for (const std::string& e : errors) std::cout << "  error: " << e << "\n";
  for (const std::string& p : problems) std::cout << "FAIL: " << p << "\n";
  const bool passed = problems.empty();
  std::cout << (passed ? "PASS" : "FAIL") << "\n";

  if (const std::string path = absl::GetFlag(FLAGS_json_out); !path.empty()) {
    nlohmann::json samples = nlohmann::json::array();
    for (const RssSampler::Sample& s : rss_samples) {
      const int phase = schedule.PhaseAt(s.when);
      samples.push_back(
          {{"t", absl::ToDoubleSeconds(s.when - schedule.begin[kWarmup])},
           {"kib", s.kib},
           {"phase", phase < 0 ? "after" : kPhaseNames[phase]}});
    }
    std::vector<std::string> command(argv, argv + argc);
    nlohmann::json out = {
        {"commit", bnn::BuildCommit()},
        {"build", bnn::bench::ProvenanceJson(binary)},
        {"command", absl::StrJoin(command, " ")},
        {"machine", MachineDescription()},
        {"load_average", {{"before", load_before}, {"after", LoadAverage()}}},
        {"server_command", server_command},
        {"workload",
         {{"net", absl::StrCat(kFeatures, "-", kHidden, "-1 relu, SLANG")},
          {"train_rows", kTrainRows},
          {"clients", num_clients},
          {"rate_per_client", absl::GetFlag(FLAGS_rate)},
          {"rows_min", absl::GetFlag(FLAGS_rows_min)},
          {"rows_max", absl::GetFlag(FLAGS_rows_max)},
          {"samples", absl::GetFlag(FLAGS_samples)},
          {"warmup_seconds", absl::GetFlag(FLAGS_warmup_seconds)},
          {"phase_seconds", phase_seconds}}},
        {"phase1", results[kPhase1].ToJson()},
        {"phase2", results[kPhase2].ToJson()},
        {"p99_ratio", p99_ratio},
        {"max_p99_ratio", absl::GetFlag(FLAGS_max_p99_ratio)},
        {"abusers", abusers.ToJson()},
        {"training", training.ToJson()},
        {"rss_kib",
         {{"started", rss_started_kib},
          {"after_setup", rss_setup_kib},
          {"end", rss_end_kib},
          {"samples", samples}}},
        {"errors", errors},
        {"problems", problems},
        {"passed", passed}};
    std::ofstream file(path);
    file << out.dump(2) << "\n";
    if (!file) {
      std::cerr << "cannot write " << path << "\n";
      return 1;
    }
  }
  if (const std::string path = absl::GetFlag(FLAGS_requests_csv);
      !path.empty()) {
    std::ofstream file(path);
    file << "client,phase,start_s,seconds,rows,code\n";
    for (size_t c = 0; c < clients.size(); ++c) {
      for (const Request& r : clients[c]->requests()) {
        file << c << "," << (r.phase < 0 ? "after" : kPhaseNames[r.phase])
             << "," << absl::ToDoubleSeconds(r.start - schedule.begin[kWarmup])
             << "," << r.seconds << "," << r.rows << ","
             << absl::StatusCodeToString(r.code) << "\n";
      }
    }
  }
  if (passed && temporary_dir) {
    std::filesystem::remove_all(work_dir);
  } else {
    std::cout << "server log: " << log_path << "\n";
  }
  return passed ? 0 : 1;
}

}  // namespace
}  // namespace bnn::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return bnn::bench::Run(argc, argv);
}
