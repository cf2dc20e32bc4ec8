// The metadata store (metadata_store.h) in one SQLite database file (Debian's
// libsqlite3, 3.40). The schema is metadata_schema.sql, embedded at build
// time: its "-- migration N" sections are applied in order on open, and a
// database of a newer schema version is refused.
//
// Durability: WAL journal with synchronous=FULL, so a Write() that returned
// OK survives a crash or power loss; foreign keys on (a model version's
// snapshot, a version's dataset); a busy timeout for another process (the
// sqlite3 shell) holding the lock.
//
// Threads: one connection behind a mutex. Every transaction, read or write,
// holds the mutex from BEGIN to COMMIT, so transactions of this process run
// one at a time (each is a few indexed statements; the payloads are small
// records, never rows or snapshots). The operations are SqlMetadataOps
// (sql_metadata_ops.h), shared with the PostgreSQL backend. Prepared statements
// are cached per SQL text for the connection's lifetime; no SQL is built from
// user values, which are always bound as parameters.
#ifndef BNN_SERVER_STORE_SQLITE_METADATA_STORE_H_
#define BNN_SERVER_STORE_SQLITE_METADATA_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <absl/base/thread_annotations.h>
#include <absl/functional/function_ref.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>

#include "server/store/metadata_store.h"
#include "server/store/sql_metadata_ops.h"

namespace bnn::server {

class SqliteMetadataStore final : public MetadataStore {
 public:
  struct Options {
    // How long a statement waits for a lock another process (or connection)
    // holds before it fails with Unavailable.
    absl::Duration busy_timeout = absl::Seconds(5);
    // The WAL journal (concurrent readers in other processes, one fsync per
    // commit). Off, the database keeps a rollback journal and is a single
    // file between transactions, which the record-file migration needs to
    // rename its finished database into place; the next open with WAL
    // switches it.
    bool wal = true;
  };

  // Opens (creating if missing) the database at `path` and brings its
  // schema to SchemaVersionOfBuild(). FailedPrecondition naming both
  // versions for a database of a newer schema, or for a file that is not a
  // bnn-serve metadata database; DataLoss for a corrupt file; Internal for
  // other SQLite failures, naming the file.
  static absl::StatusOr<std::unique_ptr<SqliteMetadataStore>> Open(
      const std::string& path, const Options& options);
  static absl::StatusOr<std::unique_ptr<SqliteMetadataStore>> Open(
      const std::string& path) {
    return Open(path, Options());
  }

  // The schema version this build creates and reads: the number of the
  // last section of metadata_schema.sql.
  static int SchemaVersionOfBuild();

  ~SqliteMetadataStore() override;
  SqliteMetadataStore(const SqliteMetadataStore&) = delete;
  SqliteMetadataStore& operator=(const SqliteMetadataStore&) = delete;

  int SchemaVersion() const override { return SchemaVersionOfBuild(); }
  uint64_t Commits() const override {
    return commits_.load(std::memory_order_acquire);
  }
  const std::string& path() const { return path_; }

 protected:
  absl::Status RunRead(
      absl::FunctionRef<absl::Status(MetadataReader&)> body) override;
  absl::Status RunWrite(
      absl::FunctionRef<absl::Status(MetadataTransaction&)> body) override;

 private:
  class Connection;

  SqliteMetadataStore(std::string path, std::unique_ptr<Connection> connection);

  const std::string path_;
  absl::Mutex mu_;
  std::unique_ptr<Connection> connection_ ABSL_GUARDED_BY(mu_);
  // SqlMetadataOps on connection_.
  std::unique_ptr<MetadataTransaction> ops_ ABSL_GUARDED_BY(mu_);
  // Incremented at the end of each write transaction, under mu_.
  std::atomic<uint64_t> commits_{0};
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_SQLITE_METADATA_STORE_H_
