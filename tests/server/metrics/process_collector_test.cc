#include "server/metrics/process_collector.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;

// proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags minflt
// cminflt majflt cmajflt utime stime cutime cstime priority nice
// num_threads itrealvalue starttime vsize rss ...
constexpr char kStat[] =
    "4242 (bnn ) (x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 150 0 0 20 0 "
    "12 0 5000 1234567890 3000 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 "
    "0 17 1 0 0 0 0 0\n";

std::map<std::string, double> Values(const ProcessCollector& collector) {
  std::map<std::string, double> values;
  for (const prometheus::MetricFamily& family : collector.Collect()) {
    EXPECT_EQ(family.metric.size(), 1u) << family.name;
    const prometheus::ClientMetric& metric = family.metric.front();
    values[family.name] = family.type == prometheus::MetricType::Counter
                              ? metric.counter.value
                              : metric.gauge.value;
  }
  return values;
}

TEST(ProcessCollectorTest, ParsesProcStatWhateverTheCommandName) {
  const absl::StatusOr<ProcStat> stat = ParseProcStat(kStat, 100, 4096);
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_DOUBLE_EQ(stat->cpu_seconds, 4.0);
  EXPECT_DOUBLE_EQ(stat->start_seconds_after_boot, 50.0);
  EXPECT_EQ(stat->virtual_bytes, 1234567890);
  EXPECT_EQ(stat->resident_bytes, 3000 * 4096);
  EXPECT_THAT(ParseProcStat("4242 (bnn) S 1 2 3", 100, 4096).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "fields"));
  EXPECT_THAT(ParseProcStat("no parenthesis", 100, 4096).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "')'"));
}

TEST(ProcessCollectorTest, ParsesBootTime) {
  EXPECT_EQ(*ParseBootTime("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n"),
            1700000000);
  EXPECT_FALSE(ParseBootTime("cpu 1 2 3\n").ok());
}

TEST(ProcessCollectorTest, ReadsAFakeProc) {
  TempDir dir;
  const std::string self = dir.path() + "/self";
  std::filesystem::create_directories(self + "/fd");
  for (const char* fd : {"0", "1", "2"}) std::ofstream(self + "/fd/" + fd);
  std::ofstream(self + "/stat") << kStat;
  std::ofstream(dir.path() + "/stat") << "btime 1700000000\n";
  const ProcessCollector collector(self, dir.path() + "/stat");
  const std::map<std::string, double> values = Values(collector);
  EXPECT_DOUBLE_EQ(values.at("process_virtual_memory_bytes"), 1234567890);
  EXPECT_GT(values.at("process_resident_memory_bytes"), 0);
  EXPECT_GT(values.at("process_cpu_seconds_total"), 0);
  EXPECT_EQ(values.at("process_open_fds"), 3);
  EXPECT_GT(values.at("process_max_fds"), 0);
  EXPECT_GT(values.at("process_start_time_seconds"), 1700000000);
}

TEST(ProcessCollectorTest, LeavesOutWhatItCannotRead) {
  TempDir dir;
  const ProcessCollector collector(dir.path() + "/missing",
                                   dir.path() + "/missing");
  const std::map<std::string, double> values = Values(collector);
  EXPECT_EQ(values.count("process_resident_memory_bytes"), 0u);
  EXPECT_EQ(values.count("process_start_time_seconds"), 0u);
  EXPECT_EQ(values.count("process_open_fds"), 0u);
}

TEST(ProcessCollectorTest, DescribesThisProcess) {
  const std::map<std::string, double> values = Values(ProcessCollector());
  EXPECT_GT(values.at("process_resident_memory_bytes"), 1 << 20);
  EXPECT_GE(values.at("process_virtual_memory_bytes"),
            values.at("process_resident_memory_bytes"));
  EXPECT_GE(values.at("process_open_fds"), 3);
  EXPECT_GE(values.at("process_max_fds"), values.at("process_open_fds"));
  EXPECT_GE(values.at("process_cpu_seconds_total"), 0);
  const double now = absl::ToUnixSeconds(absl::Now());
  EXPECT_LE(values.at("process_start_time_seconds"), now + 1);
  EXPECT_GT(values.at("process_start_time_seconds"), now - 600);
}

}  // namespace
}  // namespace bnn::server
