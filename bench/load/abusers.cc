#include "bench/load/abusers.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <random>
#include <utility>

#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/notification.h>
#include <absl/time/clock.h>
#include <google/protobuf/message.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "bnn/v1/bnn_service.grpc.pb.h"
#include "bnn/v1/bnn_service.pb.h"

#include "client/bnn_client.h"

namespace bnn::bench {
namespace {

using ::bnn::client::FromGrpcStatus;

// A Predict request of `rows` rows of standard normal features.
v1::PredictRequest MakePredict(const std::string& snapshot_id, int64_t rows,
                               int num_features, int num_samples,
                               uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  v1::PredictRequest request;
  request.set_snapshot_id(snapshot_id);
  request.set_num_samples(num_samples);
  request.mutable_rows()->Reserve(static_cast<int>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    v1::Features* row = request.add_rows();
    for (int j = 0; j < num_features; ++j) row->add_x(normal(rng));
  }
  return request;
}

// `message` serialised once: the abusers send the same bytes again and
// again, so that this process spends its share of the two cores on
// sending, not on protobuf.
grpc::ByteBuffer Serialized(const google::protobuf::Message& message) {
  const std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// One Predict call of the pre-serialised `request` through the generic
// stub, cancelled `cancel_after` after it was sent unless it ended first;
// returns its status and how long it took.
absl::Status RawPredict(grpc::GenericStub* stub, grpc::ClientContext* context,
                        const grpc::ByteBuffer& request,
                        absl::Duration cancel_after, absl::Duration* took) {
  const grpc::ByteBuffer sent(request);  // shares the bytes
  grpc::ByteBuffer response;
  absl::Notification done;
  grpc::Status status;
  const absl::Time start = absl::Now();
  stub->UnaryCall(context, "/bnn.v1.BnnService/Predict", grpc::StubOptions(),
                  &sent, &response, [&](grpc::Status s) {
                    status = std::move(s);
                    done.Notify();
                  });
  if (!done.WaitForNotificationWithTimeout(cancel_after)) {
    context->TryCancel();
  }
  done.WaitForNotification();
  *took = absl::Now() - start;
  return FromGrpcStatus(status);
}

// The header of an upload of `num_features` regression features.
v1::UploadDatasetRequest UploadHeader(int num_features) {
  v1::UploadDatasetRequest message;
  v1::DatasetHeader* header = message.mutable_header();
  // Dataset names are unique on a server.
  static std::atomic<int64_t> uploads{0};
  header->set_name(absl::StrCat(
      "load-test-abuser-", absl::ToUnixNanos(absl::Now()), "-", ++uploads));
  header->set_task(v1::TASK_REGRESSION);
  header->set_num_features(num_features);
  return message;
}

}  // namespace

Abusers::Abusers(AbuseOptions options) : options_(std::move(options)) {}

Abusers::~Abusers() { Stop(); }

void Abusers::Start() {
  const auto spawn = [this](int n, void (Abusers::*body)()) {
    for (int i = 0; i < n; ++i) threads_.emplace_back(body, this);
  };
  spawn(options_.oversized, &Abusers::Oversized);
  spawn(options_.abandoned, &Abusers::Abandoned);
  spawn(options_.cancelled, &Abusers::Cancelled);
  // Slow streams first, so that they hold their slots before the idle
  // streams fill the rest.
  spawn(options_.slow_streams, &Abusers::SlowStream);
  absl::SleepFor(absl::Milliseconds(200));
  spawn(options_.idle_streams, &Abusers::IdleStream);
}

void Abusers::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  {
    absl::MutexLock lock(&mu_);
    for (grpc::ClientContext* context : in_flight_) context->TryCancel();
  }
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

bool Abusers::Sleep(absl::Duration d) const {
  return !stop_.WaitForNotificationWithTimeout(d);
}

void Abusers::Track(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  in_flight_.insert(context);
  // Stop() may have swept the set already.
  if (stopping()) context->TryCancel();
}

void Abusers::Untrack(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  in_flight_.erase(context);
}

void Abusers::Oversized() {
  const AbuseOptions& o = options_;
  grpc::GenericStub stub(OwnConnection(o.target));
  struct Case {
    Kind* kind;
    grpc::ByteBuffer request;
  };
  std::vector<Case> cases;
  cases.push_back({&oversized_rows_,
                   Serialized(MakePredict(o.snapshot_id, o.max_predict_rows + 1,
                                          o.num_features, 1, 1))});
  cases.push_back({&oversized_samples_,
                   Serialized(MakePredict(o.snapshot_id, 1, o.num_features,
                                          o.max_predict_samples + 1, 2))});
  // per_sample: rows x (S + ~10) doubles come back, more than a message may
  // hold; possible only if --max-predict-rows allows enough rows.
  const int64_t response_rows =
      o.max_message_bytes / (8 * (o.max_predict_samples + 10)) + 1;
  if (response_rows <= o.max_predict_rows) {
    v1::PredictRequest request = MakePredict(
        o.snapshot_id, response_rows, o.num_features, o.max_predict_samples, 3);
    request.set_per_sample(true);
    cases.push_back({&oversized_response_, Serialized(request)});
  }
  // Each row takes more than 8 bytes per feature on the wire.
  cases.push_back(
      {&oversized_message_,
       Serialized(MakePredict(o.snapshot_id,
                              o.max_message_bytes / (8 * o.num_features) + 1,
                              o.num_features, 1, 4))});
  for (size_t i = 0; !stopping(); i = (i + 1) % cases.size()) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    Track(&context);
    absl::Duration took;
    const absl::Status status = RawPredict(&stub, &context, cases[i].request,
                                           absl::InfiniteDuration(), &took);
    Untrack(&context);
    if (stopping()) break;
    cases[i].kind->tally.Add(status, took);
    Sleep(o.pause);
  }
}

void Abusers::SlowStream() {
  const AbuseOptions& o = options_;
  auto stub = v1::BnnService::NewStub(OwnConnection(o.target));
  v1::UploadDatasetRequest row;
  v1::Example* example = row.mutable_chunk()->add_rows();
  for (int j = 0; j < o.num_features; ++j) example->add_x(0.5);
  example->set_y(1.0);
  while (!stopping()) {
    grpc::ClientContext context;
    Track(&context);
    v1::UploadDatasetResponse response;
    const absl::Time start = absl::Now();
    std::unique_ptr<grpc::ClientWriter<v1::UploadDatasetRequest>> writer =
        stub->UploadDataset(&context, &response);
    bool open = writer->Write(UploadHeader(o.num_features));
    // Half the idle limit between messages: slow, but never idle.
    while (open && Sleep(o.stream_idle / 2)) open = writer->Write(row);
    if (stopping()) {
      context.TryCancel();
      writer->Finish().ok();
      Untrack(&context);
      // Alive until we stopped: what a slow client must get.
      slow_stream_.tally.Add(absl::OkStatus(), absl::Now() - start);
      break;
    }
    // The server ended the stream.
    const grpc::Status status = writer->Finish();
    Untrack(&context);
    absl::Status result = FromGrpcStatus(status);
    if (result.ok()) {
      result = absl::InternalError("the server committed an unfinished upload");
    }
    slow_stream_.tally.Add(result, absl::Now() - start);
    Sleep(o.pause);
  }
}

void Abusers::IdleStream() {
  const AbuseOptions& o = options_;
  auto stub = v1::BnnService::NewStub(OwnConnection(o.target));
  while (!stopping()) {
    grpc::ClientContext context;
    Track(&context);
    v1::UploadDatasetResponse response;
    const absl::Time start = absl::Now();
    std::unique_ptr<grpc::ClientWriter<v1::UploadDatasetRequest>> writer =
        stub->UploadDataset(&context, &response);
    writer->Write(UploadHeader(o.num_features));
    // The server sends its (empty) initial metadata only when it ends the
    // call: this returns when the stream is refused or timed out.
    writer->WaitForInitialMetadata();
    const absl::Duration took = absl::Now() - start;
    const grpc::Status status = writer->Finish();
    Untrack(&context);
    if (stopping()) break;
    idle_stream_.tally.Add(FromGrpcStatus(status), took);
    Sleep(o.pause);
  }
}

void Abusers::Abandoned() {
  const AbuseOptions& o = options_;
  grpc::GenericStub stub(OwnConnection(o.target));
  const grpc::ByteBuffer request =
      Serialized(MakePredict(o.snapshot_id, o.max_predict_rows, o.num_features,
                             o.max_predict_samples, 5));
  while (!stopping()) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + o.abandon_deadline));
    Track(&context);
    absl::Duration took;
    const absl::Status status =
        RawPredict(&stub, &context, request, absl::InfiniteDuration(), &took);
    Untrack(&context);
    if (stopping()) break;
    abandoned_.tally.Add(status, took);
    Sleep(o.pause);
  }
}

