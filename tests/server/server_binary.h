// The real bnn-server binary as a child process on a free loopback port, with
// a client of it: for the tests of the binary (flags, signals, health,
// shutdown, the status table of docs/api.md).
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

#include "tests/server/server_test_util.h"

namespace bnn::server::testutil {

class ServerBinary {
 public:
  // Starts `binary --listen 127.0.0.1:0 --data-dir DATA_DIR
  // --metrics-listen '' extra_flags...` (stderr to `log_path`) and waits for
  // "bnn-server listening on HOST:PORT".
  static absl::StatusOr<std::unique_ptr<ServerBinary>> Start(
      const std::string& binary, const std::string& data_dir,
      const std::string& log_path,
      const std::vector<std::string>& extra_flags = {});

  // Sends `signal_number` and returns the exit status; DeadlineExceeded if
  // the process is still running after `timeout`.
  absl::StatusOr<int> Stop(int signal_number,
                           absl::Duration timeout = absl::Seconds(30));
  // The two halves of Stop().
  void Signal(int signal_number) { process_->Signal(signal_number); }
  absl::StatusOr<int> Wait(absl::Duration timeout) {
    return process_->Wait(timeout);
  }

  const std::string& address() const { return address_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  v1::BnnService::Stub* stub() const { return stub_.get(); }
  // What the server wrote to stderr so far.
  std::string Log() const { return ReadFileOrEmpty(log_path_); }

  // Uploads `rows` rows of CubicDataset(rows) as a regression set named
  // "cubic"; returns the dataset id.
  absl::StatusOr<std::string> UploadCubic(int rows);
  // StartTraining; returns the job id.
  absl::StatusOr<std::string> StartTraining(
      const v1::StartTrainingRequest& request);
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);
  // Polls the job every 20 ms until `done` holds or `timeout` passes, and
  // returns it as last seen.
  absl::StatusOr<v1::Job> WaitForJob(
      const std::string& job_id,
      const std::function<bool(const v1::Job&)>& done,
      absl::Duration timeout = absl::Seconds(120));

 private:
  ServerBinary(std::unique_ptr<ChildProcess> process, std::string log_path,
               std::string address);

  std::unique_ptr<ChildProcess> process_;
  std::string log_path_;
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::BnnService::Stub> stub_;
};

// A channel with a connection of its own (gRPC shares one connection among
// channels to an address unless told otherwise): a separate client.
std::shared_ptr<grpc::Channel> NewClientChannel(const std::string& address);

// One unary call through the generic stub; `request` and the returned bytes
// are serialised protobuf messages (for services whose protos are not
// packaged, such as health).
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
