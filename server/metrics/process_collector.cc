#include "server/metrics/process_collector.h"

#include <dirent.h>
#include <fstream>
#include <prometheus/client_metric.h>
#include <prometheus/metric_type.h>
#include <sstream>
#include <sys/resource.h>
#include <unistd.h>
#include <utility>

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>

namespace bnn::server {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

prometheus::MetricFamily Single(std::string name, std::string help,
                                prometheus::MetricType type, double value) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
  return family;
}

prometheus::MetricFamily Gauge(std::string name, std::string help,
                               double value) {
  return Single(std::move(name), std::move(help), prometheus::MetricType::Gauge,
                value);
}

// Entries of /proc/self/fd, without "." and "..". The directory stream's
// own descriptor is among them, as in the other Prometheus clients.
std::optional<int64_t> CountOpenFds(const std::string& fd_dir) {
  DIR* dir = opendir(fd_dir.c_str());
  if (dir == nullptr) return std::nullopt;
  int64_t count = 0;
  while (const dirent* entry = readdir(dir)) {
    const absl::string_view name(entry->d_name);
    if (name != "." && name != "..") ++count;
  }
  closedir(dir);
  return count;
}

}  // namespace

absl::StatusOr<ProcStat> ParseProcStat(absl::string_view line,
                                       int64_t clock_ticks_per_second,
                                       int64_t page_bytes) {
  // "pid (comm) state ppid ...": fields from the state (field 3) on follow
  // the last ')'.
  const size_t close = line.rfind(')');
  if (close == absl::string_view::npos) {
    return absl::InvalidArgumentError("no ')' after the command name");
  }
  const std::vector<absl::string_view> fields = absl::StrSplit(
      line.substr(close + 1), absl::ByAnyChar(" \n"), absl::SkipEmpty());
  // fields[0] is field 3 of proc(5): utime is 14, stime 15, starttime 22,
  // vsize 23, rss 24.
  auto field = [&fields](int number, double* value) {
    const size_t index = static_cast<size_t>(number - 3);
    return index < fields.size() && absl::SimpleAtod(fields[index], value);
  };
  double utime = 0, stime = 0, start = 0, vsize = 0, rss = 0;
  if (!field(14, &utime) || !field(15, &stime) || !field(22, &start) ||
      !field(23, &vsize) || !field(24, &rss)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected at least 24 numeric fields, found ",
                     fields.size() + 2, " fields"));
  }
  const double ticks = static_cast<double>(clock_ticks_per_second);
  ProcStat stat;
  stat.cpu_seconds = (utime + stime) / ticks;
  stat.start_seconds_after_boot = start / ticks;
  stat.virtual_bytes = static_cast<int64_t>(vsize);
  stat.resident_bytes = static_cast<int64_t>(rss) * page_bytes;
  return stat;
}

absl::StatusOr<int64_t> ParseBootTime(absl::string_view proc_stat) {
  for (absl::string_view line : absl::StrSplit(proc_stat, '\n')) {
    if (!absl::ConsumePrefix(&line, "btime ")) continue;
    int64_t seconds = 0;
    if (absl::SimpleAtoi(line, &seconds)) return seconds;
  }
  return absl::InvalidArgumentError("no btime line");
}

ProcessCollector::ProcessCollector(std::string proc_self, std::string proc_stat)
    : proc_self_(std::move(proc_self)) {
  const std::optional<std::string> stat_line = ReadFile(proc_self_ + "/stat");
  const std::optional<std::string> system = ReadFile(proc_stat);
  if (!stat_line.has_value() || !system.has_value()) return;
  const absl::StatusOr<ProcStat> stat =
      ParseProcStat(*stat_line, sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE));
  const absl::StatusOr<int64_t> boot = ParseBootTime(*system);
  if (stat.ok() && boot.ok()) {
    start_time_seconds_ =
        static_cast<double>(*boot) + stat->start_seconds_after_boot;
  }
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  std::vector<prometheus::MetricFamily> families;
  if (const std::optional<std::string> line = ReadFile(proc_self_ + "/stat")) {
    const absl::StatusOr<ProcStat> stat =
        ParseProcStat(*line, sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE));
    if (stat.ok()) {
      families.push_back(Single("process_cpu_seconds_total",
                                "Total user and system CPU time spent in "
                                "seconds.",
                                prometheus::MetricType::Counter,
                                stat->cpu_seconds));
      families.push_back(Gauge("process_resident_memory_bytes",
                               "Resident memory size in bytes.",
                               static_cast<double>(stat->resident_bytes)));
      families.push_back(Gauge("process_virtual_memory_bytes",
                               "Virtual memory size in bytes.",
                               static_cast<double>(stat->virtual_bytes)));
    }
  }
  if (const std::optional<int64_t> fds = CountOpenFds(proc_self_ + "/fd")) {
    families.push_back(Gauge("process_open_fds",
                             "Number of open file descriptors.",
                             static_cast<double>(*fds)));
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY) {
    families.push_back(Gauge("process_max_fds",
                             "Maximum number of open file descriptors.",
                             static_cast<double>(limit.rlim_cur)));
  }
  if (start_time_seconds_.has_value()) {
    families.push_back(Gauge("process_start_time_seconds",
                             "Start time of the process since unix epoch in "
                             "seconds.",
                             *start_time_seconds_));
  }
  return families;
}

}  // namespace bnn::server
