// Named models and datasets against the bnn-server binary: publishing,
// listing, aliases, model references in Predict, Acquire and ExportSnapshot,
// alias moves under concurrent Predict calls, deletion refusals, restarts,
// and unique dataset names usable wherever an id is.
#include <atomic>
#include <map>
#include <memory>
#include <signal.h>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bnn/v1/bnn_service.grpc.pb.h"

#include "tests/server/server_binary.h"
#include "tests/server/server_test_util.h"
#include "tests/test_util/http_client.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::NewClientChannel;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::UploadCubic;
using ::bnn::testing::HttpGet;
using ::bnn::testing::HttpResponse;
using ::bnn::testing::ServerProcess;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

MATCHER_P2(GrpcIs, code, substring, "") {
  *result_listener << "status is " << arg.error_code() << ": "
                   << arg.error_message();
  return arg.error_code() == code &&
         arg.error_message().find(substring) != std::string::npos;
}

using S = v1::BnnService::Stub;

class ModelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Start();
    absl::StatusOr<std::string> dataset = UploadCubic(*stub_, 30, "cubic");
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    dataset_id_ = *dataset;
    snap_a_ = Train(dataset_id_, 1);
    snap_b_ = Train(dataset_id_, 2);
    ASSERT_FALSE(snap_a_.empty());
    ASSERT_FALSE(snap_b_.empty());
  }

  void TearDown() override {
    if (HasFailure() && server_ != nullptr) std::cerr << server_->Log();
    if (server_ != nullptr) {
      EXPECT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
    }
  }

  void Start() {
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(BNN_SERVER_PATH, dir_.path() + "/data",
                             dir_.path() + "/server.log",
                             {"--threads=1", "--max-model-aliases=4",
                              "--metrics-listen=127.0.0.1:0"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::BnnService::NewStub(NewClientChannel(server_->address()));
  }

  // A SLANG snapshot of 4 hidden units, 2 epochs of `dataset_id`; with a
  // `model_name`, published under it when the job succeeds.
  std::string Train(const std::string& dataset_id, uint64_t seed,
                    const std::string& model_name = "") {
    v1::StartTrainingRequest train;
    if (!model_name.empty()) {
      train.set_model_name(model_name);
      train.set_publish(true);
    }
    train.set_dataset_id(dataset_id);
    train.set_method("slang");
    train.set_epochs(2);
    train.set_seed(seed);
    train.mutable_model()->add_hidden_sizes(4);
    (*train.mutable_params())["batch_size"] = "10";
    absl::StatusOr<std::string> job_id = testutil::StartTraining(*stub_, train);
    EXPECT_TRUE(job_id.ok()) << job_id.status();
    if (!job_id.ok()) return "";
    const absl::StatusOr<v1::Job> job =
        testutil::WaitForJob(*stub_, *job_id, [](const v1::Job& j) {
          return j.state() == v1::JOB_STATE_SUCCEEDED ||
                 j.state() == v1::JOB_STATE_FAILED;
        });
    EXPECT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->error();
    return job->snapshot_id();
  }

  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (S::*rpc)(grpc::ClientContext*, const Request&,
                                           Response*),
                    const Request& request, Response* response,
                    S* stub = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return ((stub == nullptr ? stub_.get() : stub)->*rpc)(&context, request,
                                                          response);
  }
  grpc::Status Publish(const std::string& name, const std::string& snapshot_id,
                       std::vector<std::string> aliases = {},
                       v1::ModelVersion* out = nullptr) {
    v1::PublishModelRequest request;
    request.set_name(name);
    request.set_snapshot_id(snapshot_id);
    for (const std::string& alias : aliases) request.add_aliases(alias);
    v1::ModelVersion response;
    return Call(&S::PublishModel, request, out != nullptr ? out : &response);
  }
  grpc::Status SetAlias(const std::string& name, const std::string& alias,
                        int64_t version, S* stub = nullptr) {
    v1::SetAliasRequest request;
    request.set_name(name);
    request.set_alias(alias);
    request.set_version(version);
    v1::ModelInfo response;
    return Call(&S::SetAlias, request, &response, stub);
  }
  v1::ModelInfo GetModel(const std::string& name) {
    v1::GetModelRequest request;
    request.set_name(name);
    v1::ModelInfo response;
    const grpc::Status status = Call(&S::GetModel, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }
  grpc::Status DeleteSnapshot(const std::string& snapshot_id, bool force) {
    v1::DeleteSnapshotRequest request;
    request.set_snapshot_id(snapshot_id);
    request.set_force(force);
    v1::DeleteSnapshotResponse response;
    return Call(&S::DeleteSnapshot, request, &response);
  }
  grpc::Status DeleteDataset(const std::string& dataset_id, bool force) {
    v1::DeleteDatasetRequest request;
    request.set_dataset_id(dataset_id);
    request.set_force(force);
    v1::DeleteDatasetResponse response;
    return Call(&S::DeleteDataset, request, &response);
  }
  // Seeded Predict of three rows by snapshot id or model reference.
  static v1::PredictRequest PredictRequest() {
    v1::PredictRequest request;
    request.set_num_samples(8);
    request.set_seed(7);
    for (double x : {-1.0, 0.25, 2.0}) request.add_rows()->add_x(x);
    return request;
  }
  v1::PredictResponse PredictModel(const std::string& model) {
    v1::PredictRequest request = PredictRequest();
    request.set_model(model);
    v1::PredictResponse response;
    const grpc::Status status = Call(&S::Predict, request, &response);
    EXPECT_TRUE(status.ok()) << model << ": " << status.error_message();
    return response;
  }
  v1::PredictResponse PredictSnapshot(const std::string& snapshot_id) {
    v1::PredictRequest request = PredictRequest();
    request.set_snapshot_id(snapshot_id);
    v1::PredictResponse response;
    const grpc::Status status = Call(&S::Predict, request, &response);
    EXPECT_TRUE(status.ok()) << snapshot_id << ": " << status.error_message();
    return response;
  }
  static std::vector<double> Means(const v1::PredictResponse& response) {
    std::vector<double> out;
    for (const v1::RowPrediction& row : response.predictions()) {
      out.push_back(row.mean());
      out.push_back(row.variance());
    }
    return out;
  }
  // The bytes of an export of `target` ("snap-..." or a model reference),
  // and its first chunk.
  grpc::Status Export(const std::string& target, bool by_model,
                      std::string* bytes, v1::SnapshotChunk* first) {
    grpc::ClientContext context;
    v1::ExportSnapshotRequest request;
    if (by_model) {
      request.set_model(target);
    } else {
      request.set_snapshot_id(target);
    }
    auto reader = stub_->ExportSnapshot(&context, request);
    v1::SnapshotChunk chunk;
    bool is_first = true;
    while (reader->Read(&chunk)) {
      if (is_first) *first = chunk;
      is_first = false;
      bytes->append(chunk.data());
    }
    return reader->Finish();
  }
  std::string Metrics() {
    const std::string& url = server_->metrics_url();
    const absl::StatusOr<HttpResponse> response =
        HttpGet(url.substr(7, url.find("/metrics") - 7), "/metrics");
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->body : "";
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<S> stub_;
  std::string dataset_id_;
  std::string snap_a_;
  std::string snap_b_;
};

TEST_F(ModelsTest, PublishListGetAndMoveAliases) {
  v1::ModelVersion published;
  ASSERT_TRUE(Publish("fraud", snap_a_, {"stable"}, &published).ok());
  EXPECT_EQ(published.model_name(), "fraud");
  EXPECT_EQ(published.version(), 1);
  EXPECT_EQ(published.snapshot_id(), snap_a_);
  EXPECT_THAT(published.aliases(), ElementsAre("latest", "stable"));
  ASSERT_TRUE(Publish("fraud", snap_b_, {}, &published).ok());
  EXPECT_EQ(published.version(), 2);
  EXPECT_THAT(published.aliases(), ElementsAre("latest"));
  ASSERT_TRUE(Publish("churn", snap_b_).ok());

  v1::ModelInfo fraud = GetModel("fraud");
  ASSERT_EQ(fraud.versions_size(), 2);
  EXPECT_EQ(fraud.versions(0).snapshot_id(), snap_a_);
  EXPECT_THAT(fraud.versions(0).aliases(), ElementsAre("stable"));
  EXPECT_THAT(fraud.aliases(),
              UnorderedElementsAre(Pair("latest", 2), Pair("stable", 1)));
  EXPECT_EQ(fraud.latest_version(), 2);

  // One model per page: a token leads to the next.
  v1::ListModelsRequest list;
  list.set_page_size(1);
  v1::ListModelsResponse page;
  ASSERT_TRUE(Call(&S::ListModels, list, &page).ok());
  ASSERT_EQ(page.models_size(), 1);
  EXPECT_EQ(page.models(0).name(), "churn");
  EXPECT_EQ(page.models(0).versions_size(), 0);  // GetModel has them
  EXPECT_EQ(page.models(0).num_versions(), 1);
  ASSERT_FALSE(page.next_page_token().empty());
  list.set_page_token(page.next_page_token());
  ASSERT_TRUE(Call(&S::ListModels, list, &page).ok());
  ASSERT_EQ(page.models_size(), 1);
  EXPECT_EQ(page.models(0).name(), "fraud");
  EXPECT_TRUE(page.next_page_token().empty());

  ASSERT_TRUE(SetAlias("fraud", "stable", 2).ok());
  ASSERT_TRUE(SetAlias("fraud", "canary", 1).ok());
  fraud = GetModel("fraud");
  EXPECT_THAT(fraud.aliases(),
              UnorderedElementsAre(Pair("latest", 2), Pair("stable", 2),
                                   Pair("canary", 1)));
  EXPECT_THAT(SetAlias("fraud", "latest", 1),
              GrpcIs(grpc::StatusCode::INVALID_ARGUMENT, "'latest'"));
  EXPECT_THAT(SetAlias("fraud", "stable", 9),
              GrpcIs(grpc::StatusCode::NOT_FOUND, "has no version 9"));
  for (const char* alias : {"a", "b", "c"}) {
    const grpc::Status status = SetAlias("fraud", alias, 1);
    if (std::string(alias) != "c") {
      EXPECT_TRUE(status.ok()) << status.error_message();
    } else {
      EXPECT_THAT(status, GrpcIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 "--max-model-aliases = 4"));
    }
  }
  v1::DeleteAliasRequest delete_alias;
  delete_alias.set_name("fraud");
  delete_alias.set_alias("canary");
  v1::ModelInfo after;
  ASSERT_TRUE(Call(&S::DeleteAlias, delete_alias, &after).ok());
  EXPECT_EQ(after.aliases().count("canary"), 0u);

  v1::DeleteModelRequest delete_model;
  delete_model.set_name("churn");
  v1::DeleteModelResponse deleted;
  ASSERT_TRUE(Call(&S::DeleteModel, delete_model, &deleted).ok());
  v1::GetModelRequest get;
  get.set_name("churn");
  EXPECT_THAT(Call(&S::GetModel, get, &after),
              GrpcIs(grpc::StatusCode::NOT_FOUND, "model 'churn' not found"));
  // The snapshot stayed.
  EXPECT_EQ(PredictSnapshot(snap_b_).snapshot_id(), snap_b_);

  // Models survive a restart.
  ASSERT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
  Start();
  fraud = GetModel("fraud");
  EXPECT_THAT(fraud.aliases(),
              UnorderedElementsAre(Pair("latest", 2), Pair("stable", 2),
                                   Pair("a", 1), Pair("b", 1)));
  EXPECT_EQ(PredictModel("fraud@a").snapshot_id(), snap_a_);
}

// StartTraining(model_name, publish = true): each job's snapshot becomes
// the model's next version and `latest` when the job succeeds.
TEST_F(ModelsTest, TrainingWithPublishPublishesTheSnapshot) {
  const std::string first = Train(dataset_id_, 3, "trained");
  const std::string second = Train(dataset_id_, 4, "trained");
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty());
  const v1::ModelInfo model = GetModel("trained");
  ASSERT_EQ(model.versions_size(), 2) << model.DebugString();
  EXPECT_EQ(model.versions(0).version(), 1);
  EXPECT_EQ(model.versions(0).snapshot_id(), first);
  EXPECT_EQ(model.versions(1).version(), 2);
  EXPECT_EQ(model.versions(1).snapshot_id(), second);
  const v1::PredictResponse latest = PredictModel("trained");
  EXPECT_EQ(latest.snapshot_id(), second);
  EXPECT_EQ(latest.model_version(), 2);
}

