// The real bnn-server under long computations (issue 10, findings 5, 7, 8):
// deadlines and --max-request-seconds stop Predict between row chunks,
// abandoned calls do not delay others, one client's flood does not starve
// another, health reports per service and turns NOT_SERVING when the compute
// workers are wedged or the server drains, and SIGTERM exits within
// --shutdown-grace whatever is running, without waiting for idle clients,
// keeping queued jobs queued.
//
// Unlike main_test, this suite leaves gRPC's client backup poller at its
// default (5 s): an idle client must not hold the server's exit.
#include <atomic>
#include <memory>
#include <signal.h>
#include <string>
#include <thread>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/synchronization/notification.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/v1/bnn_service.grpc.pb.h"

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::ChildProcess;
using ::bnn::server::testutil::CubicDataset;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::TempDir;
using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr char kListening[] = "bnn-server listening on ";
// grpc.health.v1.HealthCheckResponse.ServingStatus.
constexpr int kServing = 1;
constexpr int kNotServing = 2;

// A channel with its own connection (gRPC shares connections between
// channels to one address unless told otherwise): one client.
std::shared_ptr<grpc::Channel> NewClient(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

// grpc.health.v1.Health/Check of `service` through the generic stub (the
// health proto is not packaged): the status enum, or the call's error.
absl::StatusOr<int> HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& service) {
  // HealthCheckRequest{service}: field 1, length-delimited.
  std::string request;
  if (!service.empty()) {
    request = absl::StrCat(
        "\x0a", std::string(1, static_cast<char>(service.size())), service);
  }
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  grpc::Slice slice(request);
  auto call = stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check",
                                    grpc::ByteBuffer(&slice, 1), &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  // HealthCheckResponse{status}: "\x08" then the enum; empty = UNKNOWN (0).
  return bytes.size() == 2 && bytes[0] == '\x08' ? bytes[1] : 0;
}

// A Predict of `rows` rows of the one-feature snapshot with `samples`
// samples and a fixed seed.
v1::PredictRequest PredictRows(const std::string& snapshot_id, int rows,
                               int samples) {
  v1::PredictRequest request;
  request.set_snapshot_id(snapshot_id);
  request.set_num_samples(samples);
  request.set_seed(1);
  for (int i = 0; i < rows; ++i) {
    request.add_rows()->add_x(-4.0 + 8.0 * i / std::max(1, rows - 1));
  }
  return request;
}

struct Timed {
  grpc::Status status;
  absl::Duration took;
};

Timed TimedPredict(v1::BnnService::Stub* stub,
                   const v1::PredictRequest& request,
                   absl::Duration deadline = absl::Seconds(120)) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  v1::PredictResponse response;
  const absl::Time start = absl::Now();
  Timed timed;
  timed.status = stub->Predict(&context, request, &response);
  timed.took = absl::Now() - start;
  return timed;
}

// A bnn-server process on the suite's data directory and a client of it.
class Harness {
 public:
  // Starts bnn-server on the suite's data directory.
  void Start(std::vector<std::string> extra_flags = {}) {
    std::vector<std::string> argv = {BNN_SERVER_PATH,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--data-dir",
                                     suite_dir_->path() + "/data",
                                     "--metrics-listen",
                                     ""};
    argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
    absl::StatusOr<std::unique_ptr<ChildProcess>> child =
        ChildProcess::Start(argv, log_path());
    ASSERT_TRUE(child.ok()) << child.status();
    server_ = *std::move(child);
    absl::StatusOr<std::string> address =
        server_->WaitForLine(kListening, absl::Seconds(30));
    ASSERT_TRUE(address.ok()) << address.status() << "\n" << Log();
    address_ = *address;
    channel_ = NewClient(address_);
    stub_ = v1::BnnService::NewStub(channel_);
  }
  // Sends `signal_number` and returns the exit code.
  int Stop(int signal_number) {
    server_->Signal(signal_number);
    const absl::StatusOr<int> code = server_->Wait(absl::Seconds(30));
    EXPECT_TRUE(code.ok()) << code.status() << "\n" << Log();
    return code.value_or(-1);
  }
  // Sends SIGTERM and returns how long the server took to exit.
  absl::Duration TimedStop() {
    const absl::Time start = absl::Now();
    EXPECT_EQ(Stop(SIGTERM), 0);
    return absl::Now() - start;
  }

