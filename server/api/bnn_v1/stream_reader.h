// The read loop shared by BnnServiceImpl's client-streaming reactors. Private
// to the service: included only by the files that define those reactors.
#ifndef BNN_SERVER_API_BNN_V1_STREAM_READER_H_
#define BNN_SERVER_API_BNN_V1_STREAM_READER_H_

#include <cstdint>
#include <string>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <grpcpp/grpcpp.h>

#include "server/admission/memory_budget.h"
#include "server/api/bnn_v1/bnn_service.h"
#include "server/api/bnn_v1/request_validation.h"
#include "server/common/status_util.h"
#include "server/common/stream_watch.h"
#include "server/common/thread_pool.h"

namespace bnn::server {

// One message at a time: a reaction only receives it; the service's I/O
// pool parses it, validates it and writes it away (Consume: to a temporary
// file, so a stream holds one message in memory, never its whole data), and
// only then asks for the next one, so a client can send no faster than the
// disk takes its data. Once the client half-closes, Commit runs on the pool
// too (it may hash, decode or rename into place), whose thread finishes the
// call. The first invalid message ends the call and nothing is committed.
//
// Limits (each a RESOURCE_EXHAUSTED or DEADLINE_EXCEEDED naming its flag):
// open streams (--max-client-streams, refused at the start), bytes per
// stream (`max_bytes`), the bytes of a message while it is worked on
// (reserved from the memory budget), and time waiting for the client's next
// message (--stream-idle-seconds).
//
// The methods are registered raw (bnn_service.h), so messages arrive as
// bytes and are parsed here: gRPC reports a message that does not parse as
// a failed read, exactly like the end of the stream, and a typed reactor
// would commit the rows before it as if the client had half-closed there.
template <typename Request, typename Response>
class BnnServiceImpl::StreamReader
    : public grpc::ServerReadReactor<grpc::ByteBuffer>,
      public StreamWatch::Stream {
 public:
  // Authorizes the call (finishing it at once if denied, before anything is
  // read or a stream slot is taken) and starts reading, or refuses the
  // stream when too many are open. Called once the derived reactor is fully
  // constructed, as reads complete on other threads.
  void Start() {
    if (absl::Status denied = service_->Authorize(context_, rpc_).status();
        !denied.ok()) {
      Complete(denied);
      return;
    }
    if (!service_->streams_.Add(this)) {
      Complete(absl::ResourceExhaustedError(absl::StrCat(
          service_->streams_.max_streams(),
          " client streams (uploads, appends, imports) are open, the server "
          "limit (--max-client-streams); retry later")));
      return;
    }
    watched_ = true;
    ReadNext();
  }

  absl::Time WaitingSince() const final {
    absl::MutexLock lock(&mu_);
    return waiting_since_;
  }

  void OnIdle() final {
    {
      // Only while a read is outstanding: otherwise a message arrived
      // meanwhile and the I/O pool may be working on it.
      absl::MutexLock lock(&mu_);
      if (waiting_since_ == absl::InfiniteFuture()) return;
    }
    Complete(absl::DeadlineExceededError(absl::StrCat(
        rpc_, " received no message for ",
        absl::FormatDuration(service_->streams_.idle_timeout()),
        ", the server's limit (--stream-idle-seconds); nothing was stored")));
  }

 protected:
  // `rpc` names the RPC in metrics and logs, `stream` the stream in
  // messages ("upload"); both string literals. The stream may carry at most
  // `max_bytes` bytes of messages, the limit of `max_bytes_flag`. The
  // serialised response goes to `response` when the call succeeds.
  StreamReader(BnnServiceImpl* service, grpc::CallbackServerContext* context,
               grpc::ByteBuffer* response, absl::string_view rpc,
               absl::string_view stream, int64_t max_bytes,
               absl::string_view max_bytes_flag)
      : service_(service),
        context_(context),
        raw_response_(response),
        rpc_(rpc),
        stream_(stream),
        max_bytes_(max_bytes),
        max_bytes_flag_(max_bytes_flag),
        start_(absl::Now()) {}

  // Validates and takes in message number `index` (from 0), which may be
  // moved from. Runs on the I/O pool.
  virtual absl::Status Consume(Request& message, int64_t index) = 0;
  // After the last message, on the I/O pool; fills `response`.
  virtual absl::Status Commit(Response* response) = 0;
  // Drops what the stream wrote so far (its temporary file) when Consume or
  // Commit failed, on the I/O pool before the call finishes, so that no
  // file outlives a failed call. Otherwise the reactor's destruction does.
  virtual void Discard() = 0;

  BnnServiceImpl* service() const { return service_; }
  // "UploadDataset from ipv4:127.0.0.1:5555", for memory reservations.
  std::string Who() const { return absl::StrCat(rpc_, " from ", peer_); }
  // Bytes of the messages received so far.
  int64_t bytes_received() const { return bytes_received_; }

 private:
  // Asks for the next message unless the call already ended.
  void ReadNext() {
    absl::MutexLock lock(&mu_);
    if (done_) return;
    waiting_since_ = absl::Now();
    StartRead(&buffer_);
  }

  // Whether the call is still open; it stops counting as waiting.
  bool Received() {
    absl::MutexLock lock(&mu_);
    waiting_since_ = absl::InfiniteFuture();
    return !done_;
  }

  void OnReadDone(bool ok) final {
    if (!Received()) return;
    if (!ok) {
      // The client half-closed, or the call failed: cancelled by the client,
      // or a message over the size limit, which gRPC reports here like a
      // half-close while the cancellation reaches the context only later.
      // Sending the initial metadata tells them apart: the send fails on a
      // stream that is already closed.
      StartSendInitialMetadata();
      return;
    }
    service_->io_pool_.Schedule([this] {
      if (absl::Status status = Take(); !status.ok()) {
        Discard();
        Complete(status);
        return;
      }
      ReadNext();
    });
  }

  // Parses and consumes the message in buffer_.
  absl::Status Take() {
    const int64_t index = num_messages_++;
    const int64_t size = static_cast<int64_t>(buffer_.Length());
    bytes_received_ += size;
    BNN_RETURN_IF_ERROR(ValidateStreamBytes(stream_, bytes_received_,
                                            max_bytes_, max_bytes_flag_));
    // The message's bytes, its parsed form and what Consume makes of it
    // (rows as doubles) exist at once while it is worked on.
    BNN_ASSIGN_OR_RETURN(
        const MemoryBudget::Reservation reservation,
        service_->memory_budget_->TryReserve(
            Who(), 3 * size,
            absl::StrCat(stream_, " message ", index, " of ", size,
                         " bytes, 3 copies while it is parsed and written")));
    message_.Clear();
    // Deserialize consumes the buffer.
    if (!grpc::SerializationTraits<Request>::Deserialize(&buffer_, &message_)
             .ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          stream_, " message ", index, " does not parse as a ",
          Request::descriptor()->full_name(), "; nothing was stored"));
    }
    return Consume(message_, index);
  }

  void OnSendInitialMetadataDone(bool ok) final {
    if (!ok || context_->IsCancelled()) {
      Complete(absl::CancelledError(absl::StrCat(
          rpc_, " failed before the end of the stream; nothing was stored")));
      return;
    }
    service_->io_pool_.Schedule([this] {
      Response response;
      absl::Status status = Commit(&response);
      bool own_buffer = false;
      if (status.ok() && !grpc::SerializationTraits<Response>::Serialize(
                              response, raw_response_, &own_buffer)
                              .ok()) {
        status = absl::InternalError(
            absl::StrCat("cannot serialise the ", rpc_, " response"));
      }
      if (!status.ok()) Discard();
      Complete(status);
    });
  }

  void OnDone() final {
    if (watched_) service_->streams_.Remove(this);
    delete this;
  }

  // Finishes the call with `status`, once: later calls do nothing.
  void Complete(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (done_) return;
      done_ = true;
      waiting_since_ = absl::InfiniteFuture();
    }
    Finish(
        ToGrpcStatus(service_->RecordOutcome(context_, rpc_, start_, status)));
  }

  BnnServiceImpl* const service_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const raw_response_;
  const absl::string_view rpc_;
  const absl::string_view stream_;
  const int64_t max_bytes_;
  const absl::string_view max_bytes_flag_;
  const absl::Time start_;
  const std::string peer_ = context_->peer();
  bool watched_ = false;
  // Used by one thread at a time: reads are one after another.
  grpc::ByteBuffer buffer_;
  Request message_;
  int64_t num_messages_ = 0;
  int64_t bytes_received_ = 0;

  mutable absl::Mutex mu_;
  // Finish was called (by a reaction, the pool or the stream watch).
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time waiting_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace bnn::server

#endif  // BNN_SERVER_API_BNN_V1_STREAM_READER_H_