// --preload-models (on by default): after a restart the latest version of
// each named model is loaded into the predictor cache in the background, so
// the first Predict on it is a cache hit; older versions are not loaded.
TEST_F(ModelsTest, ARestartPreloadsEachModelsLatestVersion) {
  ASSERT_FALSE(Train(dataset_id_, 3, "trained").empty());
  const std::string latest = Train(dataset_id_, 4, "trained");
  const std::string other = Train(dataset_id_, 5, "other");
  ASSERT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
  Start();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (server_->Log().find("models preloaded") == std::string::npos &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(server_->Log(), HasSubstr("models preloaded snapshots=2"));
  EXPECT_THAT(Metrics(), HasSubstr("bnn_predictor_cache_predictors 2\n"));
  EXPECT_THAT(Metrics(),
              HasSubstr("bnn_predictor_cache_lookups_total{result=\"miss\"}"
                        " 2\n"));
  EXPECT_EQ(PredictModel("trained").snapshot_id(), latest);
  EXPECT_EQ(PredictModel("other").snapshot_id(), other);
  // Both were hits: still two misses, the preload's.
  EXPECT_THAT(Metrics(),
              HasSubstr("bnn_predictor_cache_lookups_total{result=\"miss\"}"
                        " 2\n"));
}

TEST_F(ModelsTest, ReferencesAnswerInPredictAcquireAndExport) {
  ASSERT_TRUE(Publish("m", snap_a_, {"stable"}).ok());
  ASSERT_TRUE(Publish("m", snap_b_).ok());
  const std::vector<double> a = Means(PredictSnapshot(snap_a_));
  const std::vector<double> b = Means(PredictSnapshot(snap_b_));
  ASSERT_NE(a, b);
  const auto expect_answer = [&](const std::string& ref,
                                 const std::string& snapshot, int64_t version,
                                 const std::vector<double>& means) {
    const v1::PredictResponse response = PredictModel(ref);
    EXPECT_EQ(response.snapshot_id(), snapshot) << ref;
    EXPECT_EQ(response.model_name(), "m") << ref;
    EXPECT_EQ(response.model_version(), version) << ref;
    EXPECT_EQ(Means(response), means) << ref;
  };
  expect_answer("m", snap_b_, 2, b);
  expect_answer("m@latest", snap_b_, 2, b);
  expect_answer("m@stable", snap_a_, 1, a);
  expect_answer("m:1", snap_a_, 1, a);
  EXPECT_EQ(PredictSnapshot(snap_a_).model_name(), "");

  v1::PredictRequest bad = PredictRequest();
  v1::PredictResponse response;
  for (const auto& [ref, code, message] :
       std::vector<std::tuple<std::string, grpc::StatusCode, std::string>>{
           {"m@canary", grpc::StatusCode::NOT_FOUND,
            "model 'm' has no alias 'canary' (its aliases: latest, stable)"},
           {"m:3", grpc::StatusCode::NOT_FOUND, "has no version 3"},
           {"nope", grpc::StatusCode::NOT_FOUND, "model 'nope' not found"},
           {"m@Stable", grpc::StatusCode::INVALID_ARGUMENT, "model 'm@Stable'"},
           {"", grpc::StatusCode::INVALID_ARGUMENT, "model is required"}}) {
    bad.set_model(ref);
    EXPECT_THAT(Call(&S::Predict, bad, &response), GrpcIs(code, message))
        << ref;
  }

  // Acquire: the same choice as by id, and the answer names the snapshot.
  v1::AcquireRequest acquire;
  acquire.set_k(2);
  acquire.set_heuristic("max_variance");
  acquire.set_num_samples(8);
  acquire.set_seed(3);
  acquire.set_dataset_id("cubic");  // a name where an id goes
  acquire.set_snapshot_id(snap_a_);
  v1::AcquireResponse by_id;
  ASSERT_TRUE(Call(&S::Acquire, acquire, &by_id).ok());
  EXPECT_EQ(by_id.snapshot_id(), snap_a_);
  acquire.set_model("m@stable");
  v1::AcquireResponse by_ref;
  ASSERT_TRUE(Call(&S::Acquire, acquire, &by_ref).ok());
  EXPECT_EQ(by_ref.snapshot_id(), snap_a_);
  EXPECT_EQ(by_ref.model_name(), "m");
  EXPECT_EQ(by_ref.model_version(), 1);
  EXPECT_THAT(by_ref.indices(),
              ElementsAre(by_id.indices(0), by_id.indices(1)));

  // Export: the same bytes, and the first chunk says what was sent.
  std::string exported_by_id, exported_by_ref;
  v1::SnapshotChunk first_by_id, first_by_ref;
  ASSERT_TRUE(Export(snap_b_, false, &exported_by_id, &first_by_id).ok());
  ASSERT_TRUE(Export("m", true, &exported_by_ref, &first_by_ref).ok());
  EXPECT_EQ(exported_by_id, exported_by_ref);
  EXPECT_EQ(first_by_id.snapshot_id(), snap_b_);
  EXPECT_EQ(first_by_id.model_name(), "");
  EXPECT_EQ(first_by_ref.snapshot_id(), snap_b_);
  EXPECT_EQ(first_by_ref.model_name(), "m");
  EXPECT_EQ(first_by_ref.model_version(), 2);
  std::string ignored;
  v1::SnapshotChunk none;
  EXPECT_THAT(Export("m:7", true, &ignored, &none),
              GrpcIs(grpc::StatusCode::NOT_FOUND, "has no version 7"));

  // Inference metrics are labelled by the model name, never a snapshot id.
  const std::string metrics = Metrics();
  EXPECT_THAT(metrics, HasSubstr("model=\"m\""));
  EXPECT_THAT(metrics, HasSubstr("model=\"unnamed\""));
  EXPECT_THAT(metrics, ::testing::Not(HasSubstr("model=\"snap-")));
}

// Several clients predict with m@stable while another client moves stable
// between two versions: every call succeeds, and each answer comes from one
// of the two snapshots, with exactly that snapshot's numbers.
TEST_F(ModelsTest, AliasMovesUnderConcurrentPredict) {
  ASSERT_TRUE(Publish("m", snap_a_, {"stable"}).ok());
  ASSERT_TRUE(Publish("m", snap_b_).ok());
  const std::map<std::string, std::vector<double>> expected = {
      {snap_a_, Means(PredictSnapshot(snap_a_))},
      {snap_b_, Means(PredictSnapshot(snap_b_))}};
  constexpr int kClients = 4;
  const absl::Duration kRun = absl::Seconds(3);
  std::atomic<bool> stop{false};
  absl::Mutex mu;
  int answers = 0;
  std::map<std::string, int> by_snapshot;
  std::vector<std::string> errors;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      // A connection of its own, as a separate client.
      std::unique_ptr<S> stub =
          v1::BnnService::NewStub(NewClientChannel(server_->address()));
      v1::PredictRequest request = PredictRequest();
      request.set_model("m@stable");
      while (!stop.load()) {
        v1::PredictResponse response;
        const grpc::Status status =
            Call(&S::Predict, request, &response, stub.get());
        absl::MutexLock lock(&mu);
        ++answers;
        if (!status.ok()) {
          errors.push_back(status.error_message());
          continue;
        }
        const auto it = expected.find(response.snapshot_id());
        if (it == expected.end()) {
          errors.push_back("answer from " + response.snapshot_id());
        } else if (Means(response) != it->second) {
          errors.push_back("numbers differ from " + response.snapshot_id());
        } else if (response.model_version() !=
                   (response.snapshot_id() == snap_a_ ? 1 : 2)) {
          errors.push_back("version mismatch");
        }
        ++by_snapshot[response.snapshot_id()];
      }
    });
  }
  int moves = 0;
  std::unique_ptr<S> mover =
      v1::BnnService::NewStub(NewClientChannel(server_->address()));
  for (const absl::Time end = absl::Now() + kRun; absl::Now() < end;) {
    const grpc::Status status =
        SetAlias("m", "stable", moves % 2 + 1, mover.get());
    EXPECT_TRUE(status.ok()) << status.error_message();
    if (!status.ok()) break;
    ++moves;
    absl::SleepFor(absl::Milliseconds(2));
  }
  stop = true;
  for (std::thread& client : clients) client.join();
  EXPECT_THAT(errors, ::testing::IsEmpty());
  EXPECT_GT(moves, 20);
  EXPECT_GT(answers, 40);
  EXPECT_GT(by_snapshot[snap_a_], 0);
  EXPECT_GT(by_snapshot[snap_b_], 0);
  std::cerr << answers << " answers (" << by_snapshot[snap_a_] << " from A, "
            << by_snapshot[snap_b_] << " from B) during " << moves
            << " alias moves\n";
}

