#include "tests/server/server_binary.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/client_interceptor.h>

#include "tests/server/server_test_util.h"

namespace bnn::server::testutil {
namespace {

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

// Adds "authorization: <value>" to the initial metadata of every call.
class AuthorizationInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit AuthorizationInterceptor(std::string value)
      : value_(std::move(value)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) final {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", value_);
    }
    methods->Proceed();
  }

 private:
  const std::string value_;
};

class AuthorizationInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit AuthorizationInterceptorFactory(std::string value)
      : value_(std::move(value)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) final {
    return new AuthorizationInterceptor(value_);
  }

 private:
  const std::string value_;
};

}  // namespace

absl::StatusOr<std::string> UploadCubic(v1::BnnService::Stub& stub, int rows,
                                        const std::string& name) {
  static std::atomic<int> uploads{0};
  const Dataset data = CubicDataset(rows);
  grpc::ClientContext context;
  v1::UploadDatasetResponse uploaded;
  auto writer = stub.UploadDataset(&context, &uploaded);
  v1::UploadDatasetRequest header;
  header.mutable_header()->set_name(
      name.empty() ? absl::StrCat("cubic-", ++uploads) : name);
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

std::shared_ptr<grpc::Channel> NewClientChannel(
    const std::string& address, const std::string& token,
    std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(-1);
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  if (!token.empty()) {
    interceptors.push_back(std::make_unique<AuthorizationInterceptorFactory>(
        absl::StrCat("Bearer ", token)));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, credentials, args, std::move(interceptors));
}

absl::StatusOr<std::vector<std::string>> RawCall(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
    const std::string& request, const std::string& authorization) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  if (!authorization.empty()) {
    context.AddMetadata("authorization", authorization);
  }
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &cq);
  // One operation at a time, each waited for; false once the call ended.
  const auto done = [&cq](intptr_t tag_value) {
    void* tag = nullptr;
    bool ok = false;
    return cq.Next(&tag, &ok) && ok &&
           tag == reinterpret_cast<void*>(tag_value);
  };
  call->StartCall(reinterpret_cast<void*>(1));
  if (done(1)) {
    grpc::Slice slice(request);
    call->Write(grpc::ByteBuffer(&slice, 1), reinterpret_cast<void*>(2));
    if (done(2)) {
      call->WritesDone(reinterpret_cast<void*>(3));
      done(3);
    }
  }
  std::vector<std::string> messages;
  while (true) {
    grpc::ByteBuffer response;
    call->Read(&response, reinterpret_cast<void*>(4));
    if (!done(4)) break;
    std::vector<grpc::Slice> slices;
    std::string& bytes = messages.emplace_back();
    if (response.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  done(5);
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok()) return FromGrpc(status);
  return messages;
}

absl::StatusOr<std::string> RawUnaryCall(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
    const std::string& request) {
  absl::StatusOr<std::vector<std::string>> messages =
      RawCall(channel, method, request);
  if (!messages.ok()) return messages.status();
  if (messages->size() != 1) {
    return absl::InternalError(
        absl::StrCat(method, " returned ", messages->size(), " messages"));
  }
  return std::move(messages->front());
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
