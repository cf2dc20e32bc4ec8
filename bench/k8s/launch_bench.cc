// bnn_k8s_launch_bench: how long the Kubernetes job launcher takes to put a
// training job's batch/v1 Job on the API server and to notice it running,
// against the fake API server (tests/test_util/fake_k8s_api.py) on loopback
// (docs/results/scale.md). Per launch it records
//   launch_ms   JobLauncher::Launch round trip (POST, schema check, 201),
//   seen_ms     from the call to the fake receiving the request,
// then List's cost with every Job stored (one JobMonitor poll), and for
// --detect_jobs jobs the time from the fake flipping a Job to active (as
// the Job controller would) to JobMonitor reporting it running, at the
// smallest poll interval (1 s; no PollNow), flipping at points spread over
// the poll cycle. Prints a text summary and one
// JSON line ("k8s_launch_bench {...}").
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdlib.h>
#include <string>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/clock.h>
#include <nlohmann/json.hpp>

#include "server/jobs/kubernetes/job_launcher.h"
#include "tests/test_util/fake_k8s_api.h"

ABSL_FLAG(int, jobs, 200, "Jobs launched (each a POST)");
ABSL_FLAG(int, detect_jobs, 10,
          "Jobs whose switch to running the JobMonitor must notice");

namespace {

using bnn::server::kubernetes::JobLauncher;
using bnn::server::kubernetes::JobMonitor;
using bnn::server::kubernetes::JobPhase;
using bnn::server::kubernetes::LaunchedJob;
using bnn::server::kubernetes::LauncherOptions;
using Json = nlohmann::json;

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(
      values.size() - 1, static_cast<size_t>(q * (values.size() - 1) + 0.5));
  return values[index];
}

Json Summary(const std::vector<double>& ms) {
  return {{"n", ms.size()},
          {"p50_ms", Percentile(ms, 0.5)},
          {"p90_ms", Percentile(ms, 0.9)},
          {"p99_ms", Percentile(ms, 0.99)},
          {"max_ms", Percentile(ms, 1.0)}};
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "k8s_launch_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int jobs = absl::GetFlag(FLAGS_jobs);
  const int detect_jobs = absl::GetFlag(FLAGS_detect_jobs);

  std::string dir_template =
      (std::filesystem::temp_directory_path() / "k8s_bench_XXXXXX").string();
  if (mkdtemp(dir_template.data()) == nullptr) return Fail("mkdtemp failed");
  const std::string dir = dir_template;
  int exit_code = 0;
  {
    absl::StatusOr<std::unique_ptr<bnn::testing::FakeK8sApi>> fake =
        bnn::testing::FakeK8sApi::Start(dir);
    if (!fake.ok()) return Fail(fake.status().ToString());
    LauncherOptions options;
    options.api_server = (*fake)->api_url();
    options.ca_file = (*fake)->ca_file();
    options.token_file = (*fake)->token_file();
    options.job_namespace = "bench";
    options.image = "bnn-serve:bench";
    options.status_poll_interval = absl::Seconds(1);
    absl::StatusOr<std::unique_ptr<JobLauncher>> launcher =
        JobLauncher::Create(options);
    if (!launcher.ok()) return Fail(launcher.status().ToString());

    std::vector<double> launch_ms, seen_ms, list_ms, detect_ms;
    std::vector<double> starts;
    for (int i = 0; i < jobs; ++i) {
      const absl::Time start = absl::Now();
      absl::StatusOr<LaunchedJob> job =
          (*launcher)->Launch(absl::StrFormat("job-%016x", i));
      if (!job.ok()) return Fail(job.status().ToString());
      launch_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      starts.push_back(absl::ToDoubleSeconds(start - absl::UnixEpoch()));
    }
    // When the fake received each POST (its clock is this host's).
    absl::StatusOr<std::string> requests = (*fake)->Requests();
    if (!requests.ok()) return Fail(requests.status().ToString());
    size_t post = 0;
    for (const Json& request : Json::parse(*requests)) {
      if (request["method"] != "POST" || post >= starts.size()) continue;
      seen_ms.push_back((request["time"].get<double>() - starts[post++]) *
                        1000.0);
    }
    for (int i = 0; i < 20; ++i) {
      const absl::Time start = absl::Now();
      absl::StatusOr<std::map<std::string, LaunchedJob>> listed =
          (*launcher)->List();
      if (!listed.ok()) return Fail(listed.status().ToString());
      if (static_cast<int>(listed->size()) != jobs) {
        return Fail(absl::StrCat("List found ", listed->size(), " Jobs"));
      }
      list_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    }

    // Time from a Job becoming active to the monitor reporting it.
    absl::Mutex mu;
    std::map<std::string, absl::Time> running;
    {
      JobMonitor monitor(
          launcher->get(),
          [&](const std::string& id, const std::optional<LaunchedJob>& job) {
            if (job && job->status.phase == JobPhase::kRunning) {
              absl::MutexLock lock(&mu);
              running.emplace(id, absl::Now());
            }
          },
          [](const absl::Status& status) {
            std::fprintf(stderr, "poll failed: %s\n",
                         status.ToString().c_str());
          });
      for (int i = 0; i < std::min(detect_jobs, jobs); ++i) {
        const std::string id = absl::StrFormat("job-%016x", i);
        // At a different point of the poll cycle each time.
        absl::SleepFor(absl::Milliseconds((i * 370) % 1000));
        const absl::Time flipped = absl::Now();
        absl::Status status = (*fake)->SetJobStatus(
            "bench", absl::StrCat("bnn-train-", id), R"({"active": 1})");
        if (!status.ok()) return Fail(status.ToString());
        absl::MutexLock lock(&mu);
        const auto seen = [&] { return running.count(id) > 0; };
        if (!mu.AwaitWithTimeout(absl::Condition(&seen), absl::Seconds(10))) {
          exit_code = Fail(absl::StrCat(id, " not reported running"));
          break;
        }
        detect_ms.push_back(absl::ToDoubleMilliseconds(running[id] - flipped));
      }
    }

    const Json result = {{"jobs", jobs},
                         {"launch", Summary(launch_ms)},
                         {"seen", Summary(seen_ms)},
                         {"list_all", Summary(list_ms)},
                         {"running_detected", Summary(detect_ms)},
                         {"poll_interval_s", 1}};
    std::printf(
        "launch (POST round trip)      p50 %.2f ms  p90 %.2f ms  max %.2f ms\n"
        "seen by the fake after call   p50 %.2f ms  p90 %.2f ms  max %.2f ms\n"
        "List of %d Jobs (one poll)    p50 %.2f ms  max %.2f ms\n"
        "running -> monitor reports it p50 %.0f ms  max %.0f ms (1 s poll)\n",
        Percentile(launch_ms, 0.5), Percentile(launch_ms, 0.9),
        Percentile(launch_ms, 1), Percentile(seen_ms, 0.5),
        Percentile(seen_ms, 0.9), Percentile(seen_ms, 1), jobs,
        Percentile(list_ms, 0.5), Percentile(list_ms, 1),
        Percentile(detect_ms, 0.5), Percentile(detect_ms, 1));
    std::printf("k8s_launch_bench %s\n", result.dump().c_str());
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return exit_code;
}
