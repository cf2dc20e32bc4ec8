// The metadata store (metadata_store.h) in a PostgreSQL database (Debian's
// PostgreSQL 15, through libpq), for several servers sharing one store
// (replicas behind a load balancer, all seeing the same datasets, models and
// aliases). The records, their payloads and the operations are those of the
// SQLite backend (SqlMetadataOps, sql_metadata_ops.h); the schema is
// postgres_schema.sql, embedded at build time, migrated in order from an
// empty database on open (under an advisory lock, so replicas starting
// together migrate once), and a database of a newer schema version is
// refused.
//
// Transactions. Write() runs at READ COMMITTED after taking one
// transaction-scoped advisory lock (pg_advisory_xact_lock) that every
// writer of the database takes first: writes, from every replica, run one
// at a time, as SQLite's BEGIN IMMEDIATE makes them, so a write transaction
// sees every commit before it and no other commit during it. This is
// serialisable without SERIALIZABLE's aborts: the MetadataStore contract
// forbids the store to run a body again, so a serialisation failure could
// only be returned to the caller, and a write body is a few indexed
// statements on small records, so one writer at a time costs little. Read()
// runs at REPEATABLE READ, READ ONLY: one snapshot for the whole body, never
// blocked by writers and never aborted. A statement that fails inside a
// write (e.g. a constraint) aborts the PostgreSQL transaction, so the body's
// later statements fail too and Write returns the first error; the
// operations check before they change, so a body sees such failures only
// for a broken invariant.
//
// Threads: a pool of up to Options::connections connections, opened on
// demand; each transaction takes one for its duration, so up to that many
// transactions of this process run at once (reads in parallel, writes one
// at a time as above). A connection that broke (the server restarted, the
// network dropped) fails the transaction using it with Unavailable and is
// closed; the next transaction opens a new one.
//
// Caches: another replica's commits are not seen by this process, so
// Commits() returns a new number at every call and the caches keyed by it
// (model resolutions, predictor checks) look in the store at every request:
// an alias moved on one replica is followed by the next request on every
// other. Predictors themselves stay cached (snapshots are immutable).
//
// Errors: the SQLSTATE class decides the code (connection exceptions,
// admin shutdown, lock timeouts: Unavailable; integrity constraints:
// FailedPrecondition; insufficient resources: ResourceExhausted; data
// corruption: DataLoss; serialisation failure or deadlock: Aborted; others:
// Internal). Messages name the database by its URI with the password
// replaced by "***", and never contain the password.
#ifndef BNN_SERVER_STORE_POSTGRES_METADATA_STORE_H_
#define BNN_SERVER_STORE_POSTGRES_METADATA_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/functional/function_ref.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>

#include "server/store/metadata_store.h"

namespace bnn::server {

class PostgresMetadataStore final : public MetadataStore {
 public:
  struct Options {
    // Connections the store opens at most; as many transactions of this
    // process run at once. 1..64.
    int connections = 4;
    // How long opening a connection may take (libpq's connect_timeout,
    // whole seconds, at least 2), before Unavailable.
    absl::Duration connect_timeout = absl::Seconds(10);

    // InvalidArgument naming the field, its value and its bounds.
    absl::Status Validate() const;
  };

  // Whether `target` is a PostgreSQL connection URI ("postgres://" or
  // "postgresql://"), the form --metadata takes.
  static bool IsUri(absl::string_view target);
  // `uri` with its password (in the user info or a "password" parameter)
  // replaced by "***", for messages and logs.
  static std::string RedactUri(absl::string_view uri);

  // Connects to the database at `uri` (a libpq connection URI,
  // postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAMS]; libpq's
  // PGPASSWORD and password file are used when the URI has no password)
  // and brings its schema to SchemaVersionOfBuild(). InvalidArgument for a
  // URI that libpq cannot parse; Unavailable if the server cannot be
  // reached or refuses the connection; FailedPrecondition naming both
  // versions for a database of a newer schema, or for a database holding
  // other tables and no bnn-serve schema.
  static absl::StatusOr<std::unique_ptr<PostgresMetadataStore>> Open(
      const std::string& uri, const Options& options);
  static absl::StatusOr<std::unique_ptr<PostgresMetadataStore>> Open(
      const std::string& uri) {
    return Open(uri, Options());
  }

  // The schema version this build creates and reads: the number of the
  // last section of postgres_schema.sql.
  static int SchemaVersionOfBuild();

  ~PostgresMetadataStore() override;
  PostgresMetadataStore(const PostgresMetadataStore&) = delete;
  PostgresMetadataStore& operator=(const PostgresMetadataStore&) = delete;

  int SchemaVersion() const override { return SchemaVersionOfBuild(); }
  // A new number at every call (see the file comment).
  uint64_t Commits() const override {
    return calls_.fetch_add(1, std::memory_order_acq_rel) + 1;
  }
  // The URI with its password redacted.
  const std::string& redacted_uri() const { return redacted_uri_; }

 protected:
  absl::Status RunRead(
      absl::FunctionRef<absl::Status(MetadataReader&)> body) override;
  absl::Status RunWrite(
      absl::FunctionRef<absl::Status(MetadataTransaction&)> body) override;

 private:
  class Connection;
  class Statement;
  // A connection of the pool and the operations on it.
  struct Pooled;

  PostgresMetadataStore(std::string uri, const Options& options);

  // A connection for one transaction: an idle one, or a new one if fewer
  // than Options::connections are open, else waits for one to be released.
  absl::StatusOr<std::unique_ptr<Pooled>> Acquire();
  // Returns a connection to the pool, or closes it if it broke or was left
  // inside a transaction.
  void Release(std::unique_ptr<Pooled> pooled);
  // Runs `body` on a pooled connection between `begin` and COMMIT (or
  // ROLLBACK if the body or the commit fails).
  absl::Status RunTransaction(
      absl::string_view begin,
      absl::FunctionRef<absl::Status(MetadataTransaction&)> body);

  // With the password: libpq needs it to connect.
  const std::string uri_;
  const std::string redacted_uri_;
  const Options options_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Pooled>> idle_ ABSL_GUARDED_BY(mu_);
  // Connections open, idle or in use.
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  mutable std::atomic<uint64_t> calls_{0};
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_POSTGRES_METADATA_STORE_H_
