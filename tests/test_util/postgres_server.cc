#include "tests/test_util/postgres_server.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_replace.h>
#include <absl/time/clock.h>

#ifndef BNN_POSTGRES_BIN_DIR
#define BNN_POSTGRES_BIN_DIR "/usr/lib/postgresql/15/bin"
#endif

namespace bnn::testing {
namespace {

// Where initdb and postgres are: $BNN_POSTGRES_BIN_DIR, else what CMake
// found (Debian: /usr/lib/postgresql/<major>/bin, not on PATH).
std::string BinDir() {
  const char* env = std::getenv("BNN_POSTGRES_BIN_DIR");
  return env != nullptr && *env != '\0' ? env : BNN_POSTGRES_BIN_DIR;
}

// "host=... port=... user=... dbname=..." of the test server.
std::string ConnInfo(int port, absl::string_view database) {
  return absl::StrCat("host=127.0.0.1 port=", port,
                      " user=", PostgresServer::kUser, " dbname=", database,
                      " connect_timeout=5");
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start(
    absl::Duration startup_timeout) {
  const absl::Time deadline = absl::Now() + startup_timeout;
  const std::string bin = BinDir();
  for (const char* tool : {"initdb", "postgres"}) {
    if (access(absl::StrCat(bin, "/", tool).c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the PostgreSQL server (", tool, ") is not in ", bin,
          ": install the Debian package postgresql (deploy/install-deps.sh "
          "lists it among the test packages) or set BNN_POSTGRES_BIN_DIR"));
    }
  }
  std::string dir =
      (std::filesystem::path(::testing::TempDir()) / "bnn_pg_XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", dir, " failed"));
  }
  std::unique_ptr<PostgresServer> server(
      new PostgresServer(dir, PickFreePort()));

  // As root, everything runs as an unprivileged user that owns the
  // directory.
  std::vector<std::string> as_user;
  uid_t uid = geteuid();
  gid_t gid = getegid();
  if (uid == 0) {
    const passwd* user = getpwnam("postgres");
    if (user == nullptr) user = getpwnam("nobody");
    if (user == nullptr) {
      return absl::FailedPreconditionError(
          "running as root and neither a postgres nor a nobody user exists "
          "to run PostgreSQL as");
    }
    uid = user->pw_uid;
    gid = user->pw_gid;
    as_user = {"/usr/bin/setpriv",
               absl::StrCat("--reuid=", uid),
               absl::StrCat("--regid=", gid),
               "--clear-groups",
               "--pdeathsig",
               "KILL",
               "--"};
  }
  if (chown(dir.c_str(), uid, gid) != 0 || chmod(dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat("cannot hand ", dir, " to uid ",
                                            uid, ": ", strerror(errno)));
  }
  const std::string data = dir + "/data";

  std::vector<std::string> initdb = as_user;
  for (const std::string& arg :
       {absl::StrCat(bin, "/initdb"), std::string("-D"), data,
        std::string("-U"), std::string(kUser), std::string("--auth=trust"),
        std::string("--no-sync"), std::string("--no-instructions"),
        std::string("-E"), std::string("UTF8"), std::string("--locale=C")}) {
    initdb.push_back(arg);
  }
  absl::StatusOr<CommandResult> ran =
      RunCommand(initdb, dir, deadline - absl::Now());
  if (!ran.ok()) return ran.status();
  if (ran->exit_code != 0) {
    return absl::InternalError(absl::StrCat(
        "initdb failed (exit ", ran->exit_code, "): ", ran->err, ran->out));
  }
  // Loopback only; one role needs its password.
  {
    const std::string hba = data + "/pg_hba.conf";
    std::ofstream out(hba, std::ios::trunc);
    out << "local all all trust\n"
        << "host all " << kPasswordUser << " 127.0.0.1/32 scram-sha-256\n"
        << "host all all 127.0.0.1/32 trust\n";
    out.close();
    if (!out || chown(hba.c_str(), uid, gid) != 0) {
      return absl::InternalError(absl::StrCat("cannot write ", hba));
    }
  }

  std::vector<std::string> postgres = as_user;
  for (const std::string& arg : {
           absl::StrCat(bin, "/postgres"),
           std::string("-D"),
           data,
           std::string("-p"),
           absl::StrCat(server->port_),
           std::string("-k"),
           dir,
           std::string("-c"),
           std::string("listen_addresses=127.0.0.1"),
           // A test database need not survive a crash of the machine.
           std::string("-c"),
           std::string("fsync=off"),
           std::string("-c"),
           std::string("synchronous_commit=off"),
           std::string("-c"),
           std::string("full_page_writes=off"),
           std::string("-c"),
           std::string("max_connections=100"),
           std::string("-c"),
           std::string("shared_buffers=16MB"),
       }) {
    postgres.push_back(arg);
  }
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Start(postgres, dir + "/postgres.log");
  if (!child.ok()) return child.status();
  server->postgres_ = *std::move(child);

  const std::string conninfo = ConnInfo(server->port_, "postgres");
  while (PQping(conninfo.c_str()) != PQPING_OK) {
    if (!server->postgres_->IsRunning()) {
      return absl::InternalError(
          absl::StrCat("postgres exited at start-up: ", server->Log()));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "postgres did not accept connections within ",
          absl::FormatDuration(startup_timeout), ": ", server->Log()));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  absl::Status role =
      server->Exec("postgres", absl::StrCat("CREATE ROLE ", kPasswordUser,
                                            " LOGIN PASSWORD '",
                                            kPasswordUserPassword, "'"));
  if (!role.ok()) return role;
  return server;
}

PostgresServer::~PostgresServer() {
  if (postgres_ != nullptr) {
    // pg_ctl stop -m immediate sends the postmaster SIGQUIT.
    postgres_->Signal(SIGQUIT);
    if (!postgres_->Wait(absl::Seconds(10)).ok()) postgres_->Kill();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string PostgresServer::Uri(absl::string_view database) const {
  return absl::StrCat("postgres://", kUser, "@127.0.0.1:", port_, "/",
                      database);
}

absl::Status PostgresServer::Exec(absl::string_view database,
                                  absl::string_view sql) {
  PGconn* conn = PQconnectdb(ConnInfo(port_, database).c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string message = PQerrorMessage(conn);
    PQfinish(conn);
    return absl::UnavailableError(
        absl::StrCat("connecting to ", database, ": ", message));
  }
  PGresult* result = PQexec(conn, std::string(sql).c_str());
  const ExecStatusType status = PQresultStatus(result);
  absl::Status out;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    out = absl::InternalError(
        absl::StrCat(sql, ": ", PQresultErrorMessage(result)));
  }
  PQclear(result);
  PQfinish(conn);
  return out;
}

absl::Status PostgresServer::CreateDatabase(absl::string_view name) {
  return Exec("postgres", absl::StrCat("CREATE DATABASE \"", name, "\""));
}

std::string PostgresServer::Log() const {
  return ReadFileOrEmpty(dir_ + "/postgres.log");
}

namespace {
PostgresServer* environment_server = nullptr;
}  // namespace

void PostgresEnvironment::SetUp() {
  absl::StatusOr<std::unique_ptr<PostgresServer>> server =
      PostgresServer::Start();
  ASSERT_TRUE(server.ok()) << "the test PostgreSQL server did not start: "
                           << server.status();
  environment_server = server->release();
}

void PostgresEnvironment::TearDown() {
  delete environment_server;
  environment_server = nullptr;
}

PostgresServer* PostgresEnvironment::server() { return environment_server; }

}  // namespace bnn::testing