void Abusers::Cancelled() {
  const AbuseOptions& o = options_;
  grpc::GenericStub stub(OwnConnection(o.target));
  const grpc::ByteBuffer request =
      Serialized(MakePredict(o.snapshot_id, o.max_predict_rows, o.num_features,
                             o.max_predict_samples, 6));
  while (!stopping()) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    Track(&context);
    absl::Duration took;
    const absl::Status status =
        RawPredict(&stub, &context, request, o.cancel_after, &took);
    Untrack(&context);
    if (stopping()) break;
    cancelled_.tally.Add(status, took);
    Sleep(o.pause);
  }
}

std::vector<const Abusers::Kind*> Abusers::kinds() const {
  return {&oversized_rows_,    &oversized_samples_, &oversized_response_,
          &oversized_message_, &slow_stream_,       &idle_stream_,
          &abandoned_,         &cancelled_};
}

nlohmann::json Abusers::ToJson() const {
  nlohmann::json out = nlohmann::json::object();
  for (const Kind* kind : kinds()) {
    nlohmann::json entry = kind->tally.ToJson();
    std::vector<std::string> expected;
    for (absl::StatusCode code : kind->expected) {
      expected.push_back(absl::StatusCodeToString(code));
    }
    entry["expected"] = expected;
    out[kind->name] = std::move(entry);
  }
  return out;
}

std::string Abusers::Describe() const {
  std::string out;
  for (const Kind* kind : kinds()) {
    absl::StrAppend(&out, "  ", kind->name, ": ", kind->tally.ToString(), "\n");
  }
  return out;
}

std::vector<std::string> Abusers::Problems() const {
  std::vector<std::string> problems;
  for (const Kind* kind : kinds()) {
    if (const int64_t other = kind->tally.CountOtherThan(kind->expected);
        other > 0) {
      problems.push_back(absl::StrCat(kind->name, ": ", other,
                                      " call(s) ended with an unexpected "
                                      "status: ",
                                      kind->tally.ToString()));
    }
  }
  return problems;
}

}  // namespace bnn::bench