TEST_F(ModelsTest, DeletingAPublishedSnapshotNeedsForce) {
  ASSERT_TRUE(Publish("m", snap_a_, {"stable"}).ok());
  ASSERT_TRUE(Publish("m", snap_b_).ok());
  EXPECT_THAT(DeleteSnapshot(snap_a_, false),
              GrpcIs(grpc::StatusCode::FAILED_PRECONDITION,
                     "is published as model m version 1 (aliases stable)"));
  EXPECT_EQ(PredictModel("m@stable").snapshot_id(), snap_a_);
  ASSERT_TRUE(DeleteSnapshot(snap_a_, true).ok());
  const v1::ModelInfo model = GetModel("m");
  ASSERT_EQ(model.versions_size(), 1);
  EXPECT_EQ(model.versions(0).version(), 2);
  EXPECT_THAT(model.aliases(), UnorderedElementsAre(Pair("latest", 2)));
  v1::PredictRequest request = PredictRequest();
  request.set_model("m@stable");
  v1::PredictResponse response;
  EXPECT_THAT(Call(&S::Predict, request, &response),
              GrpcIs(grpc::StatusCode::NOT_FOUND, "has no alias 'stable'"));
  EXPECT_EQ(PredictModel("m").snapshot_id(), snap_b_);
  // Publishing a deleted snapshot is refused.
  EXPECT_THAT(Publish("m", snap_a_),
              GrpcIs(grpc::StatusCode::NOT_FOUND, "not found"));
}

