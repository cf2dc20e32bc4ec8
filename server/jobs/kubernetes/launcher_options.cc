#include "server/jobs/kubernetes/launcher_options.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>
#include <nlohmann/json.hpp>

#include "bnn/status.h"

namespace bnn::server::kubernetes {
namespace {

using Json = nlohmann::json;

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("kubernetes launcher option ", field, ": ", what));
}

bool IsAlnum(char c) { return absl::ascii_isalnum(static_cast<uint8_t>(c)); }

// ---- The field table: each option's JSON key and how a JSON value sets
// it. One table for the config file and the "key=value" overrides.

using Setter = std::function<absl::Status(const Json&, LauncherOptions*)>;

struct Field {
  const char* key;
  // Whether an override's value is the raw text (string fields) rather
  // than JSON.
  bool is_string;
  Setter set;
};

Field StringField(const char* key, std::string LauncherOptions::*member) {
  return {key, true, [key, member](const Json& value, LauncherOptions* o) {
            if (!value.is_string()) return Bad(key, "must be a string");
            o->*member = value.get<std::string>();
            return absl::OkStatus();
          }};
}

template <typename Int>
Field IntField(const char* key, Int LauncherOptions::*member) {
  return {key, false, [key, member](const Json& value, LauncherOptions* o) {
            if (!value.is_number_integer()) {
              return Bad(key, "must be an integer");
            }
            const int64_t v = value.get<int64_t>();
            if (v < std::numeric_limits<Int>::min() ||
                v > std::numeric_limits<Int>::max()) {
              return Bad(key, absl::StrCat(v, " is out of range"));
            }
            o->*member = static_cast<Int>(v);
            return absl::OkStatus();
          }};
}

Field SecondsField(const char* key, absl::Duration LauncherOptions::*member) {
  return {key, false, [key, member](const Json& value, LauncherOptions* o) {
            if (!value.is_number()) {
              return Bad(key, "must be a number of seconds");
            }
            const double seconds = value.get<double>();
            if (!std::isfinite(seconds)) return Bad(key, "must be finite");
            o->*member = absl::Seconds(seconds);
            return absl::OkStatus();
          }};
}

Field ListField(const char* key,
                std::vector<std::string> LauncherOptions::*member) {
  return {key, false, [key, member](const Json& value, LauncherOptions* o) {
            if (!value.is_array()) {
              return Bad(key, "must be a list of strings");
            }
            std::vector<std::string> items;
            for (const Json& item : value) {
              if (!item.is_string()) {
                return Bad(key, "must be a list of strings");
              }
              items.push_back(item.get<std::string>());
            }
            o->*member = std::move(items);
            return absl::OkStatus();
          }};
}

Field MapField(const char* key,
               std::map<std::string, std::string> LauncherOptions::*member) {
  return {key, false, [key, member](const Json& value, LauncherOptions* o) {
            if (!value.is_object()) {
              return Bad(key, "must be an object of strings");
            }
            std::map<std::string, std::string> items;
            for (const auto& [name, item] : value.items()) {
              if (!item.is_string()) {
                return Bad(absl::StrCat(key, ".", name), "must be a string");
              }
              items[name] = item.get<std::string>();
            }
            o->*member = std::move(items);
            return absl::OkStatus();
          }};
}