  v1::UploadDatasetResponse Upload(int rows) {
    const Dataset data = CubicDataset(rows);
    grpc::ClientContext context;
    v1::UploadDatasetResponse uploaded;
    auto writer = stub_->UploadDataset(&context, &uploaded);
    v1::UploadDatasetRequest header;
    header.mutable_header()->set_name("cubic");
    header.mutable_header()->set_task(v1::TASK_REGRESSION);
    header.mutable_header()->set_num_features(1);
    EXPECT_TRUE(writer->Write(header));
    v1::UploadDatasetRequest chunk;
    for (int64_t i = 0; i < data.num_rows(); ++i) {
      v1::Example* row = chunk.mutable_chunk()->add_rows();
      row->add_x(data.features[i]);
      row->set_y(data.targets[i]);
    }
    EXPECT_TRUE(writer->Write(chunk));
    writer->WritesDone();
    const grpc::Status status = writer->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    return uploaded;
  }
  // SLANG on the suite's dataset, rank 1, seed 1.
  v1::StartTrainingRequest Training(int epochs) {
    v1::StartTrainingRequest train;
    train.set_dataset_id(*dataset_id_);
    train.set_method("slang");
    train.set_epochs(epochs);
    train.set_seed(1);
    return train;
  }
  std::string StartTraining(const v1::StartTrainingRequest& train) {
    grpc::ClientContext context;
    v1::StartTrainingResponse started;
    const grpc::Status status = stub_->StartTraining(&context, train, &started);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return started.job_id();
  }
  v1::Job GetJob(const std::string& job_id) {
    v1::GetJobRequest request;
    request.set_job_id(job_id);
    grpc::ClientContext context;
    v1::Job job;
    EXPECT_TRUE(stub_->GetJob(&context, request, &job).ok());
    return job;
  }
  // Polls the job until `done` holds (at most 120 s) and returns it.
  template <typename Predicate>
  v1::Job WaitForJob(const std::string& job_id, Predicate done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    v1::Job job = GetJob(job_id);
    while (!done(job) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
      job = GetJob(job_id);
    }
    return job;
  }

  std::string log_path() const { return suite_dir_->path() + "/server.log"; }
  std::string Log() const { return ReadFileOrEmpty(log_path()); }

  static TempDir* suite_dir_;
  static std::string* dataset_id_;
  static std::string* snapshot_id_;
  std::unique_ptr<ChildProcess> server_;
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::BnnService::Stub> stub_;
};

TempDir* Harness::suite_dir_ = nullptr;
std::string* Harness::dataset_id_ = nullptr;
std::string* Harness::snapshot_id_ = nullptr;

class LifecycleTest : public ::testing::Test, public Harness {
 protected:
  // One data directory for the suite, holding a snapshot of a 1-700-700-1
  // ReLU net (491k parameters): a Predict with S samples spends about
  // 1024 x S x 491k multiply-adds per chunk of 1024 rows, so chunks take
  // from a fraction of a second (S = 4) to seconds (S = 64), and a request
  // of many rows takes minutes; and a 256-row dataset for long steps.
  static void SetUpTestSuite() {
    suite_dir_ = new TempDir();
    Harness setup;
    setup.Start({"--threads=1"});
    v1::UploadDatasetResponse uploaded = setup.Upload(256);
    dataset_id_ = new std::string(uploaded.dataset().dataset_id());
    v1::StartTrainingRequest train = setup.Training(1);
    train.mutable_model()->add_hidden_sizes(700);
    train.mutable_model()->add_hidden_sizes(700);
    (*train.mutable_params())["batch_size"] = "128";
    (*train.mutable_params())["mc_samples"] = "1";
    const v1::Job job =
        setup.WaitForJob(setup.StartTraining(train), [](const v1::Job& j) {
          return j.state() == v1::JOB_STATE_SUCCEEDED ||
                 j.state() == v1::JOB_STATE_FAILED;
        });
    ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
    snapshot_id_ = new std::string(job.snapshot_id());
    EXPECT_EQ(setup.Stop(SIGTERM), 0);
  }
  static void TearDownTestSuite() {
    delete snapshot_id_;
    delete dataset_id_;
    delete suite_dir_;
  }

  void TearDown() override {
    if (HasFailure()) std::cerr << "server log:\n" << Log();
  }
};