TEST_F(ModelsTest, DatasetNamesAreUniqueAndServeAsIds) {
  EXPECT_THAT(
      UploadCubic(*stub_, 10, "cubic").status(),
      testutil::StatusIs(absl::StatusCode::kAlreadyExists,
                         "a dataset named 'cubic' exists: " + dataset_id_));
  EXPECT_THAT(UploadCubic(*stub_, 10, "ds-0123456789abcdef").status(),
              testutil::StatusIs(absl::StatusCode::kInvalidArgument,
                                 "has the form of a dataset id"));
  v1::GetDatasetRequest get;
  get.set_dataset_id("cubic");
  v1::DatasetInfo info;
  ASSERT_TRUE(Call(&S::GetDataset, get, &info).ok());
  EXPECT_EQ(info.dataset_id(), dataset_id_);
  // Append and train by name.
  {
    grpc::ClientContext context;
    v1::DatasetInfo appended;
    auto writer = stub_->AppendRows(&context, &appended);
    v1::AppendRowsRequest header;
    header.mutable_header()->set_dataset_id("cubic");
    v1::AppendRowsRequest chunk;
    v1::Example* row = chunk.mutable_chunk()->add_rows();
    row->add_x(0.5);
    row->set_y(0.125);
    ASSERT_TRUE(writer->Write(header));
    ASSERT_TRUE(writer->Write(chunk));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
    EXPECT_EQ(appended.dataset_id(), dataset_id_);
    EXPECT_EQ(appended.version(), 2);
  }
  const std::string by_name = Train("cubic", 3);
  v1::GetSnapshotRequest get_snapshot;
  get_snapshot.set_snapshot_id(by_name);
  v1::SnapshotInfo snapshot;
  ASSERT_TRUE(Call(&S::GetSnapshot, get_snapshot, &snapshot).ok());
  EXPECT_EQ(snapshot.dataset_id(), dataset_id_);
  EXPECT_EQ(snapshot.dataset_version(), 2);
  // ListSnapshots filters by a name too.
  v1::ListSnapshotsRequest list;
  list.set_dataset_id("cubic");
  v1::ListSnapshotsResponse listed;
  ASSERT_TRUE(Call(&S::ListSnapshots, list, &listed).ok());
  EXPECT_EQ(listed.snapshots_size(), 3);
}

