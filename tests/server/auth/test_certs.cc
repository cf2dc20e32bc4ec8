#include "tests/server/auth/test_certs.h"

#include <cstdlib>
#include <fstream>
#include <utility>

#include <absl/strings/str_cat.h>

#include "tests/server/server_test_util.h"

namespace bnn::server::testutil {
namespace {

// Days 0 makes a certificate whose notAfter is its notBefore: expired at
// once (OpenSSL counts a certificate as expired at its notAfter second).
constexpr char kScript[] = R"(set -eu
key() { echo "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $1.key"; }
ca() {
  openssl req -x509 $(key $1) -out $1.pem -days 2 -subj "/CN=$1" \
    -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign
}
# sign NAME CA DAYS EXTENSIONS: a certificate for NAME.csr signed by CA.
sign() {
  printf '%s\n' "$4" > $1.ext
  openssl x509 -req -in $1.csr -CA $2.pem -CAkey $2.key -CAcreateserial \
    -days $3 -extfile $1.ext -out $1.pem
}
ca ca
ca other_ca
openssl req $(key server) -out server.csr -subj /CN=localhost
sign server ca 2 "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
cp server.csr expired.csr
sign expired ca 0 "subjectAltName=IP:127.0.0.1,DNS:localhost"
openssl req $(key client) -out client.csr -subj /CN=bnn-test-client
sign client ca 2 "extendedKeyUsage=clientAuth"
openssl req $(key other_client) -out other_client.csr -subj /CN=other-client
sign other_client other_ca 2 "extendedKeyUsage=clientAuth"
)";

}  // namespace

absl::StatusOr<TestCerts> MakeTestCerts(const std::string& dir) {
  {
    std::ofstream script(dir + "/make_certs.sh");
    script << kScript;
  }
  const std::string log = dir + "/make_certs.log";
  const std::string command =
      absl::StrCat("cd '", dir, "' && bash make_certs.sh > '", log, "' 2>&1");
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(
        "making test certificates failed:\n", ReadFileOrEmpty(log)));
  }
  TestCerts certs;
  certs.ca = dir + "/ca.pem";
  certs.server_cert = dir + "/server.pem";
  certs.server_key = dir + "/server.key";
  certs.client_cert = dir + "/client.pem";
  certs.client_key = dir + "/client.key";
  certs.other_ca = dir + "/other_ca.pem";
  certs.other_client_cert = dir + "/other_client.pem";
  certs.other_client_key = dir + "/other_client.key";
  certs.expired_cert = dir + "/expired.pem";
  return certs;
}

TempDir* WithTestCerts::certs_dir_ = nullptr;
TestCerts* WithTestCerts::certs_ = nullptr;

void WithTestCerts::SetUpTestSuite() {
  certs_dir_ = new TempDir;
  absl::StatusOr<TestCerts> certs = MakeTestCerts(certs_dir_->path());
  ASSERT_TRUE(certs.ok()) << certs.status();
  certs_ = new TestCerts(*std::move(certs));
}

void WithTestCerts::TearDownTestSuite() {
  delete certs_;
  certs_ = nullptr;
  delete certs_dir_;
  certs_dir_ = nullptr;
}

}  // namespace bnn::server::testutil
