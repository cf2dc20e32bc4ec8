// The configuration of the Kubernetes job launcher (--job-runner=kubernetes):
// where the API server is and how to authenticate to it, and what the
// batch/v1 Job of each training job looks like. Read from a JSON file
// (docs/deploy.md, "Training as Kubernetes Jobs") and/or "key=value"
// overrides; the keys are the field names below.
#ifndef BNN_SERVER_JOBS_KUBERNETES_LAUNCHER_OPTIONS_H_
#define BNN_SERVER_JOBS_KUBERNETES_LAUNCHER_OPTIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/time/time.h>

namespace bnn::server::kubernetes {

// The service account files every pod of a cluster gets mounted.
inline constexpr char kServiceAccountDir[] =
    "/var/run/secrets/kubernetes.io/serviceaccount";

struct LauncherOptions {
  // ---- The API server and its credentials.

  // "https://HOST[:PORT]" of the Kubernetes API server. Empty: in-cluster,
  // from the KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT variables
  // every pod gets, or https://kubernetes.default.svc without them
  // (ResolveInCluster). Only https: the bearer token never travels in
  // plaintext.
  std::string api_server;
  // The service account's bearer token. Read again for every request,
  // since the kubelet rotates projected tokens (about hourly).
  std::string token_file = std::string(kServiceAccountDir) + "/token";
  // PEM bundle of the CA(s) that signed the API server's certificate; the
  // system's trust store is not used.
  std::string ca_file = std::string(kServiceAccountDir) + "/ca.crt";
  // Namespace the Jobs are created in. Empty: the pod's own, read from
  // `namespace_file` (ResolveInCluster).
  std::string job_namespace;
  // Where the pod's namespace is read when `job_namespace` is empty.
  std::string namespace_file = std::string(kServiceAccountDir) + "/namespace";

  // ---- Calls to the API server.

  // Longest wait for the TCP and TLS connection. (0, 1 min].
  absl::Duration connect_timeout = absl::Seconds(5);
  // Longest time one request may take in all, connection included.
  // >= connect_timeout, <= 10 min.
  absl::Duration request_timeout = absl::Seconds(30);
  // Largest response body read (a List of many Jobs is the largest); a
  // larger one fails the call with ResourceExhausted. [4 KiB, 256 MiB].
  int64_t max_response_bytes = 16 << 20;
  // How often the JobMonitor lists the Jobs to follow their status. No
  // watch: one List per interval, however many jobs run. [1 s, 10 min].
  absl::Duration status_poll_interval = absl::Seconds(5);

  // ---- The Job.

