// A client-streaming call that sends arbitrary bytes as messages, through
// gRPC's generic stub: what a buggy or hostile client can put on the wire
// (a message that does not parse, a stream left idle), beyond what a typed
// stub can express.
#ifndef BNN_TESTS_INTEGRATION_RAW_STREAM_H_
#define BNN_TESTS_INTEGRATION_RAW_STREAM_H_

#include <memory>
#include <string>

#include <absl/time/time.h>
#include <google/protobuf/message_lite.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

namespace bnn::integration {

class RawClientStream {
 public:
  // Starts a call of `method` ("/bnn.v1.BnnService/UploadDataset") on
  // `channel`, which fails after `deadline` from now.
  RawClientStream(const std::shared_ptr<grpc::Channel>& channel,
                  const std::string& method, absl::Duration deadline);
  ~RawClientStream();
  RawClientStream(const RawClientStream&) = delete;
  RawClientStream& operator=(const RawClientStream&) = delete;

  // Whether the call started (false if the server closed it at once).
  bool started() const { return started_; }
  // Sends `bytes` as one message; false once the stream is closed.
  bool Write(const std::string& bytes);
  bool Write(const google::protobuf::MessageLite& message) {
    return Write(message.SerializeAsString());
  }
  // Half-closes (unless `half_close` is false) and waits for the status;
  // the response message, if any, goes to `response`.
  grpc::Status Finish(std::string* response = nullptr, bool half_close = true);

 private:
  // Waits for the completion of the operation tagged `tag`.
  bool Await(void* tag);

  grpc::GenericStub stub_;
  grpc::CompletionQueue cq_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool started_ = false;
  bool finished_ = false;
};

}  // namespace bnn::integration

#endif  // BNN_TESTS_INTEGRATION_RAW_STREAM_H_
