// The process_* metrics of the Prometheus client conventions, read from
// /proc when scraped (prometheus-cpp has no process collector):
//
//   process_cpu_seconds_total      user + system CPU time
//   process_resident_memory_bytes  resident set size
//   process_virtual_memory_bytes   virtual memory size
//   process_open_fds               open file descriptors
//   process_max_fds                the open-files limit (soft RLIMIT_NOFILE)
//   process_start_time_seconds     start time, seconds since the Unix epoch
//
// Linux only. A value that cannot be read is left out of the scrape, never
// reported as 0.
#ifndef BNN_SERVER_METRICS_PROCESS_COLLECTOR_H_
#define BNN_SERVER_METRICS_PROCESS_COLLECTOR_H_

#include <cstdint>
#include <optional>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <string>
#include <vector>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

namespace bnn::server {

// What /proc/<pid>/stat says about CPU time and memory.
struct ProcStat {
  double cpu_seconds = 0;
  double start_seconds_after_boot = 0;
  int64_t virtual_bytes = 0;
  int64_t resident_bytes = 0;
};

// Parses the one line of /proc/<pid>/stat (proc(5)); the command name in
// parentheses may hold spaces and parentheses. InvalidArgument if the line
// has too few fields.
absl::StatusOr<ProcStat> ParseProcStat(absl::string_view line,
                                       int64_t clock_ticks_per_second,
                                       int64_t page_bytes);
// The "btime" line of /proc/stat: boot time, seconds since the Unix epoch.
absl::StatusOr<int64_t> ParseBootTime(absl::string_view proc_stat);

// Thread-safe (reads files only).
class ProcessCollector final : public prometheus::Collectable {
 public:
  // `proc_self` is the process's /proc directory and `proc_stat` the
  // system's /proc/stat; tests point them at fakes.
  explicit ProcessCollector(std::string proc_self = "/proc/self",
                            std::string proc_stat = "/proc/stat");

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::string proc_self_;
  // Computed once: the start time does not change.
  std::optional<double> start_time_seconds_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_METRICS_PROCESS_COLLECTOR_H_