  // Container image holding bnn-train (the bnn-serve image). Required.
  std::string image;
  // Always, IfNotPresent or Never.
  std::string image_pull_policy = "IfNotPresent";
  // The container's command (its entrypoint). Non-empty.
  std::vector<std::string> command = {"bnn-train"};
  // The container's arguments. "{job_id}" is replaced by the job's id (it
  // must appear in some argument), "{blob_dir}" by `blob_mount_path` and
  // "{threads}" by the CPU limit (or request) rounded down, at least 1.
  // "$(BNN_METADATA)" is expanded by Kubernetes from the container's
  // environment (the metadata URI from its Secret, below). bnn-train's
  // own --data-dir (its lock and claimant id) is in the pod's /tmp
  // emptyDir: a new pod is a new claimant.
  std::vector<std::string> args = {
      "--metadata=$(BNN_METADATA)", "--blob-dir={blob_dir}",
      "--data-dir=/tmp/bnn-train", "--job-id={job_id}", "--threads={threads}"};
  // Prefix of every Job's name; the name is the prefix and the job id
  // (JobNameForId). A DNS-1123 label of at most 30 characters.
  std::string job_name_prefix = "bnn-train-";
  // CPU and memory requests and limits of the container, as Kubernetes
  // quantities ("500m", "2", "4Gi"); empty: not set. A request may not
  // exceed its limit.
  std::string cpu_request = "1";
  std::string cpu_limit = "2";
  std::string memory_request = "2Gi";
  std::string memory_limit = "8Gi";
  // Node labels a pod's node must have (spec.nodeSelector).
  std::map<std::string, std::string> node_selector;
  // Service account of the training pods; empty: the namespace's default.
  // bnn-train calls no Kubernetes API, so no token is mounted either way.
  std::string service_account;
  // User and group the container runs as (the image's non-root bnn user).
  // >= 1.
  int64_t run_as_user = 10001;
  // The metadata store's URI (--metadata, e.g. postgres://...) comes from
  // this Secret and key, as the container's variable BNN_METADATA.
  std::string metadata_secret_name = "bnn-metadata";
  std::string metadata_secret_key = "uri";
  // The blob directory every replica and training pod shares: a
  // ReadWriteMany PersistentVolumeClaim mounted at `blob_mount_path`.
  std::string blob_pvc_name = "bnn-blobs";
  std::string blob_mount_path = "/var/lib/bnn/blobs";
  // Further environment variables of the container (plain values).
  std::map<std::string, std::string> env;
  // Pod failures retried before the Job fails (spec.backoffLimit); a retry
  // resumes from the job's last checkpoint. [0, 100].
  int backoff_limit = 2;
  // Longest a Job may run before Kubernetes stops it
  // (spec.activeDeadlineSeconds); 0: no limit. >= 0.
  int64_t active_deadline_seconds = 0;
  // A finished Job (and its pods' logs) is deleted by Kubernetes this long
  // after it ends (spec.ttlSecondsAfterFinished); -1: kept until deleted.
  // >= -1.
  int64_t ttl_seconds_after_finished = 86400;

  // InvalidArgument naming the field, its value and the bound.
  absl::Status Validate() const;
};

// `options` with the in-cluster values filled in: `api_server` from
// KUBERNETES_SERVICE_HOST/PORT (https://kubernetes.default.svc without
// them) if empty, `job_namespace` from `namespace_file` if empty
// (FailedPrecondition naming the file if it cannot be read).
absl::StatusOr<LauncherOptions> ResolveInCluster(LauncherOptions options);

// Options from a JSON object whose keys are LauncherOptions' field names
// (durations as numbers of seconds),
// applied over `defaults`, then validated. InvalidArgument naming the key
// for JSON that does not parse, an unknown key (listing the known ones) or
// a value of the wrong type; Validate()'s errors otherwise.
absl::StatusOr<LauncherOptions> ParseLauncherOptionsJson(
    absl::string_view json, const LauncherOptions& defaults = {});
// ParseLauncherOptionsJson of a file's contents; errors name the file.
absl::StatusOr<LauncherOptions> LoadLauncherOptionsFile(
    const std::string& path, const LauncherOptions& defaults = {});
// Applies one "key=value" (e.g. a repeated server flag): the value is the
// text itself for a string field, and JSON for the others ("2",
// "[\"a\",\"b\"]", "{\"k\":\"v\"}"). Not validated (call Validate() after
// the last one); errors as ParseLauncherOptionsJson's.
absl::Status ApplyLauncherOption(absl::string_view key_equals_value,
                                 LauncherOptions* options);

// The value of a Kubernetes quantity ("250m" = 0.25, "2Gi" = 2^31, "1e3"),
// InvalidArgument if `text` is not one.
absl::StatusOr<double> ParseQuantity(absl::string_view text);

// Whether `text` is a DNS-1123 label (lowercase alphanumerics and '-',
// starting and ending alphanumeric, at most 63 characters), a DNS-1123
// subdomain (labels joined by '.', at most 253), a label value (empty, or
// alphanumerics, '-', '_', '.', starting and ending alphanumeric, at most
// 63) and a label key ([DNS-1123 subdomain "/"] name, the name as a label
// value but non-empty).
bool IsDns1123Label(absl::string_view text);
bool IsDns1123Subdomain(absl::string_view text);
bool IsLabelValue(absl::string_view text);
bool IsLabelKey(absl::string_view text);

}  // namespace bnn::server::kubernetes

#endif  // BNN_SERVER_JOBS_KUBERNETES_LAUNCHER_OPTIONS_H_
