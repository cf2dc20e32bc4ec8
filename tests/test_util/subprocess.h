// Child processes for tests and bench programs: any program as a child
// (ChildProcess, RunCommand) and the real bnn-server on a free loopback port
// (ServerProcess). No gtest here, so bench/ programs (the crash test) use the
// same harness as the tests.
#ifndef BNN_TESTS_TEST_UTIL_SUBPROCESS_H_
#define BNN_TESTS_TEST_UTIL_SUBPROCESS_H_

#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/time/time.h>

namespace bnn::testing {

// The contents of a file, or "" if it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// A loopback TCP port that was free a moment ago. Aborts if there is none.
int PickFreePort();

// A child process: stdin /dev/null, stdout on a pipe (WaitForLine, Stdout),
// stderr appended to a log file. Killed (SIGKILL) on destruction, and by the
// kernel when the process that started it dies first, so a crashing test
// cannot leave children behind.
class ChildProcess {
 public:
  // Starts argv[0] (a path) with `argv`.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      const std::vector<std::string>& argv, const std::string& log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The rest of the first stdout line starting with `prefix` (lines already
  // seen count too). DeadlineExceeded after `timeout`, Unavailable if stdout
  // closes first.
  absl::StatusOr<std::string> WaitForLine(absl::string_view prefix,
                                          absl::Duration timeout);
  // What the child wrote to stdout so far (as read by WaitForLine and Wait).
  const std::string& Stdout() const { return stdout_; }
  void Signal(int signal_number);
  // The exit status (128 + signal number if killed by a signal), or
  // DeadlineExceeded if the process still runs after `timeout`. Reads stdout
  // meanwhile, so a chatty child cannot block on a full pipe.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  // SIGKILL, and reaps the process.
  void Kill();
  // False once the process has exited.
  bool IsRunning();

 private:
  ChildProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}
  // Appends what stdout has to stdout_, waiting up to `timeout` for data.
  void ReadStdout(absl::Duration timeout);
  void Reaped(int wait_status);

  pid_t pid_;
  int stdout_fd_;
  std::string stdout_;
  bool stdout_closed_ = false;
  bool exited_ = false;
  int exit_code_ = -1;
};

struct CommandResult {
  // The exit status, or 128 + signal number if the process was killed.
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `argv` (argv[0] is the program path) to completion, its stderr
// captured through a file in `scratch_dir`. DeadlineExceeded (after killing
// it) if it runs longer than `timeout`.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::string& scratch_dir,
                                         absl::Duration timeout);

// The real bnn-server on a free loopback port. The destructor stops it
// (SIGTERM, then SIGKILL after 10 s).
class ServerProcess {
 public:
  // Starts `binary --listen 127.0.0.1:0 --data-dir DATA_DIR
  // --metrics-listen '' --training-nice 0 EXTRA_FLAGS...` (later flags win;
  // stderr appended to `log_path`) and waits up to `startup_timeout` for the
  // line "bnn-server listening on HOST:PORT". Training keeps the server's
  // priority: tests wait for jobs with timeouts, and at the default nice 10
  // a job lost its core to the tests ctest ran beside it (an ASan run's jobs
  // missed 60 s waits on a loaded machine); a test of priorities passes
  // --training-nice itself.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::string& binary, const std::string& data_dir,
      const std::string& log_path,
      const std::vector<std::string>& extra_flags = {},
      absl::Duration startup_timeout = absl::Seconds(30));
  // The command line Start runs.
  static std::vector<std::string> Command(
      const std::string& binary, const std::string& data_dir,
      const std::vector<std::string>& extra_flags = {});
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  // "http://HOST:PORT/metrics" with --metrics-listen set, else "".
  const std::string& metrics_url() const { return metrics_url_; }
  pid_t pid() const { return process_->pid(); }
  ChildProcess& process() { return *process_; }
  // Sends `signal_number` and returns the exit status; DeadlineExceeded if
  // the process still runs after `timeout`.
  absl::StatusOr<int> Stop(int signal_number,
                           absl::Duration timeout = absl::Seconds(30));
  // kill -9, and reaps the process.
  void Kill() { process_->Kill(); }
  bool IsRunning() { return process_->IsRunning(); }
  // What the server wrote to stderr (its log) so far.
  std::string Log() const { return ReadFileOrEmpty(log_path_); }

 private:
  ServerProcess(std::unique_ptr<ChildProcess> process, std::string log_path)
      : process_(std::move(process)), log_path_(std::move(log_path)) {}

  std::unique_ptr<ChildProcess> process_;
  std::string log_path_;
  std::string address_;
  std::string metrics_url_;
};

}  // namespace bnn::testing

#endif  // BNN_TESTS_TEST_UTIL_SUBPROCESS_H_
