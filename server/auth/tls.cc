#include "server/auth/tls.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sstream>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/string_view.h>
#include <grpcpp/security/server_credentials.h>

#include "bnn/status.h"

namespace bnn::server {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Certificate = std::unique_ptr<X509, X509Free>;
using PrivateKey = std::unique_ptr<EVP_PKEY, KeyFree>;

absl::Status FileError(absl::string_view flag, absl::string_view path,
                       absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " ", path, ": ", problem));
}

absl::StatusOr<std::string> ReadPem(absl::string_view flag,
                                    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return FileError(flag, path, strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::string NotAfter(const X509* cert) {
  Bio out(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(out.get(), X509_get0_notAfter(cert));
  char* data = nullptr;
  const long size = BIO_get_mem_data(out.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

// Every certificate in `pem`: at least one, none expired or not yet valid.
absl::StatusOr<std::vector<Certificate>> ParseCertificates(
    absl::string_view flag, const std::string& path, const std::string& pem) {
  std::vector<Certificate> certs;
  Bio bio = MemoryBio(pem);
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  // The loop ends on an error (no further PEM block) left in the queue.
  ERR_clear_error();
  if (certs.empty()) {
    return FileError(flag, path, "holds no PEM certificate");
  }
  for (size_t i = 0; i < certs.size(); ++i) {
    if (X509_cmp_current_time(X509_get0_notAfter(certs[i].get())) < 0) {
      return FileError(flag, path,
                       absl::StrCat("certificate ", i + 1, " expired on ",
                                    NotAfter(certs[i].get())));
    }
    if (X509_cmp_current_time(X509_get0_notBefore(certs[i].get())) > 0) {
      return FileError(
          flag, path, absl::StrCat("certificate ", i + 1, " is not valid yet"));
    }
  }
  return certs;
}

}  // namespace

absl::Status TlsOptions::Validate() const {
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError(cert_file.empty()
                                          ? "--tls-key needs --tls-cert"
                                          : "--tls-cert needs --tls-key");
  }
  if (!client_ca_file.empty() && cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs --tls-cert and --tls-key: client "
        "certificates are checked only over TLS");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsServerCredentials(
    const TlsOptions& options) {
  BNN_RETURN_IF_ERROR(options.Validate());
  BNN_ASSIGN_OR_RETURN(std::string cert_pem,
                       ReadPem("tls-cert", options.cert_file));
  BNN_ASSIGN_OR_RETURN(std::string key_pem,
                       ReadPem("tls-key", options.key_file));
  BNN_ASSIGN_OR_RETURN(
      const std::vector<Certificate> chain,
      ParseCertificates("tls-cert", options.cert_file, cert_pem));
  Bio key_bio = MemoryBio(key_pem);
  const PrivateKey key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return FileError("tls-key", options.key_file,
                     "holds no unencrypted PEM private key");
  }
  if (X509_check_private_key(chain[0].get(), key.get()) != 1) {
    ERR_clear_error();
    return FileError(
        "tls-key", options.key_file,
        absl::StrCat("does not match the certificate in --tls-cert ",
                     options.cert_file));
  }

  grpc::SslServerCredentialsOptions ssl(
      options.client_ca_file.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!options.client_ca_file.empty()) {
    BNN_ASSIGN_OR_RETURN(ssl.pem_root_certs,
                         ReadPem("tls-client-ca", options.client_ca_file));
    BNN_RETURN_IF_ERROR(ParseCertificates("tls-client-ca",
                                          options.client_ca_file,
                                          ssl.pem_root_certs)
                            .status());
  }
  ssl.pem_key_cert_pairs.push_back({std::move(key_pem), std::move(cert_pem)});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace bnn::server
