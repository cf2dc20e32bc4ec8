// The bnn-server binary with TLS, mutual TLS and bearer tokens: every RPC
// of the service descriptor against every kind of credential, token reload
// on SIGHUP, the refusal to listen unprotected on a non-loopback address,
// and HTTPS on the metrics endpoint. Certificates are made by openssl at
// test time (test_certs.h); the server runs as a child process
// (bnn::testing::ServerProcess).
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <signal.h>
#include <stdlib.h>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_replace.h>
#include <absl/strings/str_split.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/v1/bnn_service.grpc.pb.h"

#include "inference/grpc_predict_v2.grpc.pb.h"
#include "server/api/bnn_v1/method_scopes.h"
#include "server/api/inference_v2/method_scopes.h"
#include "server/auth/scope.h"
#include "server/auth/token_file.h"
#include "tests/server/auth/test_certs.h"
#include "tests/server/server_binary.h"
#include "tests/server/server_test_util.h"
#include "tests/test_util/http_client.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::NewClientChannel;
using ::bnn::server::testutil::RawCall;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::UploadCubic;
using ::bnn::server::testutil::WithTestCerts;
using ::bnn::testing::CommandResult;
using ::bnn::testing::RunCommand;
using ::bnn::testing::ServerProcess;
using ::testing::HasSubstr;
using ::testing::Not;

// Calls `method` ("/package.Service/Method", any kind of RPC) with one empty
// message (RawCall) and returns the final status. `authorization` is sent as
// the "authorization" metadata unless empty.
grpc::Status CallWithEmptyMessage(const std::shared_ptr<grpc::Channel>& channel,
                                  const std::string& method,
                                  const std::string& authorization) {
  const absl::Status status =
      RawCall(channel, method, /*request=*/"", authorization).status();
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

bool IsAuthError(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         status.error_code() == grpc::StatusCode::PERMISSION_DENIED;
}

std::string MethodPath(const std::string& method) {
  return absl::StrCat("/bnn.v1.BnnService/", method);
}

class BnnServerAuthTest : public WithTestCerts {
 protected:
  static void SetUpTestSuite() {
    // Idle channels answer the server's shutdown GOAWAY promptly (see
    // main_test.cc).
    setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "50", 1);
    WithTestCerts::SetUpTestSuite();
  }

  BnnServerAuthTest() : token_file_(dir_.path() + "/tokens") {}

  // Starts bnn-server with `flags` after ServerProcess's (loopback, free
  // port, no metrics) and returns its gRPC address, or "" if it did not
  // start.
  std::string Start(const std::vector<std::string>& flags) {
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(BNN_SERVER_PATH, dir_.path() + "/data", log_path(),
                             flags);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return "";
    server_ = *std::move(server);
    address_ = server_->address();
    return address_;
  }
  // Starts bnn-server with `flags`, expecting it to exit without listening;
  // returns its log.
  std::string StartFails(const std::vector<std::string>& flags) {
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(BNN_SERVER_PATH, dir_.path() + "/data", log_path(),
                             flags);
    EXPECT_FALSE(server.ok())
        << "bnn-server started on " << (*server)->address();
    return Log();
  }
  int Stop() {
    const absl::StatusOr<int> code = server_->Stop(SIGTERM);
    EXPECT_TRUE(code.ok()) << code.status() << "\n" << Log();
    return code.value_or(-1);
  }

  // A new token with `scopes`, added to the lines WriteTokenFile() writes.
  std::string AddToken(absl::string_view scopes, absl::string_view name) {
    const NewToken created = *CreateToken(*ScopeSet::Parse(scopes), name);
    token_lines_ += FormatTokenLine(created.entry) + "\n";
    return created.token;
  }
  void WriteTokenFile() { std::ofstream(token_file_) << token_lines_; }

  std::shared_ptr<grpc::Channel> Plaintext() const {
    return NewClientChannel(address_);
  }
  // A TLS channel trusting `root_ca`, presenting `cert` and `key` if set.
  std::shared_ptr<grpc::Channel> Tls(const std::string& root_ca,
                                     const std::string& cert = "",
                                     const std::string& key = "") const {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadFileOrEmpty(root_ca);
    if (!cert.empty()) {
      options.pem_cert_chain = ReadFileOrEmpty(cert);
      options.pem_private_key = ReadFileOrEmpty(key);
    }
    return NewClientChannel(address_, /*token=*/"",
                            grpc::SslCredentials(options));
  }

  std::string log_path() const { return dir_.path() + "/server.log"; }
  std::string Log() const { return ReadFileOrEmpty(log_path()); }
  // Log lines of denied calls.
  int Denials() const {
    int count = 0;
    for (const absl::string_view line : absl::StrSplit(Log(), '\n')) {
      if (absl::StrContains(line, "rejected: UNAUTHENTICATED") ||
          absl::StrContains(line, "rejected: PERMISSION_DENIED")) {
        ++count;
      }
    }
    return count;
  }

  TempDir dir_;
  const std::string token_file_;
  std::string token_lines_;
  std::unique_ptr<ServerProcess> server_;
  std::string address_;
};