const std::vector<Field>& Fields() {
  using O = LauncherOptions;
  static const auto* fields = new std::vector<Field>{
      StringField("api_server", &O::api_server),
      StringField("token_file", &O::token_file),
      StringField("ca_file", &O::ca_file),
      StringField("job_namespace", &O::job_namespace),
      StringField("namespace_file", &O::namespace_file),
      SecondsField("connect_timeout", &O::connect_timeout),
      SecondsField("request_timeout", &O::request_timeout),
      IntField("max_response_bytes", &O::max_response_bytes),
      SecondsField("status_poll_interval", &O::status_poll_interval),
      StringField("image", &O::image),
      StringField("image_pull_policy", &O::image_pull_policy),
      ListField("command", &O::command),
      ListField("args", &O::args),
      StringField("job_name_prefix", &O::job_name_prefix),
      StringField("cpu_request", &O::cpu_request),
      StringField("cpu_limit", &O::cpu_limit),
      StringField("memory_request", &O::memory_request),
      StringField("memory_limit", &O::memory_limit),
      MapField("node_selector", &O::node_selector),
      StringField("service_account", &O::service_account),
      IntField("run_as_user", &O::run_as_user),
      StringField("metadata_secret_name", &O::metadata_secret_name),
      StringField("metadata_secret_key", &O::metadata_secret_key),
      StringField("blob_pvc_name", &O::blob_pvc_name),
      StringField("blob_mount_path", &O::blob_mount_path),
      MapField("env", &O::env),
      IntField("backoff_limit", &O::backoff_limit),
      IntField("active_deadline_seconds", &O::active_deadline_seconds),
      IntField("ttl_seconds_after_finished", &O::ttl_seconds_after_finished),
  };
  return *fields;
}

const Field* FindField(absl::string_view key) {
  for (const Field& field : Fields()) {
    if (key == field.key) return &field;
  }
  return nullptr;
}

absl::Status UnknownKey(absl::string_view key) {
  std::vector<std::string> known;
  for (const Field& field : Fields()) known.push_back(field.key);
  return Bad(key, absl::StrCat("unknown key; the known keys are ",
                               absl::StrJoin(known, ", ")));
}

