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

namespace bnn::server {

class DataDirLock {
 public:
  // The lock file inside the data directory.
  static constexpr char kFileName[] = "LOCK";

  // Creates `dir` if missing (making its creation durable) and locks it.
  // FailedPrecondition naming the holder's pid if another process, or
  // another Server in this process, holds the lock; Internal if the file
  // cannot be created or written.
  static absl::StatusOr<std::unique_ptr<DataDirLock>> Acquire(
      const std::string& dir);

  // Releases the lock (the file stays; its contents are stale from then
  // on).
  ~DataDirLock();
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}

  const int fd_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_DATA_DIR_LOCK_H_
