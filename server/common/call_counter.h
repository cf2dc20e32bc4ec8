// Counts the RPCs in flight, through a gRPC server interceptor (one per
// call, created when the call starts and destroyed when it is done), so that
// shutdown can tell "calls still running" from "idle connections" and close
// the latter at once instead of waiting out the grace period for clients that
// never answer the server's GOAWAY.
#ifndef BNN_SERVER_COMMON_CALL_COUNTER_H_
#define BNN_SERVER_COMMON_CALL_COUNTER_H_

#include <cstdint>
#include <memory>

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>
#include <grpcpp/support/server_interceptor.h>

namespace bnn::server {

// Thread-safe. Must outlive the grpc::Server it counts for.
class CallCounter {
 public:
  CallCounter() = default;
  CallCounter(const CallCounter&) = delete;
  CallCounter& operator=(const CallCounter&) = delete;

  // For ServerBuilder::experimental().SetInterceptorCreators. Counts every
  // call except health Watch streams, which last as long as their client
  // wants and carry no work.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
  NewInterceptorFactory();

  int64_t in_flight() const;
  // Waits until no call is in flight or `deadline` passes; true if none is.
  bool AwaitIdle(absl::Time deadline) const;

 private:
  class Factory;
  class Interceptor;

  void Add(int64_t delta);

  mutable absl::Mutex mu_;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_CALL_COUNTER_H_
