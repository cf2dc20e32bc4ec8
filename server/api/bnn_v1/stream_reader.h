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
template <typename Request>
class BnnServiceImpl::StreamReader : public grpc::ServerReadReactor<Request> {
 public:
  // Starts reading; called once the derived reactor is fully constructed,
  // as reads complete on other threads.
  void Start() { this->StartRead(&message_); }

 protected:
  // `rpc` names the RPC in metrics and logs (a string literal).
  StreamReader(BnnServiceImpl* service, grpc::CallbackServerContext* context,
               absl::string_view rpc, ThreadPool* commit_pool)
      : service_(service),
        context_(context),
        rpc_(rpc),
        commit_pool_(commit_pool),
        start_(absl::Now()) {}

  // Validates and takes in one message, which may be moved from.
  virtual absl::Status Consume(Request& message) = 0;
  // After the last message; fills the response.
  virtual absl::Status Commit() = 0;

  BnnServiceImpl* service() const { return service_; }

 private:
  void OnReadDone(bool ok) final {
    if (!ok) {
      // The client half-closed, or the call failed: cancelled by the client,
      // or a message over the size limit, which gRPC reports here like a
      // half-close while the cancellation reaches the context only later.
      // Sending the initial metadata tells them apart: the send fails on a
      // stream that is already closed.
      this->StartSendInitialMetadata();
      return;
    }
    if (absl::Status status = Consume(message_); !status.ok()) {
      Complete(status);
      return;
    }
    this->StartRead(&message_);
  }

  void OnSendInitialMetadataDone(bool ok) final {
    if (!ok || context_->IsCancelled()) {
      Complete(absl::CancelledError(absl::StrCat(
          rpc_, " failed before the end of the stream; nothing was stored")));
      return;
    }
    commit_pool_->Schedule([this] { Complete(Commit()); });
  }

  void OnDone() final { delete this; }

  void Complete(const absl::Status& status) {
    service_->RecordOutcome(context_, rpc_, start_, status);
    this->Finish(ToGrpcStatus(status));
  }

  BnnServiceImpl* const service_;
  grpc::CallbackServerContext* const context_;
  const absl::string_view rpc_;
  ThreadPool* const commit_pool_;
  const absl::Time start_;
  Request message_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_API_BNN_V1_STREAM_READER_H_