// For every RPC of the service: no token and an unknown or malformed one are
// UNAUTHENTICATED; each scope's token is PERMISSION_DENIED exactly when the
// scope does not grant the RPC's, and otherwise gets past authentication
// (the empty request then fails validation or succeeds). One log line per
// denial, never holding a token.
TEST_F(BnnServerAuthTest, EveryRpcChecksItsScopeForEveryKindOfToken) {
  std::map<std::string, std::string> tokens;  // scopes -> token
  for (const char* scopes : {"predict", "train", "admin", "predict,train"}) {
    tokens[scopes] = AddToken(
        scopes, absl::StrCat("t-", absl::StrReplaceAll(scopes, {{",", "-"}})));
  }
  WriteTokenFile();
  ASSERT_NE(Start({"--token-file", token_file_}), "");
  const std::shared_ptr<grpc::Channel> channel = Plaintext();

  // Found through a message of the file, which links and registers it.
  const google::protobuf::ServiceDescriptor* service =
      v1::PredictRequest::descriptor()->file()->FindServiceByName("BnnService");
  ASSERT_NE(service, nullptr);
  ASSERT_GE(service->method_count(), 15);
  int denials = 0;
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string method = service->method(i)->name();
    SCOPED_TRACE(method);
    const std::string path = MethodPath(method);
    for (const std::string& unauthenticated :
         {std::string(), std::string("Bearer bnn_not-a-token"),
          std::string("Basic dXNlcjpwYXNz"), tokens["admin"]}) {
      const grpc::Status status =
          CallWithEmptyMessage(channel, path, unauthenticated);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << unauthenticated << ": " << status.error_message();
      ++denials;
    }
    const Scope required = *RequiredScope(method);
    for (const auto& [scopes, token] : tokens) {
      const grpc::Status status =
          CallWithEmptyMessage(channel, path, "Bearer " + token);
      if (ScopeSet::Parse(scopes)->Grants(required)) {
        EXPECT_FALSE(IsAuthError(status))
            << scopes << ": " << status.error_code() << " "
            << status.error_message();
      } else {
        EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << scopes;
        EXPECT_THAT(
            status.error_message(),
            HasSubstr(absl::StrCat("needs scope ", ScopeToString(required))));
        ++denials;
      }
    }
  }
  EXPECT_EQ(Denials(), denials);
  const std::string log = Log();
  for (const auto& [scopes, token] : tokens) {
    EXPECT_THAT(log, Not(HasSubstr(token)));
  }
  EXPECT_THAT(log, HasSubstr("rejected: PERMISSION_DENIED: token 't-predict' "
                             "(scopes predict) may not call DeleteSnapshot"));
  EXPECT_THAT(log, HasSubstr("from ipv4:127.0.0.1:"));
  EXPECT_EQ(Stop(), 0);
}

