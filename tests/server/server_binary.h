// Calls over the wire for the tests of the bnn-server binary (flags,
// signals, health, shutdown, the status table of docs/api.md), which start
// it with bnn::testing::ServerProcess (tests/test_util/subprocess.h).
#ifndef BNN_TESTS_SERVER_SERVER_BINARY_H_
#define BNN_TESTS_SERVER_SERVER_BINARY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <absl/status/statusor.h>
#include <absl/time/time.h>
#include <grpcpp/grpcpp.h>

#include "bnn/v1/bnn_service.grpc.pb.h"

#include "tests/test_util/subprocess.h"

namespace bnn::server::testutil {

// Uploads CubicDataset(rows) as a regression set named `name`, or, if it is
// empty, "cubic-N" with N new in this process (dataset names are unique);
// returns the dataset id.
absl::StatusOr<std::string> UploadCubic(v1::BnnService::Stub& stub, int rows,
                                        const std::string& name = "");
// StartTraining; returns the job id.
absl::StatusOr<std::string> StartTraining(
    v1::BnnService::Stub& stub, const v1::StartTrainingRequest& request);
absl::StatusOr<v1::Job> GetJob(v1::BnnService::Stub& stub,
                               const std::string& job_id);
// Polls the job every 20 ms until `done` holds or `timeout` passes, and
// returns it as last seen.
absl::StatusOr<v1::Job> WaitForJob(
    v1::BnnService::Stub& stub, const std::string& job_id,
    const std::function<bool(const v1::Job&)>& done,
    absl::Duration timeout = absl::Seconds(120));

// A channel with a connection of its own (gRPC shares one connection among
// channels to an address unless told otherwise): a separate client. Unless
// `token` is empty, every call on it sends "authorization: Bearer TOKEN"
// (for a server with --token-file).
std::shared_ptr<grpc::Channel> NewClientChannel(
    const std::string& address, const std::string& token = "",
    std::shared_ptr<grpc::ChannelCredentials> credentials =
        grpc::InsecureChannelCredentials());

// One call of `method` ("/package.Service/Method", of any kind) through the
// generic stub, within 10 s: sends `request`, half-closes and reads what the
// server sends back. Messages are serialised protobufs (for services whose
// protos are not packaged, such as health, or to call every method of a
// service alike). `authorization`, unless empty, is sent as the
// "authorization" metadata. The messages received, or the call's error.
absl::StatusOr<std::vector<std::string>> RawCall(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
    const std::string& request, const std::string& authorization = "");

// RawCall of a unary method: its one response message.
absl::StatusOr<std::string> RawUnaryCall(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
    const std::string& request);

// grpc.health.v1.Health/Check of `service`: the ServingStatus enum value
// (1 SERVING, 2 NOT_SERVING), or the call's error (NotFound for a service
// the server does not know).
absl::StatusOr<int> HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& service);

}  // namespace bnn::server::testutil

#endif  // BNN_TESTS_SERVER_SERVER_BINARY_H_
