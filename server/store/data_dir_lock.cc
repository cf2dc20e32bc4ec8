#include "server/store/data_dir_lock.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <absl/strings/ascii.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>

#include "bnn/io/file.h"
#include "bnn/status.h"

#include "server/store/ids.h"
#include "server/store/record_dir.h"

namespace bnn::server {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataDirLock>> DataDirLock::Acquire(
    const std::string& dir, absl::string_view flag) {
  BNN_RETURN_IF_ERROR(CreateDirectoryDurably(dir));
  const std::string path = absl::StrCat(dir, "/", kFileName);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("open the lock file", path);
  std::unique_ptr<DataDirLock> lock(new DataDirLock(fd));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return ErrnoError("lock", path);
    char holder[32] = {};
    const ssize_t got = ::pread(fd, holder, sizeof(holder) - 1, 0);
    int64_t pid = 0;
    const bool known =
        got > 0 &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(
                             holder, static_cast<size_t>(got))),
                         &pid);
    return absl::FailedPreconditionError(absl::StrCat(
        flag, " ", dir, " is in use by another bnn-server",
        known ? absl::StrCat(" (pid ", pid, ")") : std::string(),
        "; one directory takes one server (", path, " is locked)"));
  }
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) !=
                                     static_cast<ssize_t>(pid.size())) {
    return ErrnoError("write the lock file", path);
  }
  return lock;
}

DataDirLock::~DataDirLock() { ::close(fd_); }

absl::StatusOr<std::string> LoadOrCreateServerId(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kServerIdFileName);
  absl::StatusOr<std::string> read = ReadFile(path);
  if (read.ok()) {
    const std::string id(absl::StripAsciiWhitespace(*read));
    if (!IsId(kServerIdPrefix, id)) {
      return absl::DataLossError(
          absl::StrCat(path, " does not hold a server id (", kServerIdPrefix,
                       "- and 16 hex digits)"));
    }
    return id;
  }
  if (!absl::IsNotFound(read.status())) return read.status();
  const std::string id = NewId(kServerIdPrefix);
  BNN_RETURN_IF_ERROR(WriteFileAtomically(path, absl::StrCat(id, "\n")));
  return id;
}

}  // namespace bnn::server