// The same for every RPC of the Open Inference Protocol's service
// (inference.GRPCInferenceService), and its REST endpoints on --http-listen:
// the health checks need no token (and ignore a bad one), the others their
// scope (server/api/inference_v2/method_scopes.cc).
TEST_F(BnnServerAuthTest, EveryInferenceRpcChecksItsScopeForEveryKindOfToken) {
  std::map<std::string, std::string> tokens;  // scopes -> token
  for (const char* scopes : {"predict", "train", "admin", "predict,train"}) {
    tokens[scopes] = AddToken(
        scopes, absl::StrCat("t-", absl::StrReplaceAll(scopes, {{",", "-"}})));
  }
  WriteTokenFile();
  ASSERT_NE(
      Start({"--token-file", token_file_, "--http-listen", "127.0.0.1:0"}), "");
  const std::string http = *server_->process().WaitForLine(
      "bnn-server http on ", absl::ZeroDuration());
  const std::shared_ptr<grpc::Channel> channel = Plaintext();
  const google::protobuf::ServiceDescriptor* service =
      inference::ModelInferRequest::descriptor()->file()->FindServiceByName(
          "GRPCInferenceService");
  ASSERT_NE(service, nullptr);
  ASSERT_EQ(service->method_count(), 6);
  // The REST endpoint of each method (a model that does not exist: past
  // authentication it is 404, never 401 or 403).
  const std::map<std::string, std::pair<std::string, std::string>> rest = {
      {"ServerLive", {"GET", "/v2/health/live"}},
      {"ServerReady", {"GET", "/v2/health/ready"}},
      {"ModelReady", {"GET", "/v2/models/m/ready"}},
      {"ServerMetadata", {"GET", "/v2"}},
      {"ModelMetadata", {"GET", "/v2/models/m"}},
      {"ModelInfer", {"POST", "/v2/models/m/infer"}},
  };
  int denials = 0;
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string method = service->method(i)->name();
    SCOPED_TRACE(method);
    const std::string path = "/inference.GRPCInferenceService/" + method;
    const std::optional<Scope> required = *oip::RequiredScope(method);
    const auto& [verb, url] = rest.at(method);
    const auto rest_status = [&, verb = verb,
                              url = url](const std::string& authorization) {
      std::vector<std::pair<std::string, std::string>> headers;
      if (!authorization.empty()) {
        headers.emplace_back("Authorization", authorization);
      }
      const absl::StatusOr<bnn::testing::HttpResponse> response =
          bnn::testing::HttpRequest(http, verb, url, "{}", headers);
      EXPECT_TRUE(response.ok()) << response.status();
      return response.ok() ? response->status : 0;
    };
    for (const std::string& unauthenticated :
         {std::string(), std::string("Bearer bnn_not-a-token"),
          std::string("Basic dXNlcjpwYXNz"), tokens["admin"]}) {
      const grpc::Status status =
          CallWithEmptyMessage(channel, path, unauthenticated);
      const int http_status = rest_status(unauthenticated);
      if (required.has_value()) {
        EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << unauthenticated << ": " << status.error_message();
        EXPECT_EQ(http_status, 401) << unauthenticated;
        denials += 2;
      } else {
        EXPECT_TRUE(status.ok()) << status.error_message();
        EXPECT_EQ(http_status, 200);
      }
    }
    for (const auto& [scopes, token] : tokens) {
      const grpc::Status status =
          CallWithEmptyMessage(channel, path, "Bearer " + token);
      const int http_status = rest_status("Bearer " + token);
      if (!required.has_value() || ScopeSet::Parse(scopes)->Grants(*required)) {
        EXPECT_FALSE(IsAuthError(status))
            << scopes << ": " << status.error_code() << " "
            << status.error_message();
        EXPECT_NE(http_status, 401);
        EXPECT_NE(http_status, 403);
      } else {
        EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << scopes;
        EXPECT_THAT(
            status.error_message(),
            HasSubstr(absl::StrCat("needs scope ", ScopeToString(*required))));
        EXPECT_EQ(http_status, 403) << scopes;
        denials += 2;
      }
    }
  }
  EXPECT_EQ(Denials(), denials);
  const std::string log = Log();
  for (const auto& [scopes, token] : tokens) {
    EXPECT_THAT(log, Not(HasSubstr(token)));
  }
  EXPECT_EQ(Stop(), 0);
}

