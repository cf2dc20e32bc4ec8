#include "server/jobs/kubernetes/job_launcher.h"

#include <utility>

#include <absl/strings/str_cat.h>
#include <nlohmann/json.hpp>

#include "bnn/status.h"

namespace bnn::server::kubernetes {
namespace {

using Json = nlohmann::json;

// Jobs read per List page.
constexpr int kListPageSize = 500;
// Pages read by one List at most (a runaway continue token cannot loop).
constexpr int kMaxListPages = 100;

absl::StatusOr<Json> ParseBody(absl::string_view what,
                               const ApiClient::Response& response) {
  Json json = Json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InternalError(absl::StrCat("kubernetes API ", what,
                                            ": the answer is not a JSON "
                                            "object"));
  }
  return json;
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobLauncher>> JobLauncher::Create(
    const LauncherOptions& options) {
  BNN_RETURN_IF_ERROR(options.Validate());
  BNN_ASSIGN_OR_RETURN(LauncherOptions resolved, ResolveInCluster(options));
  BNN_RETURN_IF_ERROR(resolved.Validate());
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<ApiClient> client,
                       ApiClient::Create(resolved));
  return std::unique_ptr<JobLauncher>(
      new JobLauncher(resolved, std::move(client)));
}

JobLauncher::JobLauncher(const LauncherOptions& options,
                         std::unique_ptr<ApiClient> client)
    : options_(options),
      jobs_path_(absl::StrCat("/apis/batch/v1/namespaces/",
                              options.job_namespace, "/jobs")),
      client_(std::move(client)) {}

absl::StatusOr<LaunchedJob> JobLauncher::Launch(absl::string_view job_id) {
  BNN_ASSIGN_OR_RETURN(const Json job, BuildJob(options_, job_id));
  absl::StatusOr<ApiClient::Response> created = client_->Call(
      "POST", absl::StrCat(jobs_path_, "?fieldValidation=Strict"), job.dump());
  if (created.ok()) {
    BNN_ASSIGN_OR_RETURN(const Json stored, ParseBody("POST", *created));
    return ParseLaunchedJob(stored);
  }
  if (created.status().code() != absl::StatusCode::kAlreadyExists) {
    return created.status();
  }
  // The name is taken: ours if it carries the same job id.
  const std::string name = job["metadata"]["name"].get<std::string>();
  absl::StatusOr<LaunchedJob> existing = Get(job_id);
  if (existing.ok() && existing->job_id == job_id) return existing;
  if (!existing.ok() &&
      existing.status().code() != absl::StatusCode::kInvalidArgument &&
      existing.status().code() != absl::StatusCode::kNotFound) {
    return existing.status();
  }
  return absl::AlreadyExistsError(
      absl::StrCat("kubernetes Job ", name, " exists in namespace ",
                   options_.job_namespace, " but is not the Job of ", job_id,
                   " (its ", kJobIdLabel, " label differs)"));
}

absl::StatusOr<LaunchedJob> JobLauncher::Get(absl::string_view job_id) {
  BNN_ASSIGN_OR_RETURN(
      const ApiClient::Response response,
      client_->Call(
          "GET", absl::StrCat(jobs_path_, "/",
                              JobNameForId(options_.job_name_prefix, job_id))));
  BNN_ASSIGN_OR_RETURN(const Json job, ParseBody("GET", response));
  return ParseLaunchedJob(job);
}

absl::StatusOr<std::map<std::string, LaunchedJob>> JobLauncher::List() {
  std::map<std::string, LaunchedJob> jobs;
  std::string continue_token;
  for (int page = 0; page < kMaxListPages; ++page) {
    std::string path = absl::StrCat(
        jobs_path_, "?labelSelector=", QueryEscape(kOurJobsSelector),
        "&limit=", kListPageSize);
    if (!continue_token.empty()) {
      absl::StrAppend(&path, "&continue=", QueryEscape(continue_token));
    }
    BNN_ASSIGN_OR_RETURN(const ApiClient::Response response,
                         client_->Call("GET", path));
    BNN_ASSIGN_OR_RETURN(const Json list, ParseBody("GET (list)", response));
    auto items = list.find("items");
    if (items != list.end() && items->is_array()) {
      for (const Json& item : *items) {
        absl::StatusOr<LaunchedJob> job = ParseLaunchedJob(item);
        // A Job with our labels but no job id was not made by a launcher.
        if (job.ok()) jobs[job->job_id] = *std::move(job);
      }
    }
    continue_token.clear();
    auto metadata = list.find("metadata");
    if (metadata != list.end() && metadata->is_object()) {
      continue_token = metadata->value("continue", "");
    }
    if (continue_token.empty()) return jobs;
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("kubernetes API GET (list) ", jobs_path_, ": more than ",
                   kMaxListPages * kListPageSize, " Jobs"));
}

absl::StatusOr<bool> JobLauncher::Delete(absl::string_view job_id) {
  absl::StatusOr<ApiClient::Response> response = client_->Call(
      "DELETE", absl::StrCat(jobs_path_, "/",
                             JobNameForId(options_.job_name_prefix, job_id),
                             "?propagationPolicy=Background"));
  if (response.ok()) return true;
  if (response.status().code() == absl::StatusCode::kNotFound) return false;
  return response.status();
}

JobMonitor::JobMonitor(JobLauncher* launcher, OnChange on_change,
                       OnError on_error)
    : launcher_(launcher),
      on_change_(std::move(on_change)),
      on_error_(std::move(on_error)),
      thread_([this] { Loop(); }) {}

JobMonitor::~JobMonitor() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void JobMonitor::PollNow() {
  absl::MutexLock lock(&mu_);
  poll_now_ = true;
}

int64_t JobMonitor::polls() const {
  absl::MutexLock lock(&mu_);
  return polls_;
}

void JobMonitor::Loop() {
  const absl::Duration interval = launcher_->options().status_poll_interval;
  for (;;) {
    PollOnce();
    absl::MutexLock lock(&mu_);
    ++polls_;
    // Sleeps until the interval ends, PollNow() or the destructor.
    const auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return stop_ || poll_now_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&woken), interval);
    if (stop_) return;
    poll_now_ = false;
  }
}

void JobMonitor::PollOnce() {
  absl::StatusOr<std::map<std::string, LaunchedJob>> jobs = launcher_->List();
  if (!jobs.ok()) {
    if (on_error_) on_error_(jobs.status());
    return;
  }
  for (const auto& [job_id, job] : *jobs) {
    auto known = known_.find(job_id);
    if (known == known_.end() || known->second.status != job.status ||
        known->second.uid != job.uid) {
      on_change_(job_id, job);
    }
  }
  for (const auto& [job_id, job] : known_) {
    if (jobs->count(job_id) == 0) on_change_(job_id, std::nullopt);
  }
  known_ = *std::move(jobs);
}

}  // namespace bnn::server::kubernetes
