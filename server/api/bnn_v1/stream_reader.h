// The read loop shared by BnnServiceImpl's client-streaming reactors. Private
// to the service: included only by the files that define those reactors.
#ifndef BNN_SERVER_API_BNN_V1_STREAM_READER_H_
#define BNN_SERVER_API_BNN_V1_STREAM_READER_H_

#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/string_view.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <grpcpp/grpcpp.h>

#include "server/api/bnn_v1/bnn_service.h"
#include "server/common/status_util.h"
#include "server/common/thread_pool.h"

namespace bnn::server {

// Reactions only take messages in (Consume: validate, accumulate); once the
// client half-closes, Commit runs on `commit_pool` (it may hash, decode or
// write to disk), whose thread finishes the call. An invalid message ends
// the call at once and nothing is committed.
//
// The methods are registered raw (bnn_service.h), so messages arrive as
// bytes and are parsed here: gRPC reports a message that does not parse as
// a failed read, exactly like the end of the stream, and a typed reactor
// would commit the rows before it as if the client had half-closed there.
template <typename Request, typename Response>
class BnnServiceImpl::StreamReader
    : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  // Starts reading; called once the derived reactor is fully constructed,
  // as reads complete on other threads.
  void Start() { StartRead(&buffer_); }

 protected:
  // `rpc` names the RPC in metrics and logs, `stream` the stream in
  // messages ("upload"); both string literals. The serialised response goes
  // to `response` when the call succeeds.
  StreamReader(BnnServiceImpl* service, grpc::CallbackServerContext* context,
               grpc::ByteBuffer* response, absl::string_view rpc,
               absl::string_view stream, ThreadPool* commit_pool)
      : service_(service),
        context_(context),
        raw_response_(response),
        rpc_(rpc),
        stream_(stream),
        commit_pool_(commit_pool),
        start_(absl::Now()) {}

  // Validates and takes in message number `index` (from 0), which may be
  // moved from.
  virtual absl::Status Consume(Request& message, int64_t index) = 0;
  // After the last message; fills `response`.
  virtual absl::Status Commit(Response* response) = 0;

  BnnServiceImpl* service() const { return service_; }

 private:
  void OnReadDone(bool ok) final {
    if (!ok) {
      // The client half-closed, or the call failed: cancelled by the client,
      // or a message over the size limit, which gRPC reports here like a
      // half-close while the cancellation reaches the context only later.
      // Sending the initial metadata tells them apart: the send fails on a
      // stream that is already closed.
      StartSendInitialMetadata();
      return;
    }
    message_.Clear();
    const int64_t index = num_messages_++;
    // Deserialize consumes the buffer.
    if (!grpc::SerializationTraits<Request>::Deserialize(&buffer_, &message_)
             .ok()) {
      Complete(absl::InvalidArgumentError(absl::StrCat(
          stream_, " message ", index, " does not parse as a ",
          Request::descriptor()->full_name(), "; nothing was stored")));
      return;
    }
    if (absl::Status status = Consume(message_, index); !status.ok()) {
      Complete(status);
      return;
    }
    StartRead(&buffer_);
  }

  void OnSendInitialMetadataDone(bool ok) final {
    if (!ok || context_->IsCancelled()) {
      Complete(absl::CancelledError(absl::StrCat(
          rpc_, " failed before the end of the stream; nothing was stored")));
      return;
    }
    commit_pool_->Schedule([this] {
      Response response;
      absl::Status status = Commit(&response);
      bool own_buffer = false;
      if (status.ok() && !grpc::SerializationTraits<Response>::Serialize(
                              response, raw_response_, &own_buffer)
                              .ok()) {
        status = absl::InternalError(
            absl::StrCat("cannot serialise the ", rpc_, " response"));
      }
      Complete(status);
    });
  }

  void OnDone() final { delete this; }

  void Complete(const absl::Status& status) {
    service_->RecordOutcome(context_, rpc_, start_, status);
    Finish(ToGrpcStatus(status));
  }

  BnnServiceImpl* const service_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const raw_response_;
  const absl::string_view rpc_;
  const absl::string_view stream_;
  ThreadPool* const commit_pool_;
  const absl::Time start_;
  grpc::ByteBuffer buffer_;
  Request message_;
  int64_t num_messages_ = 0;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_API_BNN_V1_STREAM_READER_H_
