// Helpers shared by the server tests: scratch directories, child processes
// (the real bnn-server, prometheus) and small datasets.
#ifndef BNN_TESTS_SERVER_SERVER_TEST_UTIL_H_
#define BNN_TESTS_SERVER_SERVER_TEST_UTIL_H_

#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/time/time.h>
#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>

#include "bnn/data/dataset.h"
#include "bnn/io/snapshot.h"

namespace bnn::server::testutil {

// A fresh directory under the test's temporary directory, removed with its
// contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A child process with its stdout on a pipe (scanned by WaitForLine) and
// its stderr appended to a log file. Killed on destruction, and when the
// test process dies first.
class ChildProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      const std::vector<std::string>& argv, const std::string& log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Reads stdout until a line starting with `prefix`, and returns the rest
  // of that line. DeadlineExceeded after `timeout`, Unavailable if stdout
  // closes first.
  absl::StatusOr<std::string> WaitForLine(absl::string_view prefix,
                                          absl::Duration timeout);
  void Signal(int signal_number);
  // The exit status (128 + signal number if killed by a signal), or
  // DeadlineExceeded if the process still runs after `timeout`.
  absl::StatusOr<int> Wait(absl::Duration timeout);

 private:
  ChildProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}

  pid_t pid_;
  int stdout_fd_;
  std::string buffered_;
  bool exited_ = false;
};

// A loopback TCP port that was free a moment ago.
int PickFreePort();

// The contents of a file, or "" if it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// Matches an absl::Status (or the status of a StatusOr via .status()) with
// `code` whose message contains `substring`.
MATCHER_P2(StatusIs, code, substring, "") {
  *result_listener << "status is " << arg.ToString();
  return arg.code() == code &&
         arg.message().find(substring) != absl::string_view::npos;
}

// Matches a protobuf message equal to `expected` (maps compare as maps,
// whatever their serialisation order).
MATCHER_P(EqualsProto, expected, "") {
  *result_listener << "message is " << arg.ShortDebugString();
  return google::protobuf::util::MessageDifferencer::Equals(arg, expected);
}

// y = x^3 + noise, x uniform on [-4, 4] (SLANG App. F.1), one feature.
Dataset CubicDataset(int num_rows, uint64_t seed = 1);

// A SLANG snapshot of 4 hidden units trained one epoch on CubicDataset(20)
// with `seed`, recorded as trained on version 2 of ds-00000000000000aa.
Snapshot TinySnapshot(uint64_t seed);

}  // namespace bnn::server::testutil

#endif  // BNN_TESTS_SERVER_SERVER_TEST_UTIL_H_
