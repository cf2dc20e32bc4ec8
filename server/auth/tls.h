// TLS for the gRPC port (and the metrics endpoint): the server's certificate
// and key, and optionally a CA that client certificates must be signed by
// (mutual TLS).
#ifndef BNN_SERVER_AUTH_TLS_H_
#define BNN_SERVER_AUTH_TLS_H_

#include <memory>
#include <string>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <grpcpp/security/server_credentials.h>

namespace bnn::server {

struct TlsOptions {
  // --tls-cert: PEM file of the server's certificate chain, leaf first.
  // Empty: plaintext. Needs key_file.
  std::string cert_file;
  // --tls-key: PEM file of the certificate's private key.
  std::string key_file;
  // --tls-client-ca: PEM file of the CA certificates a client certificate
  // must chain to; clients without one are refused during the handshake.
  // Empty: no client certificate is asked for. Needs cert_file.
  std::string client_ca_file;

  bool enabled() const { return !cert_file.empty(); }
  // InvalidArgument naming the flag unless --tls-cert and --tls-key are
  // given together, and --tls-client-ca only with them.
  absl::Status Validate() const;
};

// Reads the files of `options` (enabled) and checks them before anything
// listens: each parses as PEM, the key matches the certificate, and no
// certificate has expired. InvalidArgument naming the flag and the file.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsServerCredentials(
    const TlsOptions& options);

}  // namespace bnn::server

#endif  // BNN_SERVER_AUTH_TLS_H_
