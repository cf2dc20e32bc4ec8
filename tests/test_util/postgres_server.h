// A real PostgreSQL server for tests, started in a temporary directory and
// removed with it: initdb, then the postgres server on a free loopback port
// with its Unix socket in the same directory, tuned for tests (no fsync).
// PostgreSQL refuses to run as root, so when the test runs as root (CI
// does) the directory is handed to the "postgres" system user that
// Debian's package creates ("nobody" without it) and initdb and postgres run
// as that user (setpriv, which also makes the kernel kill the server if
// the test process dies). Missing PostgreSQL binaries are an error naming
// where they were looked for: the server is a declared test dependency
// (deploy/install-deps.sh), never a reason to skip.
//
// One server per test binary (PostgresEnvironment), one database per test
// (CreateDatabase): starting takes about a second, a database a few tens of
// milliseconds.
#ifndef BNN_TESTS_TEST_UTIL_POSTGRES_SERVER_H_
#define BNN_TESTS_TEST_UTIL_POSTGRES_SERVER_H_

#include <memory>
#include <string>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <gtest/gtest.h>

#include "tests/test_util/subprocess.h"

namespace bnn::testing {

class PostgresServer {
 public:
  // The superuser every database is reached as (trust authentication on
  // loopback).
  static constexpr char kUser[] = "bnn";
  // A role that must give the password kPasswordUserPassword over TCP
  // (scram-sha-256), for tests of authentication failures.
  static constexpr char kPasswordUser[] = "bnn_password_user";
  static constexpr char kPasswordUserPassword[] = "correct-horse-battery";

  // Starts a server (up to `startup_timeout`). FailedPrecondition naming
  // the directory searched if the PostgreSQL server binaries are missing;
  // Internal with the tool's output if initdb or the server fail.
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start(
      absl::Duration startup_timeout = absl::Seconds(30));
  // Stops the server at once (SIGQUIT: pg_ctl stop -m immediate) and
  // removes its directory.
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // Creates an empty database.
  absl::Status CreateDatabase(absl::string_view name);
  // "postgres://bnn@127.0.0.1:PORT/DATABASE".
  std::string Uri(absl::string_view database) const;
  // Runs `sql` in `database` as the superuser, as another client would.
  absl::Status Exec(absl::string_view database, absl::string_view sql);

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  // The server's log so far.
  std::string Log() const;

 private:
  PostgresServer(std::string dir, int port)
      : dir_(std::move(dir)), port_(port) {}

  const std::string dir_;
  const int port_;
  std::unique_ptr<ChildProcess> postgres_;
};

// The test binary's server: started once before the first test, stopped
// after the last. Register it in main() or with
//   ::testing::AddGlobalTestEnvironment(new PostgresEnvironment);
// A failed start fails every test of the binary, with the reason.
class PostgresEnvironment : public ::testing::Environment {
 public:
  void SetUp() override;
  void TearDown() override;
  // The server, or null (with the reason in the failed SetUp) if it did
  // not start.
  static PostgresServer* server();
};

}  // namespace bnn::testing

#endif  // BNN_TESTS_TEST_UTIL_POSTGRES_SERVER_H_