// Denials come before any lookup: an existing and a missing id are refused
// alike.
TEST_F(BnnServerAuthTest, DenialsDoNotRevealWhetherAnIdExists) {
  const std::string train = AddToken("train", "pipeline");
  const std::string predict = AddToken("predict", "app");
  WriteTokenFile();
  ASSERT_NE(Start({"--token-file", token_file_}), "");
  const absl::StatusOr<std::string> uploaded =
      UploadCubic(*v1::BnnService::NewStub(NewClientChannel(address_, train)),
                  /*rows=*/10);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  const std::string existing = *uploaded;
  const std::unique_ptr<v1::BnnService::Stub> stub =
      v1::BnnService::NewStub(Plaintext());

  const auto get = [&](const std::string& id, const std::string& token) {
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::GetDatasetRequest request;
    request.set_dataset_id(id);
    v1::DatasetInfo info;
    return stub->GetDataset(&context, request, &info);
  };
  ASSERT_TRUE(get(existing, train).ok());
  EXPECT_EQ(get("ds-0000000000000000", train).error_code(),
            grpc::StatusCode::NOT_FOUND);
  for (const std::string& token : {std::string(), predict}) {
    const grpc::Status found = get(existing, token);
    const grpc::Status missing = get("ds-0000000000000000", token);
    EXPECT_TRUE(IsAuthError(found)) << found.error_message();
    EXPECT_EQ(found.error_code(), missing.error_code());
    EXPECT_EQ(found.error_message(), missing.error_message());
    EXPECT_THAT(found.error_message(), Not(HasSubstr(existing)));
  }
  EXPECT_EQ(Stop(), 0);
}

TEST_F(BnnServerAuthTest, HealthAndReflectionNeedNoToken) {
  AddToken("admin", "ops");
  WriteTokenFile();
  ASSERT_NE(Start({"--token-file", token_file_}), "");
  const std::shared_ptr<grpc::Channel> channel = Plaintext();
  // HealthCheckRequest{} asks for the server as a whole.
  EXPECT_TRUE(
      CallWithEmptyMessage(channel, "/grpc.health.v1.Health/Check", "").ok());
  const grpc::Status reflection = CallWithEmptyMessage(
      channel, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      "");
  EXPECT_FALSE(IsAuthError(reflection)) << reflection.error_message();
  EXPECT_EQ(
      CallWithEmptyMessage(channel, MethodPath("ListMethods"), "").error_code(),
      grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Stop(), 0);
}

