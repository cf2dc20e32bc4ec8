#include "server/auth/tls.h"

#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/server/auth/test_certs.h"
#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::WithTestCerts;

TEST(TlsOptionsTest, CertificateAndKeyGoTogetherAndClientCaNeedsThem) {
  TlsOptions options;
  EXPECT_TRUE(options.Validate().ok());
  options.cert_file = "c.pem";
  EXPECT_THAT(options.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                           "--tls-cert needs --tls-key"));
  options = {};
  options.key_file = "k.pem";
  EXPECT_THAT(options.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                           "--tls-key needs --tls-cert"));
  options = {};
  options.client_ca_file = "ca.pem";
  EXPECT_THAT(options.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--tls-client-ca needs --tls-cert and --tls-key"));
  options.cert_file = "c.pem";
  options.key_file = "k.pem";
  EXPECT_TRUE(options.Validate().ok());
}

class TlsServerCredentialsTest : public WithTestCerts {
 protected:
  TlsOptions Options() const {
    TlsOptions options;
    options.cert_file = certs_->server_cert;
    options.key_file = certs_->server_key;
    return options;
  }
};

TEST_F(TlsServerCredentialsTest, AcceptsMatchingFiles) {
  EXPECT_TRUE(TlsServerCredentials(Options()).ok());
  TlsOptions mutual = Options();
  mutual.client_ca_file = certs_->ca;
  EXPECT_TRUE(TlsServerCredentials(mutual).ok());
}

TEST_F(TlsServerCredentialsTest, NamesTheFlagAndFileOfEveryProblem) {
  const std::string missing = certs_dir_->path() + "/missing.pem";
  const std::string not_pem = certs_dir_->path() + "/not.pem";
  std::ofstream(not_pem) << "not a certificate\n";

  TlsOptions options = Options();
  options.cert_file = missing;
  EXPECT_THAT(TlsServerCredentials(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--tls-cert " + missing + ": No such file"));
  options = Options();
  options.cert_file = not_pem;
  EXPECT_THAT(TlsServerCredentials(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--tls-cert " + not_pem + ": holds no PEM certificate"));
  options = Options();
  options.key_file = not_pem;
  EXPECT_THAT(TlsServerCredentials(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--tls-key " + not_pem +
                           ": holds no unencrypted PEM private key"));
  options = Options();
  options.key_file = certs_->client_key;
  EXPECT_THAT(TlsServerCredentials(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--tls-key " + certs_->client_key +
                           ": does not match the certificate in --tls-cert"));
  options = Options();
  options.cert_file = certs_->expired_cert;
  EXPECT_THAT(TlsServerCredentials(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--tls-cert " + certs_->expired_cert +
                           ": certificate 1 expired on "));
  options = Options();
  options.client_ca_file = not_pem;
  EXPECT_THAT(
      TlsServerCredentials(options).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "--tls-client-ca " + not_pem + ": holds no PEM certificate"));
}

}  // namespace
}  // namespace bnn::server
