#include "server/store/sqlite_metadata_store.h"

#include <cstdint>
#include <optional>
#include <sqlite3.h>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>

#include "bnn/status.h"

#include "store/metadata_schema.h"

namespace bnn::server {
namespace {

// PRAGMA application_id of a metadata database ("BNNM").
constexpr int64_t kApplicationId = 0x424E4E4D;

absl::Status SqliteError(sqlite3* db, int code, absl::string_view what) {
  const int primary = code & 0xff;
  const std::string message = absl::StrCat(
      what, ": ", db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(code));
  switch (primary) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(message);
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(message);
    case SQLITE_CONSTRAINT:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace

// The connection and its statement cache. Not thread-safe (the store's
// mutex guards it). One statement of a given text is open at a time (each
// is the one cached sqlite3_stmt).
class SqliteMetadataStore::Connection final : public SqlConnection {
 public:
  // A cached statement in use: bound, stepped, and reset when it goes out
  // of scope.
  class Statement final : public SqlStatement {
   public:
    Statement(Connection* connection, sqlite3_stmt* statement)
        : connection_(connection), statement_(statement) {}
    ~Statement() override {
      sqlite3_reset(statement_);
      sqlite3_clear_bindings(statement_);
    }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;

    absl::StatusOr<bool> Step() override {
      BNN_RETURN_IF_ERROR(bind_status_);
      const int code = sqlite3_step(statement_);
      if (code == SQLITE_ROW) return true;
      if (code == SQLITE_DONE) return false;
      return SqliteError(connection_->db_,
                         sqlite3_extended_errcode(connection_->db_),
                         connection_->path_);
    }

    int64_t Int(int column) const override {
      return sqlite3_column_int64(statement_, column);
    }
    std::string Text(int column) const override {
      const unsigned char* text = sqlite3_column_text(statement_, column);
      const int size = sqlite3_column_bytes(statement_, column);
      return text == nullptr
                 ? std::string()
                 : std::string(reinterpret_cast<const char*>(text), size);
    }
    absl::string_view Blob(int column) const override {
      const void* data = sqlite3_column_blob(statement_, column);
      const int size = sqlite3_column_bytes(statement_, column);
      return data == nullptr
                 ? absl::string_view()
                 : absl::string_view(static_cast<const char*>(data), size);
    }
    int64_t Changes() const override {
      return sqlite3_changes64(connection_->db_);
    }

   protected:
    void BindText(int index, absl::string_view text) override {
      Check(sqlite3_bind_text64(statement_, index, text.data(), text.size(),
                                SQLITE_TRANSIENT, SQLITE_UTF8));
    }
    void BindInt(int index, int64_t value) override {
      Check(sqlite3_bind_int64(statement_, index, value));
    }
    void BindBytes(int index, absl::string_view bytes) override {
      Check(sqlite3_bind_blob64(statement_, index, bytes.data(), bytes.size(),
                                SQLITE_TRANSIENT));
    }
    void BindNullText(int index) override {
      Check(sqlite3_bind_null(statement_, index));
    }

   private:
    void Check(int code) {
      if (code != SQLITE_OK && bind_status_.ok()) {
        bind_status_ = SqliteError(connection_->db_, code, connection_->path_);
      }
    }

    Connection* connection_;
    sqlite3_stmt* statement_;
    absl::Status bind_status_;
  };

  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const std::string& path) {
    sqlite3* db = nullptr;
    const int code = sqlite3_open_v2(
        path.c_str(), &db,
        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
        nullptr);
    if (code != SQLITE_OK) {
      absl::Status status = SqliteError(db, code, path);
      sqlite3_close_v2(db);
      return status;
    }
    sqlite3_extended_result_codes(db, 1);
    return std::unique_ptr<Connection>(new Connection(path, db));
  }

  ~Connection() override {
    for (auto& [sql, statement] : statements_) sqlite3_finalize(statement);
    sqlite3_close_v2(db_);
  }

  // The cached statement of `sql` (prepared on first use).
  absl::StatusOr<std::unique_ptr<SqlStatement>> Prepare(
      const std::string& sql) override {
    auto it = statements_.find(sql);
    if (it == statements_.end()) {
      sqlite3_stmt* statement = nullptr;
      const int code =
          sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                             SQLITE_PREPARE_PERSISTENT, &statement, nullptr);
      if (code != SQLITE_OK) return SqliteError(db_, code, path_);
      it = statements_.emplace(sql, statement).first;
    }
    return std::make_unique<Statement>(this, it->second);
  }

  // Runs constant SQL (the schema, pragmas, BEGIN/COMMIT); never user
  // values.
  absl::Status Exec(const std::string& sql) {
    char* error = nullptr;
    const int code = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
    if (code == SQLITE_OK) return absl::OkStatus();
    const std::string message =
        error != nullptr ? std::string(error) : sqlite3_errstr(code);
    sqlite3_free(error);
    absl::Status status = SqliteError(nullptr, code, path_);
    return absl::Status(status.code(), absl::StrCat(path_, ": ", message));
  }

