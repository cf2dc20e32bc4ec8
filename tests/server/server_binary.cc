#include "tests/server/server_binary.h"

#include <chrono>
#include <utility>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <grpcpp/generic/generic_stub.h>

#include "tests/server/server_test_util.h"

namespace bnn::server::testutil {
namespace {

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace

absl::StatusOr<std::string> UploadCubic(v1::BnnService::Stub& stub, int rows) {
  const Dataset data = CubicDataset(rows);
  grpc::ClientContext context;
  v1::UploadDatasetResponse uploaded;
  auto writer = stub.UploadDataset(&context, &uploaded);
  v1::UploadDatasetRequest header;
  header.mutable_header()->set_name("cubic");
  header.mutable_header()->set_task(v1::TASK_REGRESSION);
  header.mutable_header()->set_num_features(1);
  v1::UploadDatasetRequest chunk;
  for (int64_t i = 0; i < data.num_rows(); ++i) {
    v1::Example* row = chunk.mutable_chunk()->add_rows();
    row->add_x(data.features[i]);
    row->set_y(data.targets[i]);
  }
  if (writer->Write(header)) writer->Write(chunk);
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpc(status);
  return uploaded.dataset().dataset_id();
}

absl::StatusOr<std::string> StartTraining(
    v1::BnnService::Stub& stub, const v1::StartTrainingRequest& request) {
  grpc::ClientContext context;
  v1::StartTrainingResponse started;
  const grpc::Status status = stub.StartTraining(&context, request, &started);
  if (!status.ok()) return FromGrpc(status);
  return started.job_id();
}

absl::StatusOr<v1::Job> GetJob(v1::BnnService::Stub& stub,
                               const std::string& job_id) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  grpc::ClientContext context;
  v1::Job job;
  const grpc::Status status = stub.GetJob(&context, request, &job);
  if (!status.ok()) return FromGrpc(status);
  return job;
}

absl::StatusOr<v1::Job> WaitForJob(
    v1::BnnService::Stub& stub, const std::string& job_id,
    const std::function<bool(const v1::Job&)>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<v1::Job> job = GetJob(stub, job_id);
    if (!job.ok() || done(*job) || absl::Now() > deadline) return job;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

std::shared_ptr<grpc::Channel> NewClientChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

absl::StatusOr<std::string> RawUnaryCall(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
    const std::string& request) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  grpc::Slice slice(request);
  auto call =
      stub.PrepareUnaryCall(&context, method, grpc::ByteBuffer(&slice, 1), &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok()) return FromGrpc(status);
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return bytes;
}

absl::StatusOr<int> HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& service) {
  // HealthCheckRequest{service}: field 1, length-delimited (names < 128 B).
  const std::string request =
      service.empty()
          ? std::string()
          : absl::StrCat("\x0a",
                         std::string(1, static_cast<char>(service.size())),
                         service);
  absl::StatusOr<std::string> bytes =
      RawUnaryCall(channel, "/grpc.health.v1.Health/Check", request);
  if (!bytes.ok()) return bytes.status();
  // HealthCheckResponse{status}: "\x08" then the enum; empty = UNKNOWN (0).
  return bytes->size() == 2 && (*bytes)[0] == '\x08' ? (*bytes)[1] : 0;
}

}  // namespace bnn::server::testutil
