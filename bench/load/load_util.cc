#include "bench/load/load_util.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <unistd.h>
#include <utility>

#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_split.h>
#include <absl/strings/string_view.h>
#include <absl/strings/strip.h>
#include <grpc/grpc.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "tests/test_util/subprocess.h"

namespace bnn::bench {
namespace {

using ::bnn::testing::ReadFileOrEmpty;

// Nearest-rank percentile of sorted `v` (not empty), p in [0, 1].
double Percentile(const std::vector<double>& v, double p) {
  const size_t rank =
      static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

}  // namespace

nlohmann::json LatencySummary::ToJson() const {
  return {{"count", count},   {"mean_ms", mean_ms}, {"p50_ms", p50_ms},
          {"p90_ms", p90_ms}, {"p99_ms", p99_ms},   {"max_ms", max_ms}};
}

std::string LatencySummary::ToString() const {
  return absl::StrFormat("n=%d p50 %.2f p90 %.2f p99 %.2f max %.2f ms", count,
                         p50_ms, p90_ms, p99_ms, max_ms);
}

LatencySummary Summarize(std::vector<double>& seconds) {
  LatencySummary s;
  if (seconds.empty()) return s;
  std::sort(seconds.begin(), seconds.end());
  s.count = static_cast<int64_t>(seconds.size());
  s.mean_ms = 1e3 * std::accumulate(seconds.begin(), seconds.end(), 0.0) /
              static_cast<double>(seconds.size());
  s.p50_ms = 1e3 * Percentile(seconds, 0.50);
  s.p90_ms = 1e3 * Percentile(seconds, 0.90);
  s.p99_ms = 1e3 * Percentile(seconds, 0.99);
  s.max_ms = 1e3 * seconds.back();
  return s;
}

void CallTally::Add(const absl::Status& status, absl::Duration took) {
  absl::MutexLock lock(&mu_);
  Code& code = codes_[status.code()];
  if (code.seconds.empty()) {
    code.message = std::string(status.message().substr(0, 300));
  }
  code.seconds.push_back(absl::ToDoubleSeconds(took));
}

int64_t CallTally::total() const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [code, calls] : codes_) n += calls.seconds.size();
  return n;
}

int64_t CallTally::CountOtherThan(
    const std::vector<absl::StatusCode>& expected) const {
  absl::MutexLock lock(&mu_);
  int64_t other = 0;
  for (const auto& [code, calls] : codes_) {
    if (std::find(expected.begin(), expected.end(), code) == expected.end()) {
      other += calls.seconds.size();
    }
  }
  return other;
}

nlohmann::json CallTally::ToJson() const {
  absl::MutexLock lock(&mu_);
  nlohmann::json codes = nlohmann::json::object();
  int64_t n = 0;
  for (const auto& [code, calls] : codes_) {
    std::vector<double> seconds = calls.seconds;
    n += seconds.size();
    nlohmann::json entry = {{"count", seconds.size()},
                            {"latency", Summarize(seconds).ToJson()}};
    if (!calls.message.empty()) entry["message"] = calls.message;
    codes[absl::StatusCodeToString(code)] = std::move(entry);
  }
  return {{"calls", n}, {"codes", std::move(codes)}};
}

std::string CallTally::ToString() const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  std::string by_code;
  for (const auto& [code, calls] : codes_) {
    std::vector<double> seconds = calls.seconds;
    n += seconds.size();
    const LatencySummary latency = Summarize(seconds);
    absl::StrAppend(
        &by_code, absl::StrFormat(" %s=%d (p50 %.1f ms, max %.1f ms)",
                                  absl::StatusCodeToString(code), latency.count,
                                  latency.p50_ms, latency.max_ms));
  }
  return absl::StrCat("n=", n, by_code);
}

std::shared_ptr<grpc::Channel> OwnConnection(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                   args);
}

int64_t ReadRssKib(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmRSS:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    absl::ConsumeSuffix(&rest, "kB");
    int64_t kib = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kib)) return kib;
  }
  return -1;
}

double ProcessCpuSeconds(pid_t pid) {
  const std::string stat =
      ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
  // The command name, field 2, is in parentheses and may hold spaces.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  const std::vector<absl::string_view> fields = absl::StrSplit(
      absl::string_view(stat).substr(paren + 1), ' ', absl::SkipEmpty());
  // Fields 3.. follow: utime and stime are fields 14 and 15.
  int64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return -1;
  }
  return static_cast<double>(utime + stime) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

double MachineBusyCpuSeconds() {
  std::ifstream in("/proc/stat");
  std::string line;
  if (!std::getline(in, line) || !absl::StartsWith(line, "cpu ")) return -1;
  // user nice system idle iowait irq softirq steal ...
  const std::vector<absl::string_view> fields =
      absl::StrSplit(line, ' ', absl::SkipEmpty());
  int64_t busy = 0;
  for (size_t i = 1; i < fields.size() && i <= 8; ++i) {
    int64_t ticks = 0;
    if (!absl::SimpleAtoi(fields[i], &ticks)) return -1;
    if (i != 4 && i != 5) busy += ticks;
  }
  return static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace bnn::bench