  // The text a one-row statement such as "PRAGMA journal_mode = wal"
  // returns.
  absl::StatusOr<std::string> QueryText(const std::string& sql) {
    BNN_ASSIGN_OR_RETURN(std::unique_ptr<SqlStatement> statement, Prepare(sql));
    BNN_ASSIGN_OR_RETURN(const bool row, statement->Step());
    if (!row) return absl::InternalError(absl::StrCat(sql, ": no result"));
    return statement->Text(0);
  }

  bool InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }
  const std::string& path() const { return path_; }

 private:
  Connection(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}

  const std::string path_;
  sqlite3* const db_;
  absl::flat_hash_map<std::string, sqlite3_stmt*> statements_;
};

SqliteMetadataStore::SqliteMetadataStore(std::string path,
                                         std::unique_ptr<Connection> connection)
    : path_(std::move(path)),
      connection_(std::move(connection)),
      ops_(NewSqlMetadataOps(connection_.get())) {}

SqliteMetadataStore::~SqliteMetadataStore() {
  absl::MutexLock lock(&mu_);
  ops_.reset();
  connection_.reset();
}

int SqliteMetadataStore::SchemaVersionOfBuild() {
  static const int version =
      static_cast<int>(SchemaSections(kMetadataSchemaSql).size());
  return version;
}

absl::StatusOr<std::unique_ptr<SqliteMetadataStore>> SqliteMetadataStore::Open(
    const std::string& path, const Options& options) {
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, Connection::Open(path));
  BNN_RETURN_IF_ERROR(
      c->Exec(absl::StrCat("PRAGMA busy_timeout = ",
                           absl::ToInt64Milliseconds(options.busy_timeout))));
  BNN_ASSIGN_OR_RETURN(const int64_t application_id,
                       c->QueryInt("PRAGMA application_id"));
  BNN_ASSIGN_OR_RETURN(const int64_t found, c->QueryInt("PRAGMA user_version"));
  const std::vector<std::string> sections = SchemaSections(kMetadataSchemaSql);
  const int64_t known = static_cast<int64_t>(sections.size());
  if (application_id != 0 && application_id != kApplicationId) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is not a bnn-serve metadata database (application_id ",
        application_id, ")"));
  }
  if (found > known) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has metadata schema version ", found, ", newer than version ",
        known,
        ", the newest this server knows; run a server at least as new as the "
        "one that wrote it"));
  }
  const std::string journal = options.wal ? "wal" : "delete";
  BNN_ASSIGN_OR_RETURN(const std::string mode,
                       c->QueryText("PRAGMA journal_mode = " + journal));
  if (mode != journal) {
    return absl::InternalError(absl::StrCat(path, ": cannot set journal_mode ",
                                            journal, " (it is ", mode, ")"));
  }
  BNN_RETURN_IF_ERROR(c->Exec("PRAGMA synchronous = FULL"));
  BNN_RETURN_IF_ERROR(c->Exec("PRAGMA foreign_keys = ON"));
  for (int64_t version = found + 1; version <= known; ++version) {
    BNN_RETURN_IF_ERROR(c->Exec("BEGIN IMMEDIATE"));
    absl::Status status = c->Exec(sections[version - 1]);
    if (status.ok()) {
      status = c->Exec(absl::StrCat("PRAGMA user_version = ", version));
    }
    if (status.ok()) status = c->Exec("COMMIT");
    if (!status.ok()) {
      if (c->InTransaction()) c->Exec("ROLLBACK").IgnoreError();
      return absl::Status(status.code(),
                          absl::StrCat("migrating metadata schema to version ",
                                       version, ": ", status.message()));
    }
  }
  return std::unique_ptr<SqliteMetadataStore>(
      new SqliteMetadataStore(path, std::move(c)));
}

absl::Status SqliteMetadataStore::RunRead(
    absl::FunctionRef<absl::Status(MetadataReader&)> body) {
  absl::MutexLock lock(&mu_);
  BNN_RETURN_IF_ERROR(connection_->Exec("BEGIN"));
  const absl::Status status = body(*ops_);
  const absl::Status end =
      connection_->Exec(status.ok() ? "COMMIT" : "ROLLBACK");
  BNN_RETURN_IF_ERROR(status);
  return end;
}

absl::Status SqliteMetadataStore::RunWrite(
    absl::FunctionRef<absl::Status(MetadataTransaction&)> body) {
  absl::MutexLock lock(&mu_);
  BNN_RETURN_IF_ERROR(connection_->Exec("BEGIN IMMEDIATE"));
  absl::Status status = body(*ops_);
  if (status.ok()) status = connection_->Exec("COMMIT");
  // Counted whatever the outcome: a cache revalidating once too often is
  // harmless, one missing a commit is not.
  commits_.fetch_add(1, std::memory_order_release);
  if (!status.ok() && connection_->InTransaction()) {
    const absl::Status rollback = connection_->Exec("ROLLBACK");
    if (!rollback.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat(status.message(),
                       " (and the rollback failed: ", rollback.message(), ")"));
    }
  }
  return status;
}

}  // namespace bnn::server
