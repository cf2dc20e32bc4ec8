// The job lifecycle of the real bnn-server binary: ListJobs (filters,
// paging), WatchJob (events in step order, the final state, a reconnect
// with after_step continuing without gap or duplicate), CancelJob through
// CANCELLING, and checkpoints: jobs of two method families killed with
// SIGKILL mid-run resume after the restart to byte-identical snapshots of
// undisturbed runs; SIGTERM leaves jobs INTERRUPTED that resume; a corrupt
// checkpoint fails its job alone.
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <signal.h>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/io/snapshot.h"
#include "bnn/v1/bnn_service.grpc.pb.h"

#include "client/bnn_client.h"
#include "tests/server/server_binary.h"
#include "tests/server/server_test_util.h"
#include "tests/test_util/test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::GetJob;
using ::bnn::server::testutil::NewClientChannel;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::UploadCubic;
using ::bnn::testing::ServerProcess;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

bool IsFinal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

// What one WatchJob stream delivered.
struct Watched {
  std::vector<v1::JobEvent> events;
  grpc::Status status;

  std::vector<int64_t> ProgressSteps() const {
    std::vector<int64_t> steps;
    for (const v1::JobEvent& event : events) {
      if (event.kind() == v1::JobEvent::KIND_PROGRESS) {
        steps.push_back(event.step());
      }
    }
    return steps;
  }
};

class JobLifecycleTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && server_ != nullptr) std::cerr << server_->Log();
  }

  std::string DataDir() const { return dir_.path() + "/data"; }

  void Start(std::vector<std::string> flags = {}) {
    flags.insert(flags.begin(), "--threads=1");
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(BNN_SERVER_PATH, DataDir(),
                             dir_.path() + "/server.log", flags);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::BnnService::NewStub(NewClientChannel(server_->address()));
  }

  // SLANG or noisy K-FAC on the cubic set: `epochs` passes of 3 steps.
  v1::StartTrainingRequest Training(const std::string& method,
                                    int epochs) const {
    v1::StartTrainingRequest request;
    request.set_dataset_id(dataset_id_);
    request.set_method(method);
    request.set_epochs(epochs);
    request.set_seed(11);
    request.mutable_model()->add_hidden_sizes(16);
    (*request.mutable_params())["batch_size"] = "10";
    return request;
  }

  std::string StartTraining(const v1::StartTrainingRequest& request) {
    absl::StatusOr<std::string> id = testutil::StartTraining(*stub_, request);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }

  v1::Job WaitFor(const std::string& id,
                  const std::function<bool(const v1::Job&)>& done) {
    absl::StatusOr<v1::Job> job = testutil::WaitForJob(*stub_, id, done);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.value_or(v1::Job());
  }
  v1::Job WaitForEnd(const std::string& id) {
    return WaitFor(id, [](const v1::Job& j) { return IsFinal(j.state()); });
  }

  v1::Job Cancel(const std::string& id) {
    grpc::ClientContext context;
    v1::CancelJobRequest request;
    request.set_job_id(id);
    v1::Job job;
    EXPECT_TRUE(stub_->CancelJob(&context, request, &job).ok());
    return job;
  }

  absl::StatusOr<v1::ListJobsResponse> List(const v1::ListJobsRequest& r) {
    grpc::ClientContext context;
    v1::ListJobsResponse response;
    const grpc::Status status = stub_->ListJobs(&context, r, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    return response;
  }

  // Reads a WatchJob stream to its end, or until `stop` returns true for an
  // event (then cancels it).
  Watched Watch(const std::string& id, std::optional<int64_t> after_step,
                const std::function<bool(const Watched&)>& stop = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    v1::WatchJobRequest request;
    request.set_job_id(id);
    if (after_step.has_value()) request.set_after_step(*after_step);
    auto reader = stub_->WatchJob(&context, request);
    Watched watched;
    v1::JobEvent event;
    while (reader->Read(&event)) {
      watched.events.push_back(event);
      if (stop && stop(watched)) {
        context.TryCancel();
        while (reader->Read(&event)) {
        }
        break;
      }
    }
    watched.status = reader->Finish();
    return watched;
  }

  // The snapshot's bytes without its times (training seconds, creation).
  std::string TimelessSnapshot(const std::string& snapshot_id) {
    grpc::ClientContext context;
    v1::ExportSnapshotRequest request;
    request.set_snapshot_id(snapshot_id);
    auto reader = stub_->ExportSnapshot(&context, request);
    std::string bytes;
    v1::SnapshotChunk chunk;
    while (reader->Read(&chunk)) bytes += chunk.data();
    EXPECT_TRUE(reader->Finish().ok());
    absl::StatusOr<Snapshot> snapshot = DecodeSnapshot(bytes);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    if (!snapshot.ok()) return "";
    snapshot->training.seconds = 0;
    snapshot->created_unix_ms = 0;
    return EncodeSnapshot(*snapshot).value_or("");
  }

  std::string CheckpointOf(const std::string& job_id) const {
    return DataDir() + "/checkpoints/" + job_id + ".ckpt";
  }

  void UploadData() {
    absl::StatusOr<std::string> id = UploadCubic(*stub_, 30);
    ASSERT_TRUE(id.ok()) << id.status();
    dataset_id_ = *id;
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::BnnService::Stub> stub_;
  std::string dataset_id_;
};

TEST_F(JobLifecycleTest, ListsJobsNewestFirstFilteredAndPaged) {
  Start();
  UploadData();
  std::vector<std::string> ids;  // oldest first
  for (int i = 0; i < 5; ++i) {
    v1::StartTrainingRequest request =
        Training(i < 3 ? "slang" : "noisy_kfac", 2);
    if (i == 1) request.set_model_name("cubic-model");
    ids.push_back(StartTraining(request));
    absl::SleepFor(absl::Milliseconds(2));  // distinct creation times
  }
  for (const std::string& id : ids) {
    EXPECT_EQ(WaitForEnd(id).state(), v1::JOB_STATE_SUCCEEDED);
  }
  const std::vector<std::string> newest_first(ids.rbegin(), ids.rend());

  // Pages of 2: 2, 2, 1, the token carrying on where the last page ended.
  std::vector<std::string> paged;
  v1::ListJobsRequest request;
  request.set_page_size(2);
  for (int page = 0; page < 3; ++page) {
    absl::StatusOr<v1::ListJobsResponse> listed = List(request);
    ASSERT_TRUE(listed.ok()) << listed.status();
    EXPECT_EQ(listed->jobs_size(), page < 2 ? 2 : 1);
    for (const v1::Job& job : listed->jobs()) paged.push_back(job.job_id());
    EXPECT_EQ(listed->next_page_token().empty(), page == 2);
    request.set_page_token(listed->next_page_token());
  }
  EXPECT_THAT(paged, ElementsAreArray(newest_first));

  const auto ids_of = [&](const v1::ListJobsRequest& r) {
    std::vector<std::string> out;
    absl::StatusOr<v1::ListJobsResponse> listed = List(r);
    EXPECT_TRUE(listed.ok()) << listed.status();
    if (listed.ok()) {
      for (const v1::Job& job : listed->jobs()) out.push_back(job.job_id());
    }
    return out;
  };
  v1::ListJobsRequest by_method;
  by_method.set_method("noisy_kfac");
  EXPECT_THAT(ids_of(by_method), ElementsAreArray({ids[4], ids[3]}));
  v1::ListJobsRequest by_model;
  by_model.set_model_name("cubic-model");
  EXPECT_THAT(ids_of(by_model), ElementsAreArray({ids[1]}));
  v1::ListJobsRequest by_state;
  by_state.add_states(v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(ids_of(by_state).size(), 5u);
  by_state.set_states(0, v1::JOB_STATE_RUNNING);
  by_state.add_states(v1::JOB_STATE_QUEUED);
  EXPECT_TRUE(ids_of(by_state).empty());
  v1::ListJobsRequest by_dataset;
  by_dataset.set_dataset_id(dataset_id_);
  EXPECT_EQ(ids_of(by_dataset).size(), 5u);
  by_dataset.set_dataset_id("ds-0000000000000000");
  EXPECT_TRUE(ids_of(by_dataset).empty());

  v1::ListJobsRequest bad;
  bad.set_page_token("bm90LWEtdG9rZW4");
  EXPECT_EQ(List(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(List(bad).status().message(), HasSubstr("page_token"));

  // GetJob returns the job's model name and loss curve.
  const v1::Job job = *GetJob(*stub_, ids[1]);
  EXPECT_EQ(job.model_name(), "cubic-model");
  ASSERT_EQ(job.loss_curve_size(), 6);  // one point per step of 6
  EXPECT_EQ(job.loss_curve(5).step(), 6);
  EXPECT_EQ(job.loss_curve(5).loss(), job.last_loss());
  EXPECT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
}

TEST_F(JobLifecycleTest, WatchStreamsProgressInOrderAndReconnectsWithoutGaps) {
  Start();
  UploadData();
  // A job holds the only worker, so both watchers see the next one from
  // its start.
  const std::string blocker = StartTraining(Training("slang", 1000000));
  // Long enough (~2 s unloaded) that the reconnect below happens while it
  // runs, and no longer under the sanitizers: 3 steps an epoch.
  constexpr int64_t kSteps = 48000 / (kSanitizerSlowdown > 1 ? 4 : 1);
  const std::string id = StartTraining(Training("slang", kSteps / 3));
  Watched full;
  std::thread full_watch([&] { full = Watch(id, std::nullopt); });
  // The second watcher stops after 3 progress events, then reconnects.
  Watched first_part;
  std::thread part_watch([&] {
    first_part = Watch(id, std::nullopt, [](const Watched& w) {
      return w.ProgressSteps().size() >= 3;
    });
  });
  absl::SleepFor(absl::Milliseconds(300));  // both subscribed
  Cancel(blocker);
  part_watch.join();
  ASSERT_EQ(first_part.ProgressSteps().size(), 3u);
  absl::SleepFor(absl::Milliseconds(300));  // missed events meanwhile
  const Watched second_part = Watch(id, first_part.ProgressSteps().back());
  full_watch.join();

  // The full stream: the job as it was, RUNNING, progress in step order up
  // to the last step, and the final state last.
  ASSERT_TRUE(full.status.ok()) << full.status.error_message();
  ASSERT_GE(full.events.size(), 4u);
  EXPECT_EQ(full.events.front().kind(), v1::JobEvent::KIND_CURRENT);
  EXPECT_EQ(full.events.front().state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(full.events[1].kind(), v1::JobEvent::KIND_STATE);
  EXPECT_EQ(full.events[1].state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(full.events.back().kind(), v1::JobEvent::KIND_STATE);
  EXPECT_EQ(full.events.back().state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_NE(full.events.back().snapshot_id(), "");
  const std::vector<int64_t> steps = full.ProgressSteps();
  ASSERT_GE(steps.size(), 4u);
  for (size_t i = 1; i < steps.size(); ++i) EXPECT_LT(steps[i - 1], steps[i]);
  EXPECT_EQ(steps.back(), kSteps);
  bool rated = false;
  for (const v1::JobEvent& event : full.events) {
    if (event.kind() != v1::JobEvent::KIND_PROGRESS) continue;
    EXPECT_EQ(event.total_steps(), kSteps);
    EXPECT_EQ(event.state(), v1::JOB_STATE_RUNNING);
    rated |= event.steps_per_second() > 0 && event.eta_seconds() >= 0;
  }
  EXPECT_TRUE(rated);
  // At most 10 progress events a second (and the last step).
  const double seconds =
      (full.events.back().unix_ms() - full.events[1].unix_ms()) / 1000.0;
  EXPECT_LE(static_cast<double>(steps.size()), 10 * seconds + 2)
      << steps.size() << " events in " << seconds << " s";

  // The reconnected watcher got every progress event the full one got,
  // once each.
  ASSERT_TRUE(second_part.status.ok()) << second_part.status.error_message();
  EXPECT_EQ(second_part.events.front().kind(), v1::JobEvent::KIND_CURRENT);
  EXPECT_EQ(second_part.events.back().state(), v1::JOB_STATE_SUCCEEDED);
  std::vector<int64_t> joined = first_part.ProgressSteps();
  for (int64_t step : second_part.ProgressSteps()) joined.push_back(step);
  EXPECT_THAT(joined, ElementsAreArray(steps));

  // A watch of a finished job is its final state alone.
  const Watched done = Watch(id, std::nullopt);
  ASSERT_TRUE(done.status.ok());
  ASSERT_EQ(done.events.size(), 1u);
  EXPECT_EQ(done.events[0].state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(done.events[0].step(), kSteps);
  // GetJob's loss curve: bounded, ending at the last step.
  const v1::Job job = *GetJob(*stub_, id);
  EXPECT_LE(job.loss_curve_size(), 1000);
  EXPECT_GE(job.loss_curve_size(), 500);
  EXPECT_EQ(job.loss_curve(job.loss_curve_size() - 1).step(), kSteps);

  // A watcher reconnecting after the job ended gets progress it missed (the
  // steps the hub still keeps for a moment after the end, and at least the
  // last step, from the record), then the final state.
  const int64_t seen = steps[steps.size() - 3];
  const Watched late = Watch(id, seen);
  ASSERT_TRUE(late.status.ok()) << late.status.error_message();
  const std::vector<int64_t> missed = late.ProgressSteps();
  ASSERT_FALSE(missed.empty());
  EXPECT_EQ(missed.back(), kSteps);
  for (size_t i = 0; i < missed.size(); ++i) {
    EXPECT_GT(missed[i], i == 0 ? seen : missed[i - 1]);
    EXPECT_THAT(steps, Contains(missed[i]));
  }
  EXPECT_EQ(late.events.size(), missed.size() + 1);
  EXPECT_EQ(late.events.back().kind(), v1::JobEvent::KIND_CURRENT);
  EXPECT_EQ(late.events.back().state(), v1::JOB_STATE_SUCCEEDED);
  // Nor does a watcher that saw the last step get it twice.
  const Watched again = Watch(id, kSteps);
  ASSERT_TRUE(again.status.ok());
  EXPECT_THAT(again.ProgressSteps(), ElementsAre());
  // After a restart no events are kept, but the last step still arrives.
  EXPECT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
  Start();
  const Watched restarted = Watch(id, seen);
  ASSERT_TRUE(restarted.status.ok()) << restarted.status.error_message();
  EXPECT_THAT(restarted.ProgressSteps(), ElementsAre(kSteps));
  ASSERT_EQ(restarted.events.size(), 2u);
  EXPECT_EQ(restarted.events.back().state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
}

TEST_F(JobLifecycleTest, CancellingARunningJobGoesThroughCancelling) {
  Start();
  UploadData();
  const std::string id = StartTraining(Training("slang", 1000000));
  WaitFor(id, [](const v1::Job& j) { return j.step() > 0; });
  Watched watched;
  std::thread watch([&] { watched = Watch(id, std::nullopt); });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(Cancel(id).state(), v1::JOB_STATE_CANCELLING);
  watch.join();
  EXPECT_EQ(WaitForEnd(id).state(), v1::JOB_STATE_CANCELLED);
  ASSERT_TRUE(watched.status.ok()) << watched.status.error_message();
  std::vector<v1::JobState> states;
  for (const v1::JobEvent& event : watched.events) {
    if (event.kind() == v1::JobEvent::KIND_STATE)
      states.push_back(event.state());
  }
  EXPECT_THAT(states, ElementsAreArray(
                          {v1::JOB_STATE_CANCELLING, v1::JOB_STATE_CANCELLED}));
  // Final: cancelling again returns it as it is.
  EXPECT_EQ(Cancel(id).state(), v1::JOB_STATE_CANCELLED);
  EXPECT_FALSE(std::filesystem::exists(CheckpointOf(id)));
  EXPECT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
}

// The jobs that are interrupted and resumed, and then run whole again for
// comparison, are a quarter as long under a sanitizer: at full length the
// ASan pass spent 135 s on one case and missed a 60 s wait on a loaded
// machine.
constexpr int kResumedJobDivisor = kSanitizerSlowdown > 1 ? 4 : 1;

TEST_F(JobLifecycleTest, JobsOfTwoMethodsKilledMidRunResumeBitForBit) {
  const std::vector<std::string> flags = {"--max-concurrent-jobs=2",
                                          "--checkpoint-seconds=0.2"};
  Start(flags);
  UploadData();
  const v1::StartTrainingRequest slang =
      Training("slang", 6000 / kResumedJobDivisor);
  const v1::StartTrainingRequest kfac =
      Training("noisy_kfac", 3000 / kResumedJobDivisor);
  const std::string slang_id = StartTraining(slang);
  const std::string kfac_id = StartTraining(kfac);
  // Both have checkpointed and trained on: kill -9 mid-run.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!(std::filesystem::exists(CheckpointOf(slang_id)) &&
           std::filesystem::exists(CheckpointOf(kfac_id))) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  absl::SleepFor(absl::Milliseconds(100));
  const v1::Job slang_before = *GetJob(*stub_, slang_id);
  const v1::Job kfac_before = *GetJob(*stub_, kfac_id);
  ASSERT_EQ(slang_before.state(), v1::JOB_STATE_RUNNING)
      << "the job was too short to test";
  ASSERT_EQ(kfac_before.state(), v1::JOB_STATE_RUNNING)
      << "the job was too short to test";
  server_->Kill();

  Start(flags);
  const v1::Job slang_resumed = WaitForEnd(slang_id);
  const v1::Job kfac_resumed = WaitForEnd(kfac_id);
  ASSERT_EQ(slang_resumed.state(), v1::JOB_STATE_SUCCEEDED)
      << slang_resumed.error();
  ASSERT_EQ(kfac_resumed.state(), v1::JOB_STATE_SUCCEEDED)
      << kfac_resumed.error();
  const std::string log = server_->Log();
  EXPECT_THAT(log,
              HasSubstr("job resumes from its checkpoint job_id=" + slang_id));
  EXPECT_THAT(log,
              HasSubstr("job resumes from its checkpoint job_id=" + kfac_id));

  // The same requests without interruption.
  const v1::Job slang_whole = WaitForEnd(StartTraining(slang));
  const v1::Job kfac_whole = WaitForEnd(StartTraining(kfac));
  ASSERT_EQ(slang_whole.state(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(kfac_whole.state(), v1::JOB_STATE_SUCCEEDED);
  const std::string slang_bytes = TimelessSnapshot(slang_resumed.snapshot_id());
  ASSERT_FALSE(slang_bytes.empty());
  EXPECT_TRUE(slang_bytes == TimelessSnapshot(slang_whole.snapshot_id()))
      << "the resumed SLANG job's snapshot differs";
  const std::string kfac_bytes = TimelessSnapshot(kfac_resumed.snapshot_id());
  ASSERT_FALSE(kfac_bytes.empty());
  EXPECT_TRUE(kfac_bytes == TimelessSnapshot(kfac_whole.snapshot_id()))
      << "the resumed noisy K-FAC job's snapshot differs";

  // Each snapshot names the job that produced it.
  grpc::ClientContext context;
  v1::GetSnapshotRequest get;
  get.set_snapshot_id(slang_resumed.snapshot_id());
  v1::SnapshotInfo info;
  ASSERT_TRUE(stub_->GetSnapshot(&context, get, &info).ok());
  EXPECT_EQ(info.job_id(), slang_id);
  EXPECT_FALSE(std::filesystem::exists(CheckpointOf(slang_id)));
  EXPECT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
}

TEST_F(JobLifecycleTest, SigtermInterruptsJobsThatResumeAfterTheRestart) {
  Start();
  UploadData();
  const v1::StartTrainingRequest request =
      Training("slang", 6000 / kResumedJobDivisor);
  const std::string id = StartTraining(request);
  const std::string queued = StartTraining(Training("slang", 1));
  WaitFor(id, [](const v1::Job& j) { return j.step() > 100; });
  // A watcher sees INTERRUPTED, then the stream ends UNAVAILABLE.
  Watched watched;
  std::thread watch([&] { watched = Watch(id, std::nullopt); });
  // The client library's watch reconnects to the restarted server (on the
  // same port) and continues after the last step it saw.
  const std::string address = server_->address();
  client::BnnClient::Options options;
  options.target = address;
  std::unique_ptr<client::BnnClient> client =
      *client::BnnClient::Create(options);
  std::vector<int64_t> followed_steps;
  std::set<v1::JobState> followed_states;
  absl::StatusOr<v1::Job> followed;
  std::thread follow([&] {
    followed = client->WatchJobUntilDone(
        id, absl::Seconds(120),
        [&](const v1::JobEvent& event) {
          if (event.kind() == v1::JobEvent::KIND_PROGRESS) {
            followed_steps.push_back(event.step());
          }
          followed_states.insert(event.state());
        },
        absl::Milliseconds(50));
  });
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time stopping = absl::Now();
  EXPECT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
  EXPECT_LT(absl::Now() - stopping, absl::Seconds(4));
  watch.join();
  EXPECT_EQ(watched.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << watched.status.error_message();
  ASSERT_FALSE(watched.events.empty());
  EXPECT_EQ(watched.events.back().state(), v1::JOB_STATE_INTERRUPTED);
  const int64_t stopped_at = watched.events.back().step();
  EXPECT_GT(stopped_at, 100);
  EXPECT_THAT(server_->Log(), HasSubstr("job interrupted by the shutdown"));
  EXPECT_TRUE(std::filesystem::exists(CheckpointOf(id)));

  Start({"--listen=" + address});
  const v1::Job resumed = WaitForEnd(id);
  ASSERT_EQ(resumed.state(), v1::JOB_STATE_SUCCEEDED) << resumed.error();
  follow.join();
  ASSERT_TRUE(followed.ok()) << followed.status();
  EXPECT_EQ(followed->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(followed_states.count(v1::JOB_STATE_INTERRUPTED) > 0);
  ASSERT_FALSE(followed_steps.empty());
  for (size_t i = 1; i < followed_steps.size(); ++i) {
    EXPECT_LT(followed_steps[i - 1], followed_steps[i]);
  }
  EXPECT_EQ(followed_steps.back(), resumed.total_steps());
  EXPECT_THAT(server_->Log(), HasSubstr("step=" + std::to_string(stopped_at)));
  EXPECT_EQ(WaitForEnd(queued).state(), v1::JOB_STATE_SUCCEEDED);
  const v1::Job whole = WaitForEnd(StartTraining(request));
  EXPECT_TRUE(TimelessSnapshot(resumed.snapshot_id()) ==
              TimelessSnapshot(whole.snapshot_id()))
      << "the resumed job's snapshot differs";
  EXPECT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
}

TEST_F(JobLifecycleTest, ACorruptCheckpointFailsItsJobAlone) {
  const std::vector<std::string> flags = {"--max-concurrent-jobs=2"};
  Start(flags);
  UploadData();
  const std::string damaged = StartTraining(Training("slang", 1000000));
  const std::string intact = StartTraining(Training("noisy_kfac", 3000));
  WaitFor(damaged, [](const v1::Job& j) { return j.step() > 0; });
  WaitFor(intact, [](const v1::Job& j) { return j.step() > 0; });
  EXPECT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
  const std::string path = CheckpointOf(damaged);
  std::string bytes = ReadFileOrEmpty(path);
  ASSERT_FALSE(bytes.empty());
  bytes[bytes.size() / 2] ^= 0x10;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;

  Start(flags);
  const v1::Job failed = WaitForEnd(damaged);
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.error(), HasSubstr("DATA_LOSS"));
  EXPECT_THAT(failed.error(), HasSubstr("checkpoint <data-dir>/checkpoints/" +
                                        damaged + ".ckpt is corrupt"));
  const v1::Job other = WaitForEnd(intact);
  EXPECT_EQ(other.state(), v1::JOB_STATE_SUCCEEDED) << other.error();
  EXPECT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
}

}  // namespace
}  // namespace bnn::server