TEST_F(LifecycleTest, HealthReportsTheServerAndTheServiceByName) {
  Start();
  EXPECT_EQ(HealthCheck(channel_, "").value_or(-1), kServing);
  EXPECT_EQ(HealthCheck(channel_, "bnn.v1.BnnService").value_or(-1), kServing);
  EXPECT_EQ(HealthCheck(channel_, "no.such.Service").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(Stop(SIGTERM), 0);
}

TEST_F(LifecycleTest, MaxRequestSecondsStopsAPredictBetweenChunks) {
  Start({"--threads=1", "--max-request-seconds=1"});
  // ~100 chunks of a fraction of a second to seconds each: minutes in all.
  const Timed timed =
      TimedPredict(stub_.get(), PredictRows(*snapshot_id_, 100000, 4));
  EXPECT_EQ(timed.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << timed.status.error_message();
  EXPECT_THAT(timed.status.error_message(), HasSubstr("--max-request-seconds"));
  EXPECT_LT(timed.took, absl::Seconds(15));
  std::cerr << "Predict capped at 1 s returned after " << timed.took << "\n";
  // The server goes on serving.
  EXPECT_TRUE(
      TimedPredict(stub_.get(), PredictRows(*snapshot_id_, 1, 4)).status.ok());
  EXPECT_EQ(Stop(SIGTERM), 0);
}

TEST_F(LifecycleTest, AbandonedPredictsDoNotDelayAnUnrelatedOne) {
  // Two workers, each taken by a minutes-long Predict whose client gives up
  // after 2 s (the case: the unrelated Predict waited 23 s).
  Start({"--threads=1", "--compute-workers=2"});
  std::vector<std::thread> abandoned;
  std::vector<Timed> results(2);
  for (int i = 0; i < 2; ++i) {
    abandoned.emplace_back([&, i] {
      const std::shared_ptr<grpc::Channel> client = NewClient(address_);
      results[i] =
          TimedPredict(v1::BnnService::NewStub(client).get(),
                       PredictRows(*snapshot_id_, 100000, 4), absl::Seconds(2));
    });
  }
  for (std::thread& t : abandoned) t.join();
  for (const Timed& r : results) {
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  const Timed unrelated =
      TimedPredict(stub_.get(), PredictRows(*snapshot_id_, 1, 4));
  ASSERT_TRUE(unrelated.status.ok()) << unrelated.status.error_message();
  std::cerr << "unrelated Predict after two abandoned ones: " << unrelated.took
            << "\n";
  // At most the rest of one chunk of each abandoned call.
  EXPECT_LT(unrelated.took, absl::Seconds(8));
  EXPECT_EQ(Stop(SIGTERM), 0);
}

TEST_F(LifecycleTest, OneClientsFloodDoesNotStarveAnother) {
  // One worker; client A queues 8 Predicts of 3 chunks each, then client B
  // asks for one row. FIFO would put B behind all of A's; turns put it
  // behind the one running.
  Start({"--threads=1", "--compute-workers=1"});
  // Loads the predictor and caches the draw, so every call costs the same.
  ASSERT_TRUE(
      TimedPredict(stub_.get(), PredictRows(*snapshot_id_, 1, 4)).status.ok());
  constexpr int kFlood = 8;
  const std::shared_ptr<grpc::Channel> flooder = NewClient(address_);
  std::unique_ptr<v1::BnnService::Stub> flood_stub =
      v1::BnnService::NewStub(flooder);
  std::vector<Timed> flood(kFlood);
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  for (int i = 0; i < kFlood; ++i) {
    threads.emplace_back([&, i] {
      flood[i] =
          TimedPredict(flood_stub.get(), PredictRows(*snapshot_id_, 3072, 4));
    });
  }
  absl::SleepFor(absl::Milliseconds(500));  // A's calls are queued
  const std::shared_ptr<grpc::Channel> other = NewClient(address_);
  const Timed b = TimedPredict(v1::BnnService::NewStub(other).get(),
                               PredictRows(*snapshot_id_, 1, 4));
  for (std::thread& t : threads) t.join();
  const absl::Duration flood_time = absl::Now() - start;
  ASSERT_TRUE(b.status.ok()) << b.status.error_message();
  for (const Timed& r : flood) {
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  }
  std::cerr << "flood of " << kFlood << " Predicts took " << flood_time
            << "; the other client's Predict took " << b.took << "\n";
  // B waited for about one of A's calls, not for all of them.
  EXPECT_LT(b.took * 3, flood_time);
  EXPECT_EQ(Stop(SIGTERM), 0);
}

TEST_F(LifecycleTest, WatchdogReportsWedgedComputeWorkers) {
  // One worker and a 0.2 s cap: the watchdog's threshold is 1.2 s. One chunk
  // of 1024 rows x 64 samples (~3e10 multiply-adds) runs longer than that
  // without reaching an interrupt check.
  Start({"--threads=1", "--compute-workers=1", "--max-request-seconds=0.2"});
  std::atomic<bool> done{false};
  Timed slow;
  std::thread predict([&] {
    const std::shared_ptr<grpc::Channel> client = NewClient(address_);
    slow = TimedPredict(v1::BnnService::NewStub(client).get(),
                        PredictRows(*snapshot_id_, 1024, 64));
    done = true;
  });
  bool saw_not_serving = false;
  while (!done) {
    const absl::StatusOr<int> service =
        HealthCheck(channel_, "bnn.v1.BnnService");
    if (service.value_or(-1) == kNotServing) {
      saw_not_serving = true;
      EXPECT_EQ(HealthCheck(channel_, "").value_or(-1), kNotServing);
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  predict.join();
  std::cerr << "a single-chunk Predict took " << slow.took << "\n";
  EXPECT_EQ(slow.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << slow.status.error_message();
  EXPECT_GT(slow.took, absl::Seconds(2)) << "the chunk was too short to test";
  EXPECT_TRUE(saw_not_serving);
  // Free again: SERVING within a watchdog period or two.
  absl::SleepFor(absl::Milliseconds(600));
  EXPECT_EQ(HealthCheck(channel_, "bnn.v1.BnnService").value_or(-1), kServing);
  EXPECT_EQ(HealthCheck(channel_, "").value_or(-1), kServing);
  EXPECT_EQ(Stop(SIGTERM), 0);
}

TEST_F(LifecycleTest, IdleClientDoesNotDelayExit) {
  Start();
  grpc::ClientContext context;
  v1::ListMethodsResponse methods;
  ASSERT_TRUE(stub_->ListMethods(&context, {}, &methods).ok());
  // channel_ stays open and idle; its poller answers GOAWAY only every 5 s.
  const absl::Duration took = TimedStop();
  std::cerr << "exit with an idle client took " << took << "\n";
  EXPECT_LT(took, absl::Seconds(2));
}

TEST_F(LifecycleTest, ExitWithinGraceWithASlowPredictInFlight) {
  Start({"--threads=1", "--shutdown-grace=2"});
  Timed slow;
  std::thread predict([&] {
    const std::shared_ptr<grpc::Channel> client = NewClient(address_);
    slow = TimedPredict(v1::BnnService::NewStub(client).get(),
                        PredictRows(*snapshot_id_, 100000, 4));
  });
  absl::SleepFor(absl::Seconds(1));  // computing
  const absl::Duration took = TimedStop();
  predict.join();
  std::cerr << "exit with a minutes-long Predict in flight took " << took
            << "; the Predict ended with " << slow.status.error_code() << " "
            << slow.status.error_message() << "\n";
  EXPECT_LT(took, absl::Seconds(4));
  EXPECT_THAT(slow.status.error_code(), AnyOf(grpc::StatusCode::CANCELLED,
                                              grpc::StatusCode::UNAVAILABLE));
}

TEST_F(LifecycleTest, ExitWithinGraceDuringALongTrainingStepKeepingQueuedJobs) {
  Start({"--threads=1", "--shutdown-grace=2"});
  // SLANG on a 1-500-500-1 net with rank 64 and 256 x 64 per-example
  // gradients per step: one step costs ~D x L x M x S = 2.7e11
  // multiply-adds, far longer than the grace.
  v1::StartTrainingRequest slow = Training(1);
  slow.mutable_model()->add_hidden_sizes(500);
  slow.mutable_model()->add_hidden_sizes(500);
  (*slow.mutable_params())["rank"] = "64";
  (*slow.mutable_params())["mc_samples"] = "64";
  (*slow.mutable_params())["batch_size"] = "256";
  const std::string running = StartTraining(slow);
  const std::string queued = StartTraining(Training(1));
  const v1::Job job = WaitForJob(running, [](const v1::Job& j) {
    return j.state() != v1::JOB_STATE_QUEUED;
  });
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.error();
  absl::SleepFor(absl::Seconds(1));
  ASSERT_EQ(GetJob(running).step(), 0) << "the step was too short to test";
  const absl::Duration took = TimedStop();
  std::cerr << "exit during a long training step took " << took << "\n";
  EXPECT_LT(took, absl::Seconds(4));
  EXPECT_THAT(Log(), HasSubstr("still running"));

  Start({"--threads=1"});
  const v1::Job failed = GetJob(running);
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.error(), "server restarted while the job was running");
  // The queued job was queued again and trains now.
  const v1::Job resumed = WaitForJob(queued, [](const v1::Job& j) {
    return j.state() == v1::JOB_STATE_SUCCEEDED ||
           j.state() == v1::JOB_STATE_FAILED;
  });
  EXPECT_EQ(resumed.state(), v1::JOB_STATE_SUCCEEDED) << resumed.error();
  EXPECT_EQ(Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace bnn::server
