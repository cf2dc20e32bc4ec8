// Child processes for integration tests: the real bnn-server on a free
// loopback port, and one-shot runs of bnnctl with captured output.
#ifndef BNN_TESTS_INTEGRATION_SUBPROCESS_H_
#define BNN_TESTS_INTEGRATION_SUBPROCESS_H_

#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include <absl/status/statusor.h>
#include <absl/time/time.h>

namespace bnn::integration {

// A fresh directory under the test's temporary directory, removed with its
// contents on destruction.
class TempDir {
 public:
  static absl::StatusOr<std::unique_ptr<TempDir>> Create();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

struct CommandResult {
  // The exit status, or 128 + signal number if the process was killed.
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `argv` (argv[0] is the program path) to completion with stdout and
// stderr captured through files in `scratch_dir`. DeadlineExceeded (after
// killing it) if it runs longer than `timeout`.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::string& scratch_dir,
                                         absl::Duration timeout);

// A running bnn-server. Its stdout and stderr go to a log file; the
// destructor stops it (SIGTERM, then SIGKILL after a grace period). The child
// is also killed if the test process dies first, so a crashing test cannot
// leave a server behind.
class ServerProcess {
 public:
  // Starts `binary --listen 127.0.0.1:0 --data-dir DATA_DIR
  // --metrics-listen '' EXTRA_ARGS...` and waits (up to `startup_timeout`)
  // for the line "bnn-server listening on 127.0.0.1:PORT".
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::string& binary, const std::string& data_dir,
      const std::string& log_path,
      absl::Duration startup_timeout = absl::Seconds(30),
      const std::vector<std::string>& extra_args = {});
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }
  // Sends SIGKILL and reaps the process.
  void Kill();
  // False once the process has exited.
  bool IsRunning();
  // Everything the server wrote so far.
  std::string Log() const;

 private:
  ServerProcess(pid_t pid, std::string log_path)
      : pid_(pid), log_path_(std::move(log_path)) {}
  void Stop();

  pid_t pid_;
  std::string log_path_;
  std::string address_;
  bool exited_ = false;
};

// The contents of a file, or "" if it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

}  // namespace bnn::integration

#endif  // BNN_TESTS_INTEGRATION_SUBPROCESS_H_
