#include "server/store/postgres_metadata_store.h"

#include <cstdint>
#include <cstdlib>
#include <libpq-fe.h>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_replace.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>

#include "bnn/status.h"

#include "server/store/sql_metadata_ops.h"
#include "store/postgres_schema.h"

namespace bnn::server {
namespace {

// Advisory lock keys ("BNNM" and a number): the schema migration (a session
// lock while a store opens) and the writers (a transaction lock).
constexpr int64_t kMigrationLockKey = 0x424E4E4D00000001;
constexpr int64_t kWriteLockKey = 0x424E4E4D00000002;

// Type OIDs of the parameters and columns the operations use
// (pg_type.h, which needs the server headers).
constexpr Oid kBoolOid = 16;
constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;
constexpr Oid kInt2Oid = 21;
constexpr Oid kInt4Oid = 23;
constexpr Oid kTextOid = 25;

struct ResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

struct ConnInfoDeleter {
  void operator()(PQconninfoOption* options) const { PQconninfoFree(options); }
};

// `text` with %XX escapes decoded (as libpq decodes URI components).
std::string PercentDecode(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    int value = 0;
    if (text[i] == '%' && i + 2 < text.size() &&
        absl::SimpleHexAtoi(text.substr(i + 1, 2), &value)) {
      out.push_back(static_cast<char>(value));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// Where the password of a URI is: the user info's part after ':' and the
// values of "password" parameters, as [begin, end) offsets.
std::vector<std::pair<size_t, size_t>> PasswordSpans(absl::string_view uri) {
  std::vector<std::pair<size_t, size_t>> spans;
  const size_t scheme_end = uri.find("://");
  const size_t authority = scheme_end == absl::string_view::npos
                               ? absl::string_view::npos
                               : scheme_end + 3;
  if (authority != absl::string_view::npos) {
    size_t authority_end = uri.find_first_of("/?#", authority);
    if (authority_end == absl::string_view::npos) authority_end = uri.size();
    const size_t at =
        uri.substr(authority, authority_end - authority).rfind('@');
    if (at != absl::string_view::npos) {
      const size_t colon = uri.substr(authority, at).find(':');
      if (colon != absl::string_view::npos) {
        spans.emplace_back(authority + colon + 1, authority + at);
      }
    }
  }
  const size_t query = uri.find('?');
  if (query != absl::string_view::npos) {
    size_t begin = query + 1;
    while (begin <= uri.size()) {
      size_t end = uri.find('&', begin);
      if (end == absl::string_view::npos) end = uri.size();
      const absl::string_view param = uri.substr(begin, end - begin);
      if (absl::StartsWith(param, "password=")) {
        spans.emplace_back(begin + 9, end);
      }
      begin = end + 1;
    }
  }
  return spans;
}

// Every form in which the password of `uri` could appear in a message.
std::vector<std::string> SecretsOf(const std::string& uri) {
  std::vector<std::string> secrets;
  for (const auto& [begin, end] : PasswordSpans(uri)) {
    if (end <= begin) continue;
    const std::string raw = uri.substr(begin, end - begin);
    secrets.push_back(raw);
    secrets.push_back(PercentDecode(raw));
  }
  char* error = nullptr;
  std::unique_ptr<PQconninfoOption, ConnInfoDeleter> options(
      PQconninfoParse(uri.c_str(), &error));
  PQfreemem(error);
  if (options != nullptr) {
    for (const PQconninfoOption* o = options.get(); o->keyword != nullptr;
         ++o) {
      if (absl::string_view(o->keyword) == "password" && o->val != nullptr &&
          *o->val != '\0') {
        secrets.push_back(o->val);
      }
    }
  }
  return secrets;
}

std::string Scrub(absl::string_view text,
                  const std::vector<std::string>& secrets) {
  std::string out(absl::StripTrailingAsciiWhitespace(text));
  for (const std::string& secret : secrets) {
    if (!secret.empty()) absl::StrReplaceAll({{secret, "***"}}, &out);
  }
  return out;
}

absl::StatusCode CodeOfSqlState(absl::string_view state) {
  if (state == "57P01" || state == "57P02" || state == "57P03" ||
      state == "55P03" || state == "57014" || absl::StartsWith(state, "08")) {
    // Connection exceptions, administrator shutdown, cannot connect now,
    // lock not available, statement cancelled.
    return absl::StatusCode::kUnavailable;
  }
  if (absl::StartsWith(state, "23")) {
    return absl::StatusCode::kFailedPrecondition;
  }
  if (absl::StartsWith(state, "53")) {
    return absl::StatusCode::kResourceExhausted;
  }
  if (state == "XX001" || state == "XX002") {
    return absl::StatusCode::kDataLoss;
  }
  if (absl::StartsWith(state, "40")) return absl::StatusCode::kAborted;
  if (state == "22021") return absl::StatusCode::kInvalidArgument;
  return absl::StatusCode::kInternal;
}

// "$1", "$2", ... for the "?" of `sql` outside quoted literals.
std::string NumberPlaceholders(absl::string_view sql) {
  std::string out;
  bool quoted = false;
  int next = 1;
  for (const char c : sql) {
    if (c == '\'') quoted = !quoted;
    if (c == '?' && !quoted) {
      absl::StrAppend(&out, "$", next++);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

// One libpq connection and the statements prepared on it. Not thread-safe:
// the pool gives it to one transaction at a time.
class PostgresMetadataStore::Connection final : public SqlConnection {
 public:
  static absl::StatusOr<std::unique_ptr<Connection>> Connect(
      const std::string& uri, const std::string& redacted_uri,
      const Options& options) {
    const std::string timeout = absl::StrCat(
        std::max<int64_t>(2, absl::ToInt64Seconds(options.connect_timeout)));
    const char* const keywords[] = {"dbname", "connect_timeout",
                                    "application_name", nullptr};
    const char* const values[] = {uri.c_str(), timeout.c_str(), "bnn-server",
                                  nullptr};
    PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
    std::unique_ptr<Connection> connection(
        new Connection(conn, redacted_uri, SecretsOf(uri)));
    if (conn == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(
          redacted_uri, ": cannot connect: libpq is out of memory"));
    }
    if (PQstatus(conn) != CONNECTION_OK) {
      return absl::UnavailableError(absl::StrCat(
          redacted_uri,
          ": cannot connect: ", connection->Scrubbed(PQerrorMessage(conn))));
    }
    // Notices (e.g. of a migration) are not for the server's stderr.
    PQsetNoticeProcessor(
        conn, [](void*, const char*) {}, nullptr);
    return connection;
  }

  ~Connection() override { PQfinish(conn_); }

  // A statement of `sql` with its "?" numbered; prepared on the server
  // (once per text and parameter types) when it first runs. Any number may
  // be open at once: each holds its own result.
  absl::StatusOr<std::unique_ptr<SqlStatement>> Prepare(
      const std::string& sql) override;

  absl::string_view RowLockClause() const override {
    return " FOR UPDATE SKIP LOCKED";
  }

  // Runs constant SQL (the schema, BEGIN/COMMIT, advisory locks), one or
  // several statements; never user values. Returns the last statement's
  // command tag (e.g. "COMMIT", or "ROLLBACK" for a COMMIT of a failed
  // transaction).
  absl::StatusOr<std::string> Exec(const std::string& sql) {
    Result result(PQexec(conn_, sql.c_str()));
    BNN_RETURN_IF_ERROR(Check(result.get()));
    return std::string(PQcmdStatus(result.get()));
  }

  // OK for a result that succeeded, else the error of the result (or of
  // the connection when there is none).
  absl::Status Check(const PGresult* result) const {
    if (result != nullptr) {
      const ExecStatusType status = PQresultStatus(result);
      if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
        return absl::OkStatus();
      }
      const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
      const char* message = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
      if (state != nullptr && message != nullptr) {
        return absl::Status(CodeOfSqlState(state),
                            absl::StrCat(redacted_uri_, ": ", Scrubbed(message),
                                         " (SQLSTATE ", state, ")"));
      }
    }
    const std::string message = Scrubbed(PQerrorMessage(conn_));
    if (PQstatus(conn_) != CONNECTION_OK) {
      return absl::UnavailableError(absl::StrCat(
          redacted_uri_, ": the connection to the database broke: ", message));
    }
    return absl::InternalError(absl::StrCat(redacted_uri_, ": ", message));
  }

  // The name of the statement prepared for `sql` (numbered placeholders)
  // with parameters of `types`, preparing it on first use.
  absl::StatusOr<std::string> Prepared(const std::string& sql,
                                       const std::vector<Oid>& types) {
    std::string key = sql;
    for (const Oid type : types) absl::StrAppend(&key, "\n", type);
    auto it = prepared_.find(key);
    if (it != prepared_.end()) return it->second;
    const std::string name = absl::StrCat("bnn_", prepared_.size() + 1);
    Result result(PQprepare(conn_, name.c_str(), sql.c_str(),
                            static_cast<int>(types.size()), types.data()));
    BNN_RETURN_IF_ERROR(Check(result.get()));
    prepared_.emplace(std::move(key), name);
    return name;
  }

  // Whether the connection can serve another transaction.
  bool Reusable() const {
    return PQstatus(conn_) == CONNECTION_OK &&
           PQtransactionStatus(conn_) == PQTRANS_IDLE;
  }
  bool InFailedTransaction() const {
    return PQtransactionStatus(conn_) == PQTRANS_INERROR;
  }
  bool InTransaction() const {
    const PGTransactionStatusType status = PQtransactionStatus(conn_);
    return status == PQTRANS_INTRANS || status == PQTRANS_INERROR;
  }

  PGconn* conn() const { return conn_; }
  const std::string& redacted_uri() const { return redacted_uri_; }
  std::string Scrubbed(absl::string_view text) const {
    return Scrub(text, secrets_);
  }

 private:
  Connection(PGconn* conn, std::string redacted_uri,
             std::vector<std::string> secrets)
      : conn_(conn),
        redacted_uri_(std::move(redacted_uri)),
        secrets_(std::move(secrets)) {}

  PGconn* const conn_;
  const std::string redacted_uri_;
  // The password in every form a message could echo it, to replace.
  const std::vector<std::string> secrets_;
  // By SQL text and parameter types.
  absl::flat_hash_map<std::string, std::string> prepared_;
};

// Parameters are sent and columns read in binary: integers as big-endian
// int8, text and bytes as they are.
class PostgresMetadataStore::Statement final : public SqlStatement {
 public:
  Statement(Connection* connection, std::string sql)
      : connection_(connection), sql_(std::move(sql)) {}

  absl::StatusOr<bool> Step() override {
    if (!ran_) {
      ran_ = true;
      BNN_RETURN_IF_ERROR(Execute());
      row_ = 0;
    } else {
      ++row_;
    }
    return row_ < PQntuples(result_.get());
  }

  int64_t Int(int column) const override {
    if (PQgetisnull(result_.get(), row_, column)) return 0;
    const auto* bytes = reinterpret_cast<const unsigned char*>(
        PQgetvalue(result_.get(), row_, column));
    const int length = PQgetlength(result_.get(), row_, column);
    uint64_t value = 0;
    for (int i = 0; i < length; ++i) value = (value << 8) | bytes[i];
    switch (PQftype(result_.get(), column)) {
      case kInt2Oid:
        return static_cast<int16_t>(value);
      case kInt4Oid:
        return static_cast<int32_t>(value);
      case kBoolOid:
        return value != 0;
      default:
        return static_cast<int64_t>(value);
    }
  }
  std::string Text(int column) const override {
    return std::string(Blob(column));
  }
  absl::string_view Blob(int column) const override {
    if (PQgetisnull(result_.get(), row_, column)) return absl::string_view();
    return absl::string_view(PQgetvalue(result_.get(), row_, column),
                             PQgetlength(result_.get(), row_, column));
  }
  int64_t Changes() const override {
    int64_t changes = 0;
    if (result_ == nullptr ||
        !absl::SimpleAtoi(PQcmdTuples(result_.get()), &changes)) {
      return 0;
    }
    return changes;
  }

 protected:
  void BindText(int index, absl::string_view text) override {
    Set(index, kTextOid, text, false);
  }
  void BindInt(int index, int64_t value) override {
    std::string bytes(8, '\0');
    for (int i = 7; i >= 0; --i) {
      bytes[i] = static_cast<char>(value & 0xff);
      value = static_cast<int64_t>(static_cast<uint64_t>(value) >> 8);
    }
    Set(index, kInt8Oid, bytes, false);
  }
  void BindBytes(int index, absl::string_view bytes) override {
    Set(index, kByteaOid, bytes, false);
  }
  void BindNullText(int index) override { Set(index, kTextOid, "", true); }

 private:
  struct Param {
    Oid type = 0;
    bool null = false;
    std::string bytes;
  };

  void Set(int index, Oid type, absl::string_view bytes, bool null) {
    if (index < 1) return;
    if (params_.size() < static_cast<size_t>(index)) params_.resize(index);
    params_[index - 1] = Param{type, null, std::string(bytes)};
  }

  absl::Status Execute() {
    std::vector<Oid> types;
    std::vector<const char*> values;
    std::vector<int> lengths;
    std::vector<int> formats;
    for (size_t i = 0; i < params_.size(); ++i) {
      const Param& param = params_[i];
      if (param.type == 0) {
        return absl::InternalError(absl::StrCat(
            "parameter ", i + 1, " of a metadata statement is not bound"));
      }
      types.push_back(param.type);
      values.push_back(param.null ? nullptr : param.bytes.data());
      lengths.push_back(static_cast<int>(param.bytes.size()));
      formats.push_back(1);
    }
    BNN_ASSIGN_OR_RETURN(const std::string name,
                         connection_->Prepared(sql_, types));
    result_.reset(PQexecPrepared(connection_->conn(), name.c_str(),
                                 static_cast<int>(values.size()), values.data(),
                                 lengths.data(), formats.data(),
                                 /*resultFormat=*/1));
    return connection_->Check(result_.get());
  }

  Connection* const connection_;
  const std::string sql_;
  std::vector<Param> params_;
  Result result_;
  bool ran_ = false;
  int row_ = 0;
};

absl::StatusOr<std::unique_ptr<SqlStatement>>
PostgresMetadataStore::Connection::Prepare(const std::string& sql) {
  return std::make_unique<Statement>(this, NumberPlaceholders(sql));
}

struct PostgresMetadataStore::Pooled {
  std::unique_ptr<Connection> connection;
  // SqlMetadataOps on `connection`.
  std::unique_ptr<MetadataTransaction> ops;
};

absl::Status PostgresMetadataStore::Options::Validate() const {
  if (connections < 1 || connections > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("connections: must be in [1, 64], got ", connections));
  }
  if (connect_timeout < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("connect_timeout: must be at least 1s, got ",
                     absl::FormatDuration(connect_timeout)));
  }
  return absl::OkStatus();
}

bool PostgresMetadataStore::IsUri(absl::string_view target) {
  return absl::StartsWith(target, "postgres://") ||
         absl::StartsWith(target, "postgresql://");
}

std::string PostgresMetadataStore::RedactUri(absl::string_view uri) {
  std::string out;
  size_t copied = 0;
  for (const auto& [begin, end] : PasswordSpans(uri)) {
    absl::StrAppend(&out, uri.substr(copied, begin - copied), "***");
    copied = end;
  }
  absl::StrAppend(&out, uri.substr(copied));
  return out;
}

int PostgresMetadataStore::SchemaVersionOfBuild() {
  static const int version =
      static_cast<int>(SchemaSections(kPostgresSchemaSql).size());
  return version;
}

PostgresMetadataStore::PostgresMetadataStore(std::string uri,
                                             const Options& options)
    : uri_(std::move(uri)), redacted_uri_(RedactUri(uri_)), options_(options) {}

PostgresMetadataStore::~PostgresMetadataStore() {
  absl::MutexLock lock(&mu_);
  idle_.clear();
}

namespace {

// Brings the database's schema to the build's version; the caller holds
// the migration lock.
absl::Status Migrate(
    SqlConnection& c,
    absl::FunctionRef<absl::StatusOr<std::string>(const std::string&)> exec,
    absl::string_view what) {
  BNN_ASSIGN_OR_RETURN(
      const int64_t has_version_table,
      c.QueryInt("SELECT COUNT(*) FROM information_schema.tables WHERE "
                 "table_schema = current_schema() AND table_name = "
                 "'bnn_metadata_schema'"));
  if (has_version_table == 0) {
    BNN_ASSIGN_OR_RETURN(
        const int64_t tables,
        c.QueryInt("SELECT COUNT(*) FROM information_schema.tables WHERE "
                   "table_schema = current_schema()"));
    if (tables > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, " is not a bnn-serve metadata database: its schema holds ",
          tables,
          " tables and no bnn_metadata_schema table (give the server a "
          "database of its own)"));
    }
    BNN_RETURN_IF_ERROR(
        exec("CREATE TABLE bnn_metadata_schema (only_row BOOLEAN PRIMARY KEY "
             "DEFAULT TRUE CHECK (only_row), version BIGINT NOT NULL); "
             "INSERT INTO bnn_metadata_schema (version) VALUES (0)")
            .status());
  }
  BNN_ASSIGN_OR_RETURN(const int64_t found,
                       c.QueryInt("SELECT version FROM bnn_metadata_schema"));
  const std::vector<std::string> sections = SchemaSections(kPostgresSchemaSql);
  const int64_t known = static_cast<int64_t>(sections.size());
  if (found > known) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " has metadata schema version ", found, ", newer than version ",
        known,
        ", the newest this server knows; run a server at least as new as the "
        "one that wrote it"));
  }
  for (int64_t version = found + 1; version <= known; ++version) {
    absl::Status status = exec("BEGIN").status();
    if (status.ok()) status = exec(sections[version - 1]).status();
    if (status.ok()) {
      status = exec(absl::StrCat("UPDATE bnn_metadata_schema SET version = ",
                                 version))
                   .status();
    }
    if (status.ok()) status = exec("COMMIT").status();
    if (!status.ok()) {
      exec("ROLLBACK").IgnoreError();
      return absl::Status(status.code(),
                          absl::StrCat("migrating metadata schema to version ",
                                       version, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresMetadataStore>>
PostgresMetadataStore::Open(const std::string& uri, const Options& options) {
  BNN_RETURN_IF_ERROR(options.Validate());
  const std::string redacted = RedactUri(uri);
  if (!IsUri(uri)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata: not a PostgreSQL URI (postgres://USER@HOST:PORT/DATABASE): ",
        redacted));
  }
  {
    char* error = nullptr;
    std::unique_ptr<PQconninfoOption, ConnInfoDeleter> parsed(
        PQconninfoParse(uri.c_str(), &error));
    if (parsed == nullptr) {
      const std::string message =
          Scrub(error != nullptr ? error : "out of memory", SecretsOf(uri));
      PQfreemem(error);
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata: ", redacted, " is not a valid connection URI: ", message));
    }
    PQfreemem(error);
  }
  std::unique_ptr<PostgresMetadataStore> store(
      new PostgresMetadataStore(uri, options));
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<Pooled> pooled, store->Acquire());
  Connection& c = *pooled->connection;
  const auto exec = [&](const std::string& sql) { return c.Exec(sql); };
  absl::Status status =
      exec(absl::StrCat("SELECT pg_advisory_lock(", kMigrationLockKey, ")"))
          .status();
  if (status.ok()) {
    status = Migrate(c, exec, redacted);
    const absl::Status unlocked =
        exec(absl::StrCat("SELECT pg_advisory_unlock(", kMigrationLockKey, ")"))
            .status();
    if (status.ok()) status = unlocked;
  }
  store->Release(std::move(pooled));
  BNN_RETURN_IF_ERROR(status);
  return store;
}

absl::StatusOr<std::unique_ptr<PostgresMetadataStore::Pooled>>
PostgresMetadataStore::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !idle_.empty() || open_ < options_.connections;
    };
    mu_.Await(absl::Condition(&ready));
    if (!idle_.empty()) {
      std::unique_ptr<Pooled> pooled = std::move(idle_.back());
      idle_.pop_back();
      return pooled;
    }
    ++open_;
  }
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Connect(uri_, redacted_uri_, options_);
  if (!connection.ok()) {
    absl::MutexLock lock(&mu_);
    --open_;
    return connection.status();
  }
  auto pooled = std::make_unique<Pooled>();
  pooled->connection = *std::move(connection);
  pooled->ops = NewSqlMetadataOps(pooled->connection.get());
  return pooled;
}

