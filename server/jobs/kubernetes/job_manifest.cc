#include "server/jobs/kubernetes/job_manifest.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_replace.h>

namespace bnn::server::kubernetes {
namespace {

using Json = nlohmann::json;

// 64-bit FNV-1a: stable across builds and processes, unlike std::hash.
uint64_t Fnv1a(absl::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (char c : text) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

// The CPU limit (or request) rounded down, at least 1: bnn-train's
// --threads.
int Threads(const LauncherOptions& options) {
  for (const std::string& cpu : {options.cpu_limit, options.cpu_request}) {
    if (cpu.empty()) continue;
    absl::StatusOr<double> value = ParseQuantity(cpu);
    if (value.ok()) return std::max(1, static_cast<int>(std::floor(*value)));
  }
  return 1;
}

Json Labels(absl::string_view job_id) {
  return Json{{"app.kubernetes.io/name", "bnn-train"},
              {"app.kubernetes.io/managed-by", "bnn-server"},
              {kJobIdLabel, std::string(job_id)}};
}

int64_t IntOr(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

std::string StringOr(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

absl::string_view JobPhaseToString(JobPhase phase) {
  switch (phase) {
    case JobPhase::kPending:
      return "pending";
    case JobPhase::kRunning:
      return "running";
    case JobPhase::kSucceeded:
      return "succeeded";
    case JobPhase::kFailed:
      return "failed";
  }
  return "unknown";
}

std::string JobNameForId(absl::string_view prefix, absl::string_view job_id) {
  std::string name = absl::StrCat(prefix, job_id);
  if (IsDns1123Label(name)) return name;
  std::string cleaned;
  for (char c : job_id) {
    c = absl::ascii_tolower(static_cast<uint8_t>(c));
    const bool ok =
        absl::ascii_isdigit(static_cast<uint8_t>(c)) || (c >= 'a' && c <= 'z');
    if (ok) {
      cleaned.push_back(c);
    } else if (!cleaned.empty() && cleaned.back() != '-') {
      cleaned.push_back('-');
    }
  }
  // "<prefix><cleaned>-<10 hex digits>", at most 63.
  const size_t room = 63 - prefix.size() - 11;
  cleaned.resize(std::min(cleaned.size(), room));
  while (!cleaned.empty() && cleaned.back() == '-') cleaned.pop_back();
  return absl::StrCat(
      prefix, cleaned, cleaned.empty() ? "" : "-",
      absl::StrFormat("%010x", Fnv1a(job_id) & 0xffffffffffull));
}

absl::StatusOr<Json> BuildJob(const LauncherOptions& options,
                              absl::string_view job_id) {
  if (job_id.empty() || !IsLabelValue(job_id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job id \"", job_id,
        "\" cannot label a Kubernetes Job (at most 63 alphanumerics, '-', "
        "'_', '.', starting and ending alphanumeric)"));
  }
  const std::string threads = absl::StrCat(Threads(options));
  Json args = Json::array();
  for (const std::string& arg : options.args) {
    args.push_back(
        absl::StrReplaceAll(arg, {{"{job_id}", job_id},
                                  {"{blob_dir}", options.blob_mount_path},
                                  {"{threads}", threads}}));
  }
  Json env = Json::array();
  env.push_back({{"name", "BNN_METADATA"},
                 {"valueFrom",
                  {{"secretKeyRef",
                    {{"name", options.metadata_secret_name},
                     {"key", options.metadata_secret_key}}}}}});
  for (const auto& [name, value] : options.env) {
    env.push_back({{"name", name}, {"value", value}});
  }
  Json requests = Json::object(), limits = Json::object();
  if (!options.cpu_request.empty()) requests["cpu"] = options.cpu_request;
  if (!options.memory_request.empty()) {
    requests["memory"] = options.memory_request;
  }
  if (!options.cpu_limit.empty()) limits["cpu"] = options.cpu_limit;
  if (!options.memory_limit.empty()) limits["memory"] = options.memory_limit;
  Json resources = Json::object();
  if (!requests.empty()) resources["requests"] = requests;
  if (!limits.empty()) resources["limits"] = limits;

  Json container = {
      {"name", "bnn-train"},
      {"image", options.image},
      {"imagePullPolicy", options.image_pull_policy},
      {"command", options.command},
      {"args", args},
      {"env", env},
      {"resources", resources},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"capabilities", {{"drop", {"ALL"}}}}}},
      {"volumeMounts",
       {{{"name", "blobs"}, {"mountPath", options.blob_mount_path}},
        {{"name", "tmp"}, {"mountPath", "/tmp"}}}},
  };
  Json pod = {
      {"restartPolicy", "Never"},
      // bnn-train calls no Kubernetes API.
      {"automountServiceAccountToken", false},
      {"securityContext",
       {{"runAsNonRoot", true},
        {"runAsUser", options.run_as_user},
        {"runAsGroup", options.run_as_user},
        {"fsGroup", options.run_as_user},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      {"containers", {container}},
      {"volumes",
       {{{"name", "blobs"},
         {"persistentVolumeClaim", {{"claimName", options.blob_pvc_name}}}},
        {{"name", "tmp"}, {"emptyDir", Json::object()}}}},
  };
  if (!options.service_account.empty()) {
    pod["serviceAccountName"] = options.service_account;
  }
  if (!options.node_selector.empty()) {
    pod["nodeSelector"] = options.node_selector;
  }
  Json spec = {
      {"backoffLimit", options.backoff_limit},
      {"template", {{"metadata", {{"labels", Labels(job_id)}}}, {"spec", pod}}},
  };
  if (options.active_deadline_seconds > 0) {
    spec["activeDeadlineSeconds"] = options.active_deadline_seconds;
  }
  if (options.ttl_seconds_after_finished >= 0) {
    spec["ttlSecondsAfterFinished"] = options.ttl_seconds_after_finished;
  }
  return Json{
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata",
       {{"name", JobNameForId(options.job_name_prefix, job_id)},
        {"namespace", options.job_namespace},
        {"labels", Labels(job_id)}}},
      {"spec", spec},
  };
}

JobStatus ParseJobStatus(const Json& job) {
  JobStatus result;
  auto it = job.find("status");
  if (it == job.end() || !it->is_object()) return result;
  const Json& status = *it;
  result.active = static_cast<int>(IntOr(status, "active"));
  result.succeeded = static_cast<int>(IntOr(status, "succeeded"));
  result.failed = static_cast<int>(IntOr(status, "failed"));
  auto conditions = status.find("conditions");
  if (conditions != status.end() && conditions->is_array()) {
    for (const Json& condition : *conditions) {
      if (!condition.is_object() || StringOr(condition, "status") != "True") {
        continue;
      }
      const std::string type = StringOr(condition, "type");
      if (type == "Failed" || type == "FailureTarget") {
        result.phase = JobPhase::kFailed;
        const std::string reason = StringOr(condition, "reason");
        const std::string message = StringOr(condition, "message");
        result.reason = reason.empty() || message.empty()
                            ? reason + message
                            : absl::StrCat(reason, ": ", message);
        if (result.reason.empty()) result.reason = type;
        return result;
      }
      if (type == "Complete" || type == "SuccessCriteriaMet") {
        result.phase = JobPhase::kSucceeded;
        return result;
      }
    }
  }
  if (result.succeeded >= 1) {
    result.phase = JobPhase::kSucceeded;
  } else if (status.contains("ready") ? IntOr(status, "ready") >= 1
                                      : result.active >= 1) {
    result.phase = JobPhase::kRunning;
  }
  return result;
}

absl::StatusOr<LaunchedJob> ParseLaunchedJob(const Json& job) {
  LaunchedJob result;
  auto metadata = job.find("metadata");
  if (!job.is_object() || metadata == job.end() || !metadata->is_object()) {
    return absl::InvalidArgumentError("a Job object without metadata");
  }
  result.name = StringOr(*metadata, "name");
  result.uid = StringOr(*metadata, "uid");
  auto labels = metadata->find("labels");
  if (labels != metadata->end() && labels->is_object()) {
    result.job_id = StringOr(*labels, kJobIdLabel);
  }
  if (result.name.empty() || result.job_id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Job \"", result.name, "\" has no name or no ", kJobIdLabel, " label"));
  }
  result.status = ParseJobStatus(job);
  return result;
}

}  // namespace bnn::server::kubernetes