// Secret keys: alphanumerics, '-', '_', '.'; at most 253.
bool IsConfigKey(absl::string_view text) {
  if (text.empty() || text.size() > 253) return false;
  for (char c : text) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// C identifiers, as environment variable names are written.
bool IsEnvName(absl::string_view text) {
  if (text.empty() || absl::ascii_isdigit(static_cast<uint8_t>(text[0]))) {
    return false;
  }
  for (char c : text) {
    if (!IsAlnum(c) && c != '_') return false;
  }
  return true;
}

absl::Status CheckQuantityPair(absl::string_view request_key,
                               const std::string& request,
                               absl::string_view limit_key,
                               const std::string& limit) {
  double request_value = 0, limit_value = 0;
  if (!request.empty()) {
    absl::StatusOr<double> v = ParseQuantity(request);
    if (!v.ok()) return Bad(request_key, v.status().message());
    request_value = *v;
  }
  if (!limit.empty()) {
    absl::StatusOr<double> v = ParseQuantity(limit);
    if (!v.ok()) return Bad(limit_key, v.status().message());
    limit_value = *v;
  }
  if (!request.empty() && !limit.empty() && request_value > limit_value) {
    return Bad(request_key, absl::StrCat("\"", request, "\" exceeds ",
                                         limit_key, " \"", limit, "\""));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsDns1123Label(absl::string_view text) {
  if (text.empty() || text.size() > 63) return false;
  for (char c : text) {
    if (!(absl::ascii_isdigit(static_cast<uint8_t>(c)) ||
          (c >= 'a' && c <= 'z') || c == '-')) {
      return false;
    }
  }
  return text.front() != '-' && text.back() != '-';
}

bool IsDns1123Subdomain(absl::string_view text) {
  if (text.empty() || text.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(text, '.')) {
    if (!IsDns1123Label(label)) return false;
  }
  return true;
}

bool IsLabelValue(absl::string_view text) {
  if (text.empty()) return true;
  if (text.size() > 63 || !IsAlnum(text.front()) || !IsAlnum(text.back())) {
    return false;
  }
  for (char c : text) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

bool IsLabelKey(absl::string_view text) {
  const size_t slash = text.rfind('/');
  if (slash != absl::string_view::npos &&
      !IsDns1123Subdomain(text.substr(0, slash))) {
    return false;
  }
  const absl::string_view name =
      slash == absl::string_view::npos ? text : text.substr(slash + 1);
  return !name.empty() && IsLabelValue(name);
}

absl::StatusOr<double> ParseQuantity(absl::string_view text) {
  static constexpr std::pair<const char*, double> kSuffixes[] = {
      {"Ki", 1024.0},
      {"Mi", 1024.0 * 1024},
      {"Gi", 1024.0 * 1024 * 1024},
      {"Ti", 1024.0 * 1024 * 1024 * 1024},
      {"Pi", 1024.0 * 1024 * 1024 * 1024 * 1024},
      {"Ei", 1024.0 * 1024 * 1024 * 1024 * 1024 * 1024},
      {"n", 1e-9},
      {"u", 1e-6},
      {"m", 1e-3},
      {"k", 1e3},
      {"M", 1e6},
      {"G", 1e9},
      {"T", 1e12},
      {"P", 1e15},
      {"E", 1e18}};
  const auto invalid = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text,
        "\" is not a Kubernetes quantity (a number with an optional suffix: "
        "m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent e3)"));
  };
  absl::string_view number = text;
  double scale = 1;
  for (const auto& [suffix, value] : kSuffixes) {
    if (absl::ConsumeSuffix(&number, suffix)) {
      scale = value;
      break;
    }
  }
  if (scale == 1) {
    // A decimal exponent: "1e3", "5E-2".
    const size_t e = number.find_first_of("eE");
    if (e != absl::string_view::npos) {
      int exponent = 0;
      if (!absl::SimpleAtoi(number.substr(e + 1), &exponent) ||
          number.substr(e + 1).empty()) {
        return invalid();
      }
      scale = std::pow(10.0, exponent);
      number = number.substr(0, e);
    }
  }
  // Digits with at most one '.', at least one digit, an optional sign.
  absl::string_view digits = number;
  absl::ConsumePrefix(&digits, "+") || absl::ConsumePrefix(&digits, "-");
  int dots = 0, count = 0;
  for (char c : digits) {
    if (c == '.') {
      ++dots;
    } else if (absl::ascii_isdigit(static_cast<uint8_t>(c))) {
      ++count;
    } else {
      return invalid();
    }
  }
  double value = 0;
  if (dots > 1 || count == 0 || !absl::SimpleAtod(number, &value)) {
    return invalid();
  }
  return value * scale;
}

absl::Status LauncherOptions::Validate() const {
  if (!api_server.empty()) {
    if (!absl::StartsWith(api_server, "https://") || api_server.size() == 8) {
      return Bad("api_server",
                 absl::StrCat("\"", api_server,
                              "\" must be https://HOST[:PORT] (or empty for "
                              "the in-cluster address)"));
    }
  }
  if (token_file.empty()) return Bad("token_file", "must not be empty");
  if (ca_file.empty()) return Bad("ca_file", "must not be empty");
  if (!job_namespace.empty() && !IsDns1123Label(job_namespace)) {
    return Bad("job_namespace",
               absl::StrCat("\"", job_namespace,
                            "\" is not a DNS-1123 label (lowercase "
                            "alphanumerics and '-', at most 63)"));
  }
  if (job_namespace.empty() && namespace_file.empty()) {
    return Bad("namespace_file",
               "must not be empty when job_namespace is empty");
  }
  if (connect_timeout <= absl::ZeroDuration() ||
      connect_timeout > absl::Minutes(1)) {
    return Bad("connect_timeout",
               absl::StrCat(absl::FormatDuration(connect_timeout),
                            " is outside (0, 60s]"));
  }
  if (request_timeout < connect_timeout ||
      request_timeout > absl::Minutes(10)) {
    return Bad("request_timeout",
               absl::StrCat(absl::FormatDuration(request_timeout),
                            " is outside [connect_timeout (",
                            absl::FormatDuration(connect_timeout), "), 600s]"));
  }
  if (max_response_bytes < 4096 || max_response_bytes > (int64_t{256} << 20)) {
    return Bad("max_response_bytes", absl::StrCat(max_response_bytes,
                                                  " is outside [4096, 256 MiB "
                                                  "(268435456)]"));
  }
  if (status_poll_interval < absl::Seconds(1) ||
      status_poll_interval > absl::Minutes(10)) {
    return Bad("status_poll_interval",
               absl::StrCat(absl::FormatDuration(status_poll_interval),
                            " is outside [1s, 600s]"));
  }
  if (image.empty()) {
    return Bad("image", "must name the bnn-serve image (it runs bnn-train)");
  }
  if (image_pull_policy != "Always" && image_pull_policy != "IfNotPresent" &&
      image_pull_policy != "Never") {
    return Bad("image_pull_policy",
               absl::StrCat("\"", image_pull_policy,
                            "\" is not Always, IfNotPresent or Never"));
  }
  if (command.empty() || command[0].empty()) {
    return Bad("command", "must name the program (bnn-train)");
  }
  bool has_job_id = false;
  for (const std::string& arg : args) {
    has_job_id |= absl::StrContains(arg, "{job_id}");
    // Every "{...}" must be a known placeholder.
    absl::string_view rest = arg;
    for (size_t open = rest.find('{'); open != absl::string_view::npos;
         open = rest.find('{')) {
      const size_t close = rest.find('}', open);
      const absl::string_view name = rest.substr(
          open, close == absl::string_view::npos ? absl::string_view::npos
                                                 : close - open + 1);
      if (name != "{job_id}" && name != "{blob_dir}" && name != "{threads}") {
        return Bad("args", absl::StrCat("\"", arg, "\" has ", name,
                                        "; the placeholders are {job_id}, "
                                        "{blob_dir} and {threads}"));
      }
      rest = rest.substr(close + 1);
    }
  }
  if (!has_job_id) {
    return Bad("args",
               "no argument has {job_id} (bnn-train --job-id={job_id})");
  }
  if (job_name_prefix.size() > 30 ||
      (!job_name_prefix.empty() &&
       !IsDns1123Label(absl::StrCat(job_name_prefix, "x")))) {
    return Bad("job_name_prefix",
               absl::StrCat("\"", job_name_prefix,
                            "\" must be at most 30 lowercase alphanumerics "
                            "or '-', starting with a letter or digit"));
  }
  BNN_RETURN_IF_ERROR(
      CheckQuantityPair("cpu_request", cpu_request, "cpu_limit", cpu_limit));
  BNN_RETURN_IF_ERROR(CheckQuantityPair("memory_request", memory_request,
                                        "memory_limit", memory_limit));
  for (const auto& [key, value] : node_selector) {
    if (!IsLabelKey(key) || !IsLabelValue(value)) {
      return Bad("node_selector",
                 absl::StrCat("\"", key, "=", value,
                              "\" is not a label key and value"));
    }
  }
  if (!service_account.empty() && !IsDns1123Subdomain(service_account)) {
    return Bad(
        "service_account",
        absl::StrCat("\"", service_account, "\" is not a DNS-1123 subdomain"));
  }
  if (run_as_user < 1) {
    return Bad("run_as_user",
               absl::StrCat(run_as_user, " must be >= 1 (not root)"));
  }
  if (!IsDns1123Subdomain(metadata_secret_name)) {
    return Bad("metadata_secret_name",
               absl::StrCat("\"", metadata_secret_name,
                            "\" is not a DNS-1123 subdomain"));
  }
  if (!IsConfigKey(metadata_secret_key)) {
    return Bad("metadata_secret_key",
               absl::StrCat("\"", metadata_secret_key,
                            "\" is not a Secret key (alphanumerics, '-', "
                            "'_', '.')"));
  }
  if (!IsDns1123Subdomain(blob_pvc_name)) {
    return Bad("blob_pvc_name", absl::StrCat("\"", blob_pvc_name,
                                             "\" is not a DNS-1123 subdomain"));
  }
  if (!absl::StartsWith(blob_mount_path, "/") ||
      absl::StrContains(blob_mount_path, ":")) {
    return Bad("blob_mount_path",
               absl::StrCat("\"", blob_mount_path,
                            "\" must be an absolute path without ':'"));
  }
  for (const auto& [name, value] : env) {
    if (!IsEnvName(name) || name == "BNN_METADATA") {
      return Bad("env",
                 absl::StrCat("\"", name,
                              "\" is not a variable name (letters, digits, "
                              "'_'; BNN_METADATA is set from the Secret)"));
    }
  }
  if (backoff_limit < 0 || backoff_limit > 100) {
    return Bad("backoff_limit",
               absl::StrCat(backoff_limit, " is outside [0, 100]"));
  }
  if (active_deadline_seconds < 0) {
    return Bad("active_deadline_seconds",
               absl::StrCat(active_deadline_seconds, " must be >= 0"));
  }
  if (ttl_seconds_after_finished < -1) {
    return Bad("ttl_seconds_after_finished",
               absl::StrCat(ttl_seconds_after_finished,
                            " must be >= -1 (-1: never deleted)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<LauncherOptions> ResolveInCluster(LauncherOptions options) {
  if (options.api_server.empty()) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (host != nullptr && *host != '\0') {
      // An IPv6 service address needs brackets in a URL.
      const bool ipv6 = absl::StrContains(host, ":");
      options.api_server =
          absl::StrCat("https://", ipv6 ? "[" : "", host, ipv6 ? "]" : "",
                       port != nullptr && *port != '\0' ? ":" : "",
                       port != nullptr ? port : "");
    } else {
      options.api_server = "https://kubernetes.default.svc";
    }
  }
  if (options.job_namespace.empty()) {
    std::ifstream file(options.namespace_file);
    std::stringstream text;
    text << file.rdbuf();
    const std::string ns(absl::StripAsciiWhitespace(text.str()));
    if (!file || ns.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kubernetes launcher: job_namespace is empty and namespace_file ",
          options.namespace_file,
          " cannot be read (set job_namespace outside a cluster)"));
    }
    options.job_namespace = ns;
  }
  return options;
}

absl::StatusOr<LauncherOptions> ParseLauncherOptionsJson(
    absl::string_view json, const LauncherOptions& defaults) {
  Json parsed = Json::parse(json.begin(), json.end(), nullptr,
                            /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return absl::InvalidArgumentError(
        "kubernetes launcher options: not valid JSON");
  }
  if (!parsed.is_object()) {
    return absl::InvalidArgumentError(
        "kubernetes launcher options: must be a JSON object of options");
  }
  LauncherOptions options = defaults;
  for (const auto& [key, value] : parsed.items()) {
    const Field* field = FindField(key);
    if (field == nullptr) return UnknownKey(key);
    BNN_RETURN_IF_ERROR(field->set(value, &options));
  }
  BNN_RETURN_IF_ERROR(options.Validate());
  return options;
}

absl::StatusOr<LauncherOptions> LoadLauncherOptionsFile(
    const std::string& path, const LauncherOptions& defaults) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("kubernetes launcher config file ",
                                            path, " cannot be read"));
  }
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<LauncherOptions> options =
      ParseLauncherOptionsJson(text.str(), defaults);
  if (!options.ok()) {
    return absl::Status(options.status().code(),
                        absl::StrCat(path, ": ", options.status().message()));
  }
  return options;
}

absl::Status ApplyLauncherOption(absl::string_view key_equals_value,
                                 LauncherOptions* options) {
  const size_t equals = key_equals_value.find('=');
  if (equals == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubernetes launcher option \"", key_equals_value,
                     "\" is not key=value"));
  }
  const absl::string_view key = key_equals_value.substr(0, equals);
  const absl::string_view text = key_equals_value.substr(equals + 1);
  const Field* field = FindField(key);
  if (field == nullptr) return UnknownKey(key);
  if (field->is_string) return field->set(Json(std::string(text)), options);
  Json value = Json::parse(text.begin(), text.end(), nullptr,
                           /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return Bad(key, absl::StrCat("\"", text, "\" is not a JSON value"));
  }
  return field->set(value, options);
}

}  // namespace bnn::server::kubernetes
