// The abusive clients of bnn_load_test's second phase, each on its own
// thread and its own connection:
//
//   oversized   Predict requests beyond the server's limits, in turn: one row
//               more than --max-predict-rows, num_samples above
//               --max-predict-samples, a response (per_sample) larger than
//               --max-message-bytes, and a request message larger than
//               --max-message-bytes. Each must be refused with
//               RESOURCE_EXHAUSTED, quickly.
//   slow_stream UploadDataset streams that send a header and then one row
//               every half --stream-idle-seconds, never finishing: slow but
//               alive, they must stay open (until the abusers stop).
//   idle_stream UploadDataset streams that send a header and then nothing:
//               each must be ended with DEADLINE_EXCEEDED after
//               --stream-idle-seconds, or refused at once with
//               RESOURCE_EXHAUSTED while --max-client-streams are open.
//   abandoned   the largest Predict the server admits (--max-predict-rows
//               rows, --max-predict-samples samples) with a short deadline:
//               DEADLINE_EXCEEDED.
//   cancelled   the same Predict, cancelled by the client shortly after it
//               was sent: CANCELLED.
//
// Every abuser pauses `pause` between its calls (a refusal costs the client
// nothing, so without a pause it would only measure how fast this process
// can spin on the shared cores).
#ifndef BNN_BENCH_LOAD_ABUSERS_H_
#define BNN_BENCH_LOAD_ABUSERS_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>
#include <absl/synchronization/notification.h>
#include <absl/time/time.h>
#include <grpcpp/client_context.h>
#include <nlohmann/json.hpp>

#include "bench/load/load_util.h"

namespace bnn::bench {

struct AbuseOptions {
  // Server address and the snapshot the Predict abusers ask.
  std::string target;
  std::string snapshot_id;
  int num_features = 0;
  // The server's limits (its flags), which the abusers exceed.
  int64_t max_predict_rows = 0;
  int max_predict_samples = 0;
  int64_t max_message_bytes = 0;
  absl::Duration stream_idle = absl::Seconds(2);

  // Clients of each kind.
  int oversized = 1;
  int slow_streams = 2;
  int idle_streams = 8;
  int abandoned = 1;
  int cancelled = 1;
  absl::Duration pause = absl::Milliseconds(10);
  // Deadline of an abandoned Predict; delay before a cancelled one is
  // cancelled.
  absl::Duration abandon_deadline = absl::Milliseconds(50);
  absl::Duration cancel_after = absl::Milliseconds(30);
};

// Thread-safe.
class Abusers {
 public:
  explicit Abusers(AbuseOptions options);
  // Stop().
  ~Abusers();
  Abusers(const Abusers&) = delete;
  Abusers& operator=(const Abusers&) = delete;

  // Starts every abuser's thread.
  void Start();
  // Stops them: calls still open are cancelled and not counted.
  void Stop();

  // One entry per kind: its tally and the codes it expects.
  nlohmann::json ToJson() const;
  // One line per kind.
  std::string Describe() const;
  // Calls that ended with a code their kind does not expect, and slow
  // streams the server ended although they kept sending, one line each.
  std::vector<std::string> Problems() const;

 private:
  struct Kind {
    Kind(std::string name, std::vector<absl::StatusCode> expected)
        : name(std::move(name)), expected(std::move(expected)) {}
    const std::string name;
    const std::vector<absl::StatusCode> expected;
    CallTally tally;
  };
  // Every kind, in the order of the report.
  std::vector<const Kind*> kinds() const;

  void Oversized();
  void SlowStream();
  void IdleStream();
  void Abandoned();
  void Cancelled();

  // Sleeps `d` unless Stop() comes first; false once stopping.
  bool Sleep(absl::Duration d) const;
  bool stopping() const { return stop_.HasBeenNotified(); }
  // Contexts of the calls in flight, so Stop() can cancel them.
  void Track(grpc::ClientContext* context);
  void Untrack(grpc::ClientContext* context);

  const AbuseOptions options_;
  Kind oversized_rows_{"oversized_rows",
                       {absl::StatusCode::kResourceExhausted}};
  Kind oversized_samples_{"oversized_samples",
                          {absl::StatusCode::kResourceExhausted}};
  Kind oversized_response_{"oversized_response",
                           {absl::StatusCode::kResourceExhausted}};
  Kind oversized_message_{"oversized_message",
                          {absl::StatusCode::kResourceExhausted}};
  // OK: open until the abusers stopped. RESOURCE_EXHAUSTED: refused at the
  // start while --max-client-streams were open.
  Kind slow_stream_{
      "slow_stream",
      {absl::StatusCode::kOk, absl::StatusCode::kResourceExhausted}};
  Kind idle_stream_{"idle_stream",
                    {absl::StatusCode::kDeadlineExceeded,
                     absl::StatusCode::kResourceExhausted}};
  Kind abandoned_{"abandoned", {absl::StatusCode::kDeadlineExceeded}};
  // OK if the computation finished before the cancellation arrived.
  Kind cancelled_{"cancelled",
                  {absl::StatusCode::kCancelled, absl::StatusCode::kOk}};

  absl::Notification stop_;
  std::vector<std::thread> threads_;
  mutable absl::Mutex mu_;
  std::set<grpc::ClientContext*> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::bench

#endif  // BNN_BENCH_LOAD_ABUSERS_H_