TEST_F(ModelsTest, DeletingAUsedDatasetNeedsForce) {
  EXPECT_THAT(DeleteDataset("cubic", false),
              GrpcIs(grpc::StatusCode::FAILED_PRECONDITION,
                     "dataset_id '" + dataset_id_ + "' is used by snapshots " +
                         snap_a_));
  absl::StatusOr<std::string> unused = UploadCubic(*stub_, 10, "unused");
  ASSERT_TRUE(unused.ok());
  ASSERT_TRUE(DeleteDataset("unused", false).ok());
  EXPECT_THAT(DeleteDataset(*unused, false),
              GrpcIs(grpc::StatusCode::NOT_FOUND, "not found"));
  // Its name is free again.
  ASSERT_TRUE(UploadCubic(*stub_, 10, "unused").ok());

  ASSERT_TRUE(DeleteDataset(dataset_id_, true).ok());
  v1::GetDatasetRequest get;
  get.set_dataset_id(dataset_id_);
  v1::DatasetInfo info;
  EXPECT_THAT(Call(&S::GetDataset, get, &info),
              GrpcIs(grpc::StatusCode::NOT_FOUND, "not found"));
  // Its snapshots still serve.
  EXPECT_EQ(PredictSnapshot(snap_a_).snapshot_id(), snap_a_);
  // And the deletion survives a restart.
  ASSERT_EQ(server_->Stop(SIGTERM).value_or(-1), 0);
  Start();
  EXPECT_THAT(Call(&S::GetDataset, get, &info),
              GrpcIs(grpc::StatusCode::NOT_FOUND, "not found"));
}

}  // namespace
}  // namespace bnn::server
