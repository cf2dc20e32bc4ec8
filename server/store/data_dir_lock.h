// One writer per data directory: a bnn-server holds an exclusive flock(2) on
// <data-dir>/LOCK, a file holding its pid, for as long as it runs. A second
// server on the same directory refuses to start, naming the holder, instead
// of both writing the same files. The kernel drops the lock when the holder's
// process ends however it ends (kill -9 included), so a leftover LOCK file
// never blocks a restart.
#ifndef BNN_SERVER_STORE_DATA_DIR_LOCK_H_
#define BNN_SERVER_STORE_DATA_DIR_LOCK_H_

#include <memory>
#include <string>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

namespace bnn::server {

class DataDirLock {
 public:
  // The lock file inside the data directory.
  static constexpr char kFileName[] = "LOCK";

  // Creates `dir` if missing (making its creation durable) and locks it.
  // FailedPrecondition naming `flag`, the directory and the holder's pid if
  // another process, or another Server in this process, holds the lock;
  // Internal if the file cannot be created or written.
  static absl::StatusOr<std::unique_ptr<DataDirLock>> Acquire(
      const std::string& dir, absl::string_view flag = "--data-dir");

  // Releases the lock (the file stays; its contents are stale from then
  // on).
  ~DataDirLock();
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}

  const int fd_;
};

// The file holding a data directory's server id.
inline constexpr absl::string_view kServerIdFileName = "server-id";

// The id of the server that owns the data directory `dir` (the caller holds
// its lock): read from <dir>/server-id, created ("srv-" and 16 hex digits)
// on first use. Servers sharing a metadata store name the one that runs a
// job by it (JobStore): it stays with the directory, as the job's
// checkpoints do. Internal if the file cannot be written, DataLoss if it
// holds something else.
absl::StatusOr<std::string> LoadOrCreateServerId(const std::string& dir);

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_DATA_DIR_LOCK_H_