// SIGHUP re-reads the token file: a new token works, a removed one stops
// working, and a broken file keeps the tokens in use.
TEST_F(BnnServerAuthTest, SighupReloadsTheTokenFile) {
  const std::string first = AddToken("predict", "first");
  WriteTokenFile();
  ASSERT_NE(Start({"--token-file", token_file_}), "");
  const std::shared_ptr<grpc::Channel> channel = Plaintext();
  const std::string list = MethodPath("ListMethods");
  ASSERT_TRUE(CallWithEmptyMessage(channel, list, "Bearer " + first).ok());

  token_lines_.clear();
  const std::string second = AddToken("predict", "second");
  WriteTokenFile();
  // Reloaded only on the signal.
  EXPECT_EQ(
      CallWithEmptyMessage(channel, list, "Bearer " + second).error_code(),
      grpc::StatusCode::UNAUTHENTICATED);
  server_->process().Signal(SIGHUP);
  const auto wait_for_log = [&](absl::string_view text, int count) {
    for (int i = 0; i < 500; ++i) {
      int found = 0;
      for (const absl::string_view line : absl::StrSplit(Log(), '\n')) {
        if (absl::StrContains(line, text)) ++found;
      }
      if (found >= count) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  };
  ASSERT_TRUE(wait_for_log("SIGHUP: token file reloaded, 1 tokens", 1))
      << Log();
  EXPECT_TRUE(CallWithEmptyMessage(channel, list, "Bearer " + second).ok());
  EXPECT_EQ(CallWithEmptyMessage(channel, list, "Bearer " + first).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  std::ofstream(token_file_) << token_lines_ << "not a token line\n";
  server_->process().Signal(SIGHUP);
  ASSERT_TRUE(wait_for_log("SIGHUP: token file not reloaded", 1)) << Log();
  EXPECT_THAT(Log(), HasSubstr("line 2: expected 3 fields"));
  EXPECT_TRUE(CallWithEmptyMessage(channel, list, "Bearer " + second).ok());
  EXPECT_EQ(Stop(), 0);
}

TEST_F(BnnServerAuthTest, NonLoopbackAddressNeedsCredentialsOrExplicitOptOut) {
  const std::string refused = StartFails({"--listen", "0.0.0.0:0"});
  EXPECT_THAT(refused, HasSubstr("--listen 0.0.0.0:0 is not a loopback "
                                 "address, and neither --token-file nor "
                                 "--tls-client-ca is given"));
  EXPECT_THAT(refused, HasSubstr("--allow-unauthenticated"));
  EXPECT_THAT(StartFails({"--listen", "[::]:0"}),
              HasSubstr("--listen [::]:0 is not a loopback address"));

  AddToken("admin", "ops");
  WriteTokenFile();
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{
           {"--listen", "0.0.0.0:0", "--token-file", token_file_},
           {"--listen", "0.0.0.0:0", "--allow-unauthenticated"},
           {"--listen", "0.0.0.0:0", "--tls-cert", certs_->server_cert,
            "--tls-key", certs_->server_key, "--tls-client-ca", certs_->ca}}) {
    SCOPED_TRACE(flags.back());
    ASSERT_THAT(Start(flags), ::testing::StartsWith("0.0.0.0:"));
    EXPECT_EQ(Stop(), 0);
  }
}

TEST_F(BnnServerAuthTest, TlsServesOnlyTlsClientsThatTrustItsCertificate) {
  ASSERT_NE(Start({"--tls-cert", certs_->server_cert, "--tls-key",
                   certs_->server_key, "--metrics-listen=127.0.0.1:0"}),
            "");
  const std::string metrics_url = server_->metrics_url();
  const std::string list = MethodPath("ListMethods");
  EXPECT_TRUE(CallWithEmptyMessage(Tls(certs_->ca), list, "").ok());
  EXPECT_EQ(CallWithEmptyMessage(Plaintext(), list, "").error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(CallWithEmptyMessage(Tls(certs_->other_ca), list, "").error_code(),
            grpc::StatusCode::UNAVAILABLE);

  // The metrics endpoint serves plain HTTP (Debian's civetweb cannot serve
  // TLS), which a TLS server allows on a loopback address only.
  ASSERT_TRUE(absl::StartsWith(metrics_url, "http://")) << metrics_url;
  const std::string host_port(
      absl::StripSuffix(absl::StripPrefix(metrics_url, "http://"), "/metrics"));
  const absl::StatusOr<bnn::testing::HttpResponse> scraped =
      bnn::testing::HttpGet(host_port, "/metrics");
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  EXPECT_EQ(scraped->status, 200);
  EXPECT_THAT(scraped->body, HasSubstr("bnn_rpc"));
  EXPECT_EQ(Stop(), 0);
}

TEST_F(BnnServerAuthTest, TlsRefusesAMetricsEndpointOffLoopback) {
  EXPECT_THAT(StartFails({"--tls-cert", certs_->server_cert, "--tls-key",
                          certs_->server_key, "--metrics-listen=0.0.0.0:0"}),
              HasSubstr("--metrics-listen 0.0.0.0:0 is not a loopback "
                        "address, and --tls-cert is given"));
}

TEST_F(BnnServerAuthTest, MutualTlsRefusesMissingAndForeignClientCertificates) {
  const std::string token = AddToken("predict", "app");
  WriteTokenFile();
  ASSERT_NE(
      Start({"--tls-cert", certs_->server_cert, "--tls-key", certs_->server_key,
             "--tls-client-ca", certs_->ca, "--token-file", token_file_}),
      "");
  const std::string list = MethodPath("ListMethods");
  // Both layers: the client certificate gets the call to the service, the
  // token through it.
  const std::shared_ptr<grpc::Channel> ours =
      Tls(certs_->ca, certs_->client_cert, certs_->client_key);
  EXPECT_TRUE(CallWithEmptyMessage(ours, list, "Bearer " + token).ok());
  EXPECT_EQ(CallWithEmptyMessage(ours, list, "").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  for (const std::shared_ptr<grpc::Channel>& refused :
       {Tls(certs_->ca),
        Tls(certs_->ca, certs_->other_client_cert, certs_->other_client_key),
        Plaintext()}) {
    EXPECT_EQ(
        CallWithEmptyMessage(refused, list, "Bearer " + token).error_code(),
        grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_EQ(Stop(), 0);
}

TEST_F(BnnServerAuthTest, BadTlsFilesStopTheServerWithAMessage) {
  EXPECT_THAT(StartFails({"--tls-cert", certs_->server_cert}),
              HasSubstr("--tls-cert needs --tls-key"));
  EXPECT_THAT(StartFails({"--tls-cert", certs_->expired_cert, "--tls-key",
                          certs_->server_key}),
              HasSubstr(": certificate 1 expired on "));
  EXPECT_THAT(StartFails({"--token-file", dir_.path() + "/missing"}),
              HasSubstr("cannot read token file"));
}

// bnnctl token create prints a token once and the line for the token file;
// the server accepts exactly that token with exactly those scopes, from
// bnnctl too (BNN_TOKEN, over mutual TLS). bnnctl health needs no token.
TEST_F(BnnServerAuthTest, TokensFromBnnctlWorkThroughBnnctl) {
  // Runs bnnctl with `args`; its exit code and output.
  const auto bnnctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), BNNCTL_PATH);
    absl::StatusOr<CommandResult> result =
        RunCommand(args, dir_.path(), absl::Seconds(20));
    EXPECT_TRUE(result.ok()) << result.status();
    return result.value_or(CommandResult());
  };
  const CommandResult create =
      bnnctl({"token", "create", "--scopes", "predict", "--name", "app"});
  ASSERT_EQ(create.exit_code, 0) << create.err;
  std::string token;
  std::string line;
  for (absl::string_view printed : absl::StrSplit(create.out, '\n')) {
    if (absl::ConsumePrefix(&printed, "token  ")) token = std::string(printed);
    if (absl::ConsumePrefix(&printed, "line   ")) line = std::string(printed);
  }
  ASSERT_FALSE(token.empty()) << create.out;
  EXPECT_THAT(line, ::testing::EndsWith(" predict app"));
  EXPECT_THAT(line, Not(HasSubstr(token)));
  std::ofstream(token_file_) << line << "\n";

  ASSERT_NE(
      Start({"--tls-cert", certs_->server_cert, "--tls-key", certs_->server_key,
             "--tls-client-ca", certs_->ca, "--token-file", token_file_}),
      "");
  const std::vector<std::string> tls = {"--server",   address_,
                                        "--tls-ca",   certs_->ca,
                                        "--tls-cert", certs_->client_cert,
                                        "--tls-key",  certs_->client_key};
  const auto with_tls = [&](std::vector<std::string> args) {
    args.insert(args.begin(), tls.begin(), tls.end());
    return args;
  };
  EXPECT_EQ(bnnctl(with_tls({"health"})).exit_code, 0);
  const CommandResult no_token = bnnctl(with_tls({"methods"}));
  EXPECT_EQ(no_token.exit_code, 1);
  EXPECT_THAT(no_token.err,
              HasSubstr("UNAUTHENTICATED: ListMethods needs a bearer"));
  setenv("BNN_TOKEN", token.c_str(), 1);
  EXPECT_EQ(bnnctl(with_tls({"methods"})).exit_code, 0);
  const CommandResult wrong_scope = bnnctl(with_tls({"datasets"}));
  EXPECT_EQ(wrong_scope.exit_code, 1);
  EXPECT_THAT(wrong_scope.err, HasSubstr("PERMISSION_DENIED: token 'app' "
                                         "(scopes predict) may not call "
                                         "ListDatasets"));
  // No TLS: the server refuses the connection.
  EXPECT_EQ(bnnctl({"--server", address_, "methods"}).exit_code, 1);
  unsetenv("BNN_TOKEN");
  EXPECT_EQ(Stop(), 0);
}

}  // namespace
}  // namespace bnn::server
