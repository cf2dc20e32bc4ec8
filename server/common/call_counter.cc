#include "server/common/call_counter.h"

#include <cstring>

namespace bnn::server {

// Counted from creation (the call started) to destruction (gRPC is done with
// the call).
class CallCounter::Interceptor final : public grpc::experimental::Interceptor {
 public:
  explicit Interceptor(CallCounter* counter) : counter_(counter) {
    counter_->Add(1);
  }
  ~Interceptor() override { counter_->Add(-1); }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }

 private:
  CallCounter* const counter_;
};

class CallCounter::Factory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(CallCounter* counter) : counter_(counter) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (std::strcmp(info->method(), "/grpc.health.v1.Health/Watch") == 0) {
      return nullptr;
    }
    return new Interceptor(counter_);
  }

 private:
  CallCounter* const counter_;
};

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
CallCounter::NewInterceptorFactory() {
  return std::make_unique<Factory>(this);
}

void CallCounter::Add(int64_t delta) {
  absl::MutexLock lock(&mu_);
  in_flight_ += delta;
}

int64_t CallCounter::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

bool CallCounter::AwaitIdle(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto idle = [this]()
                  ABSL_NO_THREAD_SAFETY_ANALYSIS { return in_flight_ == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

}  // namespace bnn::server
