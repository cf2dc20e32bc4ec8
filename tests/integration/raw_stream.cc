#include "tests/integration/raw_stream.h"

#include <chrono>

namespace bnn::integration {
namespace {

void* Tag(intptr_t n) { return reinterpret_cast<void*>(n); }

}  // namespace

RawClientStream::RawClientStream(const std::shared_ptr<grpc::Channel>& channel,
                                 const std::string& method,
                                 absl::Duration deadline)
    : stub_(channel) {
  context_.set_deadline(std::chrono::system_clock::now() +
                        absl::ToChronoMilliseconds(deadline));
  call_ = stub_.PrepareCall(&context_, method, &cq_);
  call_->StartCall(Tag(1));
  started_ = Await(Tag(1));
}

RawClientStream::~RawClientStream() {
  if (!finished_) {
    context_.TryCancel();
    Finish(nullptr, /*half_close=*/false);
  }
  cq_.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq_.Next(&tag, &ok)) {
  }
}

bool RawClientStream::Await(void* tag) {
  void* got = nullptr;
  bool ok = false;
  // Operations complete in order here: one is in flight at a time.
  while (cq_.Next(&got, &ok)) {
    if (got == tag) return ok;
  }
  return false;
}

bool RawClientStream::Write(const std::string& bytes) {
  if (!started_) return false;
  grpc::Slice slice(bytes);
  call_->Write(grpc::ByteBuffer(&slice, 1), Tag(2));
  return Await(Tag(2));
}

grpc::Status RawClientStream::Finish(std::string* response, bool half_close) {
  finished_ = true;
  if (started_ && half_close) {
    call_->WritesDone(Tag(3));
    Await(Tag(3));
  }
  if (started_) {
    // The response of a client-streaming call, if the server sent one.
    grpc::ByteBuffer buffer;
    call_->Read(&buffer, Tag(4));
    if (Await(Tag(4)) && response != nullptr) {
      std::vector<grpc::Slice> slices;
      buffer.Dump(&slices).IgnoreError();
      response->clear();
      for (const grpc::Slice& s : slices) {
        response->append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
  }
  grpc::Status status;
  call_->Finish(&status, Tag(5));
  Await(Tag(5));
  return status;
}

}  // namespace bnn::integration
