#include "tests/integration/subprocess.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <signal.h>
#include <sstream>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>
#include <utility>

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>

namespace bnn::integration {
namespace {

absl::Status ErrnoError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Starts argv with stdout and stderr appended to the given files (the same
// path for both merges them). The child dies with the test process.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv,
                            const std::string& out_path,
                            const std::string& err_path) {
  if (argv.empty()) return absl::InvalidArgumentError("argv is empty");
  // Everything that allocates happens before fork(): the child of a
  // multi-threaded process may only call async-signal-safe functions.
  std::vector<char*> args;
  for (const std::string& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const int out_fd =
      open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0) return ErrnoError(absl::StrCat("open ", out_path));
  int err_fd = out_fd;
  if (err_path != out_path) {
    err_fd =
        open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (err_fd < 0) {
      close(out_fd);
      return ErrnoError(absl::StrCat("open ", err_path));
    }
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may have died between fork() and prctl().
    if (getppid() != parent) _exit(127);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  const int fork_errno = errno;
  close(out_fd);
  if (err_fd != out_fd) close(err_fd);
  if (pid < 0) {
    errno = fork_errno;
    return ErrnoError("fork");
  }
  return pid;
}

int ExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

// Waits for `pid` until `deadline`; true with its wait status if it exited.
bool WaitUntil(pid_t pid, absl::Time deadline, int* wait_status) {
  while (true) {
    const pid_t done = waitpid(pid, wait_status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) return done == pid;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

}  // namespace

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::unique_ptr<TempDir>> TempDir::Create() {
  std::error_code error;
  std::filesystem::path base = std::filesystem::temp_directory_path(error);
  if (const char* test_tmpdir = getenv("TEST_TMPDIR")) base = test_tmpdir;
  std::string pattern = (base / "bnn-integration-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return ErrnoError(absl::StrCat("mkdtemp ", pattern));
  }
  return std::unique_ptr<TempDir>(new TempDir(pattern));
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::string& scratch_dir,
                                         absl::Duration timeout) {
  static int counter = 0;
  const std::string stem = absl::StrCat(scratch_dir, "/command-", ++counter);
  const std::string out_path = stem + ".out";
  const std::string err_path = stem + ".err";
  absl::StatusOr<pid_t> pid = Spawn(argv, out_path, err_path);
  if (!pid.ok()) return pid.status();
  int wait_status = 0;
  if (!WaitUntil(*pid, absl::Now() + timeout, &wait_status)) {
    kill(*pid, SIGKILL);
    waitpid(*pid, &wait_status, 0);
    return absl::DeadlineExceededError(absl::StrCat(
        argv[0], " did not finish within ", absl::FormatDuration(timeout),
        "; stderr:\n", ReadFileOrEmpty(err_path)));
  }
  CommandResult result;
  result.exit_code = ExitCode(wait_status);
  result.out = ReadFileOrEmpty(out_path);
  result.err = ReadFileOrEmpty(err_path);
  return result;
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::string& binary, const std::string& data_dir,
    const std::string& log_path, absl::Duration startup_timeout,
    const std::vector<std::string>& extra_args) {
  std::vector<std::string> argv = {binary,
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--data-dir",
                                   data_dir,
                                   "--metrics-listen",
                                   ""};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  absl::StatusOr<pid_t> pid = Spawn(argv, log_path, log_path);
  if (!pid.ok()) return pid.status();
  std::unique_ptr<ServerProcess> server(new ServerProcess(*pid, log_path));

  const std::string kMarker = "bnn-server listening on 127.0.0.1:";
  const absl::Time deadline = absl::Now() + startup_timeout;
  while (true) {
    const std::string log = server->Log();
    const size_t at = log.find(kMarker);
    // Only a complete line is parsed, so a partly written port is not.
    const size_t end = at == std::string::npos
                           ? std::string::npos
                           : log.find('\n', at + kMarker.size());
    if (end != std::string::npos) {
      const std::string port =
          log.substr(at + kMarker.size(), end - at - kMarker.size());
      int value = 0;
      if (!absl::SimpleAtoi(port, &value) || value <= 0 || value > 65535) {
        return absl::InternalError(
            absl::StrCat("bad port '", port, "' in the server log:\n", log));
      }
      server->address_ = absl::StrCat("127.0.0.1:", value);
      return server;
    }
    if (!server->IsRunning()) {
      return absl::InternalError(
          absl::StrCat(binary, " exited during startup; log:\n", log));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(binary, " printed no 'listening on' line within ",
                       absl::FormatDuration(startup_timeout), "; log:\n", log));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

ServerProcess::~ServerProcess() { Stop(); }

bool ServerProcess::IsRunning() {
  if (exited_) return false;
  int wait_status = 0;
  if (waitpid(pid_, &wait_status, WNOHANG) == pid_) exited_ = true;
  return !exited_;
}

void ServerProcess::Kill() {
  if (!IsRunning()) return;
  kill(pid_, SIGKILL);
  int wait_status = 0;
  waitpid(pid_, &wait_status, 0);
  exited_ = true;
}

std::string ServerProcess::Log() const { return ReadFileOrEmpty(log_path_); }

void ServerProcess::Stop() {
  if (!IsRunning()) return;
  kill(pid_, SIGTERM);
  int wait_status = 0;
  if (!WaitUntil(pid_, absl::Now() + absl::Seconds(10), &wait_status)) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &wait_status, 0);
  }
  exited_ = true;
}

}  // namespace bnn::integration
