#include "tests/test_util/subprocess.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sstream>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>

namespace bnn::testing {
namespace {

absl::Status ErrnoError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

[[noreturn]] void Die(const std::string& what) {
  std::perror(what.c_str());
  std::abort();
}

}  // namespace

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Die("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    Die("bind 127.0.0.1:0");
  }
  close(fd);
  return ntohs(address.sin_port);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty()) return absl::InvalidArgumentError("argv is empty");
  // Everything that allocates happens before fork(): the child of a
  // multi-threaded process may only call async-signal-safe functions.
  std::vector<char*> args;
  for (const std::string& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const int log =
      open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return ErrnoError(absl::StrCat("open ", log_path));
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(log);
    return ErrnoError("pipe");
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may have died between fork() and prctl().
    if (getppid() != parent) _exit(127);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  const int fork_errno = errno;
  close(out[1]);
  close(log);
  if (pid < 0) {
    close(out[0]);
    errno = fork_errno;
    return ErrnoError("fork");
  }
  fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, out[0]));
}

ChildProcess::~ChildProcess() {
  Kill();
  close(stdout_fd_);
}

void ChildProcess::ReadStdout(absl::Duration timeout) {
  if (stdout_closed_) {
    absl::SleepFor(timeout);
    return;
  }
  pollfd fd{stdout_fd_, POLLIN, 0};
  if (poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0)
    return;
  char chunk[4096];
  while (true) {
    const ssize_t got = read(stdout_fd_, chunk, sizeof(chunk));
    if (got > 0) {
      stdout_.append(chunk, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    // End of file, or an error other than "nothing more for now".
    if (got == 0 || errno != EAGAIN) stdout_closed_ = true;
    return;
  }
}

absl::StatusOr<std::string> ChildProcess::WaitForLine(absl::string_view prefix,
                                                      absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    size_t start = 0;
    for (size_t end; (end = stdout_.find('\n', start)) != std::string::npos;
         start = end + 1) {
      const absl::string_view line(stdout_.data() + start, end - start);
      if (absl::StartsWith(line, prefix)) {
        return std::string(line.substr(prefix.size()));
      }
    }
    if (stdout_closed_) {
      return absl::UnavailableError(absl::StrCat(
          "stdout closed without a line starting with '", prefix, "'"));
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("no line starting with '", prefix, "' within ",
                       absl::FormatDuration(timeout)));
    }
    ReadStdout(std::min(left, absl::Milliseconds(50)));
  }
}

void ChildProcess::Signal(int signal_number) {
  if (IsRunning()) kill(pid_, signal_number);
}

void ChildProcess::Reaped(int wait_status) {
  exited_ = true;
  if (WIFEXITED(wait_status)) exit_code_ = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) exit_code_ = 128 + WTERMSIG(wait_status);
}

bool ChildProcess::IsRunning() {
  int wait_status = 0;
  if (!exited_ && waitpid(pid_, &wait_status, WNOHANG) == pid_) {
    Reaped(wait_status);
  }
  return !exited_;
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (IsRunning()) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "pid ", pid_, " still runs after ", absl::FormatDuration(timeout)));
    }
    ReadStdout(std::min(deadline - absl::Now(), absl::Milliseconds(10)));
  }
  // What the child wrote last (a descendant holding the pipe open does not
  // delay this: the read end does not block).
  ReadStdout(absl::ZeroDuration());
  return exit_code_;
}

void ChildProcess::Kill() {
  if (!IsRunning()) return;
  kill(pid_, SIGKILL);
  int wait_status = 0;
  while (waitpid(pid_, &wait_status, 0) < 0 && errno == EINTR) {
  }
  Reaped(wait_status);
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::string& scratch_dir,
                                         absl::Duration timeout) {
  static int counter = 0;
  const std::string err_path =
      absl::StrCat(scratch_dir, "/command-", getpid(), "-", ++counter, ".err");
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Start(argv, err_path);
  if (!child.ok()) return child.status();
  absl::StatusOr<int> code = (*child)->Wait(timeout);
  if (!code.ok()) {
    return absl::DeadlineExceededError(absl::StrCat(
        argv[0], " did not finish within ", absl::FormatDuration(timeout),
        "; stderr:\n", ReadFileOrEmpty(err_path)));
  }
  CommandResult result;
  result.exit_code = *code;
  result.out = (*child)->Stdout();
  result.err = ReadFileOrEmpty(err_path);
  return result;
}

std::vector<std::string> ServerProcess::Command(
    const std::string& binary, const std::string& data_dir,
    const std::vector<std::string>& extra_flags) {
  std::vector<std::string> argv = {
      binary,       "--listen",        "127.0.0.1:0",
      "--data-dir", data_dir,          "--metrics-listen",
      "",           "--training-nice", "0"};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  return argv;
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::string& binary, const std::string& data_dir,
    const std::string& log_path, const std::vector<std::string>& extra_flags,
    absl::Duration startup_timeout) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Start(Command(binary, data_dir, extra_flags), log_path);
  if (!child.ok()) return child.status();
  std::unique_ptr<ServerProcess> server(
      new ServerProcess(*std::move(child), log_path));
  absl::StatusOr<std::string> address = server->process_->WaitForLine(
      "bnn-server listening on ", startup_timeout);
  if (!address.ok()) {
    return absl::Status(
        address.status().code(),
        absl::StrCat(binary, " did not start: ", address.status().message(),
                     "; log:\n", server->Log()));
  }
  server->address_ = *std::move(address);
  // Printed before the "listening on" line when metrics are served.
  server->metrics_url_ =
      server->process_
          ->WaitForLine("bnn-server metrics on ", absl::ZeroDuration())
          .value_or("");
  return server;
}

ServerProcess::~ServerProcess() {
  if (!Stop(SIGTERM, absl::Seconds(10)).ok()) Kill();
}

absl::StatusOr<int> ServerProcess::Stop(int signal_number,
                                        absl::Duration timeout) {
  process_->Signal(signal_number);
  return process_->Wait(timeout);
}

}  // namespace bnn::testing
