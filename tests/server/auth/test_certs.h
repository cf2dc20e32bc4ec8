// Certificates for the TLS tests, made at test time by the openssl command
// line tool (Debian's openssl package): a CA, a server certificate for
// 127.0.0.1 and localhost, a client certificate signed by the CA, and a
// second, unrelated CA with a client certificate of its own. EC P-256 keys,
// so that making them all takes a fraction of a second.
#ifndef BNN_TESTS_SERVER_AUTH_TEST_CERTS_H_
#define BNN_TESTS_SERVER_AUTH_TEST_CERTS_H_

#include <string>

#include <absl/status/statusor.h>
#include <gtest/gtest.h>

#include "tests/server/server_test_util.h"

namespace bnn::server::testutil {

// Paths of PEM files.
struct TestCerts {
  std::string ca;
  std::string server_cert;
  std::string server_key;
  // Signed by `ca`, for mutual TLS.
  std::string client_cert;
  std::string client_key;
  // An unrelated CA and a client certificate it signed.
  std::string other_ca;
  std::string other_client_cert;
  std::string other_client_key;
  // A server certificate (key: server_key) whose validity ended when it was
  // made.
  std::string expired_cert;
};

// Makes the files in `dir` (which must exist). Internal with openssl's
// output if a command fails.
absl::StatusOr<TestCerts> MakeTestCerts(const std::string& dir);

// A fixture whose tests share one set of TestCerts (certs_), made in
// certs_dir_ before the suite's first test and removed after its last.
class WithTestCerts : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();

  static TempDir* certs_dir_;
  static TestCerts* certs_;
};

}  // namespace bnn::server::testutil

#endif  // BNN_TESTS_SERVER_AUTH_TEST_CERTS_H_
