#include "tests/server/server_test_util.h"

#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sstream>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <gtest/gtest.h>

#include "bnn/check.h"
#include "bnn/methods/registry.h"
#include "bnn/random.h"
#include "bnn/train/trainer.h"

namespace bnn::server::testutil {

TempDir::TempDir() {
  std::string pattern = ::testing::TempDir() + "bnn_server_XXXXXX";
  BNN_CHECK(mkdtemp(pattern.data()) != nullptr);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::string& log_path) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const int log =
      open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return absl::InternalError("cannot open " + log_path);
  std::vector<char*> args;
  for (const std::string& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    // Dies with the test; async-signal-safe calls only from here on.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(out[1], STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  close(log);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, out[0]));
}

ChildProcess::~ChildProcess() {
  if (!exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  close(stdout_fd_);
}

absl::StatusOr<std::string> ChildProcess::WaitForLine(absl::string_view prefix,
                                                      absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    for (size_t newline;
         (newline = buffered_.find('\n')) != std::string::npos;) {
      const std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      if (absl::StartsWith(line, prefix)) {
        return line.substr(prefix.size());
      }
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("no line starting with '", prefix, "'"));
    }
    pollfd fd{stdout_fd_, POLLIN, 0};
    if (poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <=
        0) {
      continue;
    }
    char chunk[4096];
    const ssize_t got = read(stdout_fd_, chunk, sizeof(chunk));
    if (got <= 0) return absl::UnavailableError("the process closed stdout");
    buffered_.append(chunk, static_cast<size_t>(got));
  }
}

void ChildProcess::Signal(int signal_number) {
  if (!exited_) kill(pid_, signal_number);
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exited_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("the process is still running");
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  BNN_CHECK(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  BNN_CHECK(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) ==
            0);
  socklen_t length = sizeof(address);
  BNN_CHECK(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) ==
            0);
  close(fd);
  return ntohs(address.sin_port);
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

Dataset CubicDataset(int num_rows, uint64_t seed) {
  Dataset data;
  data.num_features = 1;
  Rng rng(seed);
  for (int i = 0; i < num_rows; ++i) {
    const double x = rng.Uniform(-4.0, 4.0);
    data.features.push_back(x);
    data.targets.push_back(x * x * x + 3.0 * rng.Normal());
  }
  return data;
}

Snapshot TinySnapshot(uint64_t seed) {
  TrainRequest request;
  request.method = "slang";
  request.hidden_sizes = {4};
  request.params = {{"batch_size", "10"}, {"epochs", "1"}};
  request.options.seed = seed;
  request.dataset_id = "ds-00000000000000aa";
  request.dataset_version = 2;
  absl::StatusOr<Snapshot> snapshot =
      Train(request, CubicDataset(20), MethodRegistry::Builtin());
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  return *std::move(snapshot);
}

}  // namespace bnn::server::testutil
