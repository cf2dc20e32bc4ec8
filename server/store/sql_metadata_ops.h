// The operations of the metadata store (metadata_store.h) as SQL, written
// once for every SQL backend (SQLite: sqlite_metadata_store.h, PostgreSQL:
// postgres_metadata_store.h). A backend supplies a connection that prepares
// and runs statements (SqlConnection) and opens and ends the transactions;
// SqlMetadataOps runs every lookup and change of the MetadataTransaction
// interface on it, inside the transaction the backend opened.
//
// The SQL is the dialect both engines share: "?" placeholders (a backend
// that numbers its parameters, as PostgreSQL's "$1", rewrites them when it
// prepares), row-value comparisons for keyset paging, INSERT ... ON
// CONFLICT ... DO UPDATE. Every integer column is 64-bit and bound as
// int64_t, every text column bound as text, every payload as bytes. No SQL
// is built from user values: they are always bound as parameters.
//
// The schemas (metadata_schema.sql, postgres_schema.sql) declare the same
// tables, columns and keys, so that these statements mean the same thing on
// both.
#ifndef BNN_SERVER_STORE_SQL_METADATA_OPS_H_
#define BNN_SERVER_STORE_SQL_METADATA_OPS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include "server/store/metadata_store.h"

namespace bnn::server {

// A bound value of a list query's conditions.
using SqlValue = std::variant<int64_t, std::string>;

// One prepared statement in use: bound, then stepped through its rows.
// Column accessors read the current row (after Step() returned true).
class SqlStatement {
 public:
  virtual ~SqlStatement() = default;

  SqlStatement& Bind(int index, absl::string_view text) {
    BindText(index, text);
    return *this;
  }
  SqlStatement& Bind(int index, const std::string& text) {
    return Bind(index, absl::string_view(text));
  }
  SqlStatement& Bind(int index, const char* text) {
    return Bind(index, absl::string_view(text));
  }
  SqlStatement& Bind(int index, int64_t value) {
    BindInt(index, value);
    return *this;
  }
  SqlStatement& Bind(int index, const SqlValue& value) {
    if (const int64_t* number = std::get_if<int64_t>(&value)) {
      return Bind(index, *number);
    }
    return Bind(index, std::get<std::string>(value));
  }
  SqlStatement& BindBlob(int index, absl::string_view bytes) {
    BindBytes(index, bytes);
    return *this;
  }
  // Text, or NULL when empty.
  SqlStatement& BindTextOrNull(int index, absl::string_view text) {
    if (text.empty()) {
      BindNullText(index);
      return *this;
    }
    return Bind(index, text);
  }

  // True with a row to read, false when done. The first call runs the
  // statement (a bind error is returned then).
  virtual absl::StatusOr<bool> Step() = 0;
  // Runs a statement that returns no rows.
  absl::Status Run() { return Step().status(); }

  virtual int64_t Int(int column) const = 0;
  virtual std::string Text(int column) const = 0;
  // Valid until the next Step() or the statement's destruction.
  virtual absl::string_view Blob(int column) const = 0;
  // Rows changed by the last Run.
  virtual int64_t Changes() const = 0;

 protected:
  // Parameters are numbered from 1 in the order of their "?".
  virtual void BindText(int index, absl::string_view text) = 0;
  virtual void BindInt(int index, int64_t value) = 0;
  virtual void BindBytes(int index, absl::string_view bytes) = 0;
  virtual void BindNullText(int index) = 0;
};

// A connection to the database. Not thread-safe: the store gives it to one
// transaction at a time.
class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  // A statement of `sql` (a backend may cache what it prepares per text).
  // Statements of one connection may be open at once only if the backend
  // says so; the operations finish (or reset) one before the next.
  virtual absl::StatusOr<std::unique_ptr<SqlStatement>> Prepare(
      const std::string& sql) = 0;

  // What a SELECT of the claim (MetadataTransaction::NextClaimableJob) ends
  // with to lock the row it returns against other writers and skip rows
  // they hold: " FOR UPDATE SKIP LOCKED" on PostgreSQL; empty where one
  // writer at a time is all the engine allows (SQLite).
  virtual absl::string_view RowLockClause() const { return ""; }

  // The integer in the first column of the first row of `sql`.
  absl::StatusOr<int64_t> QueryInt(const std::string& sql);
};

// The schema's migrations: the sections of `schema_sql` that each start
// with a line "-- migration N"; sections[i] moves a database from schema
// version i to i + 1. Text before the first marker is ignored.
std::vector<std::string> SchemaSections(absl::string_view schema_sql);

// Every operation of MetadataTransaction on `connection` (not owned, must
// outlive the result), inside the transaction the store opened.
std::unique_ptr<MetadataTransaction> NewSqlMetadataOps(
    SqlConnection* connection);

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_SQL_METADATA_OPS_H_