void PostgresMetadataStore::Release(std::unique_ptr<Pooled> pooled) {
  const bool reusable = pooled->connection->Reusable();
  if (!reusable) pooled.reset();
  absl::MutexLock lock(&mu_);
  if (reusable) {
    idle_.push_back(std::move(pooled));
  } else {
    --open_;
  }
}

absl::Status PostgresMetadataStore::RunTransaction(
    absl::string_view begin,
    absl::FunctionRef<absl::Status(MetadataTransaction&)> body) {
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<Pooled> pooled, Acquire());
  Connection& c = *pooled->connection;
  absl::Status status = c.Exec(std::string(begin)).status();
  if (status.ok()) status = body(*pooled->ops);
  if (status.ok() && c.InFailedTransaction()) {
    // The body went on after a failed statement, which rolls the whole
    // transaction back.
    status = absl::AbortedError(
        absl::StrCat(redacted_uri_,
                     ": a statement of the transaction failed, so none of "
                     "its changes were kept"));
  }
  if (status.ok()) {
    absl::StatusOr<std::string> tag = c.Exec("COMMIT");
    if (!tag.ok()) {
      status = tag.status();
    } else if (*tag != "COMMIT") {
      status = absl::AbortedError(absl::StrCat(
          redacted_uri_, ": the transaction was rolled back (", *tag, ")"));
    }
  }
  if (!status.ok() && c.InTransaction()) {
    const absl::Status rollback = c.Exec("ROLLBACK").status();
    if (!rollback.ok()) {
      status = absl::Status(
          status.code(),
          absl::StrCat(status.message(),
                       " (and the rollback failed: ", rollback.message(), ")"));
    }
  }
  Release(std::move(pooled));
  return status;
}

absl::Status PostgresMetadataStore::RunRead(
    absl::FunctionRef<absl::Status(MetadataReader&)> body) {
  return RunTransaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
                        [&](MetadataTransaction& ops) { return body(ops); });
}

absl::Status PostgresMetadataStore::RunWrite(
    absl::FunctionRef<absl::Status(MetadataTransaction&)> body) {
  return RunTransaction(
      absl::StrCat("BEGIN ISOLATION LEVEL READ COMMITTED; SELECT "
                   "pg_advisory_xact_lock(",
                   kWriteLockKey, ")"),
      body);
}

}  // namespace bnn::server
