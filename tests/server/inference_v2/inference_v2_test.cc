// The Open Inference Protocol (KServe V2) against the real bnn-server: a
// client generated from proto/inference for every RPC, plain HTTP requests
// for every REST endpoint, predictions bit-identical to bnn.v1 Predict with
// the same seed, and the "Open Inference Protocol: status by call and
// failure" table of docs/api.md, each row run in both forms (gRPC code and
// HTTP status). One server (with a token file and --http-listen) serves
// every test; it holds a regression model "cubic", a classifier "signs" and
// a model "broken" whose snapshot file is gone (not ready).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <signal.h>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_replace.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bnn/io/sha256.h"
#include "bnn/status.h"
#include "bnn/v1/bnn_service.grpc.pb.h"

#include "inference/grpc_predict_v2.grpc.pb.h"
#include "server/api/inference_v2/infer_request.h"
#include "server/api/inference_v2/method_scopes.h"
#include "server/auth/scope.h"
#include "server/auth/token_file.h"
#include "tests/server/server_binary.h"
#include "tests/server/server_test_util.h"
#include "tests/test_util/http_client.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::NewClientChannel;
using ::bnn::server::testutil::StartTraining;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::UploadCubic;
using ::bnn::server::testutil::WaitForJob;
using ::bnn::testing::HttpRequest;
using ::bnn::testing::HttpResponse;
using ::bnn::testing::ServerProcess;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Stub = inference::GRPCInferenceService::Stub;

constexpr int kMaxPredictRows = 50;
constexpr int kMaxMessageBytes = 200000;

// Everything the tests share: one server and its models.
struct Shared {
  TempDir dir;
  std::map<std::string, std::string> tokens;  // scope -> token
  std::unique_ptr<ServerProcess> server;
  std::string http;  // host:port of --http-listen
  std::string cubic_snapshot;
};
Shared* shared = nullptr;

std::unique_ptr<Stub> OipStub(const std::string& scope = "predict") {
  return inference::GRPCInferenceService::NewStub(NewClientChannel(
      shared->server->address(), scope.empty() ? "" : shared->tokens[scope]));
}
std::unique_ptr<v1::BnnService::Stub> V1Stub() {
  return v1::BnnService::NewStub(
      NewClientChannel(shared->server->address(), shared->tokens["admin"]));
}

// Trains a small SLANG net on `dataset_id` and publishes it as `model`;
// returns the snapshot id.
absl::StatusOr<std::string> TrainAndPublish(v1::BnnService::Stub& stub,
                                            const std::string& dataset_id,
                                            const std::string& model,
                                            uint64_t seed = 1) {
  v1::StartTrainingRequest train;
  train.set_dataset_id(dataset_id);
  train.set_method("slang");
  train.set_epochs(20);
  train.set_seed(seed);
  train.mutable_model()->add_hidden_sizes(4);
  train.set_model_name(model);
  train.set_publish(true);
  absl::StatusOr<std::string> job_id = StartTraining(stub, train);
  if (!job_id.ok()) return job_id.status();
  absl::StatusOr<v1::Job> job = WaitForJob(stub, *job_id, [](const v1::Job& j) {
    return j.state() == v1::JOB_STATE_SUCCEEDED ||
           j.state() == v1::JOB_STATE_FAILED;
  });
  if (!job.ok()) return job.status();
  if (job->state() != v1::JOB_STATE_SUCCEEDED) {
    return absl::InternalError(job->error());
  }
  return job->snapshot_id();
}

// A classification set: x in [-2, 2], label x > 0.
absl::StatusOr<std::string> UploadSigns(v1::BnnService::Stub& stub) {
  grpc::ClientContext context;
  v1::UploadDatasetResponse uploaded;
  auto writer = stub.UploadDataset(&context, &uploaded);
  v1::UploadDatasetRequest header;
  header.mutable_header()->set_name("signs");
  header.mutable_header()->set_task(v1::TASK_CLASSIFICATION);
  header.mutable_header()->set_num_features(1);
  v1::UploadDatasetRequest chunk;
  for (int i = 0; i < 40; ++i) {
    const double x = -2 + 4.0 * i / 39;
    v1::Example* row = chunk.mutable_chunk()->add_rows();
    row->add_x(x);
    row->set_y(x > 0 ? 1 : 0);
  }
  if (writer->Write(header)) writer->Write(chunk);
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) return absl::InternalError(status.error_message());
  return uploaded.dataset().dataset_id();
}

// A snapshot trained on `dataset_id` (seed 2: bytes of its own), exported,
// imported again and the import published as `model`; then its blob is
// deleted: the model exists but cannot serve. (Imported, because a job hands
// its snapshot to the predictor cache, which would keep serving the trained
// one from memory.)
absl::Status PublishBroken(v1::BnnService::Stub& stub,
                           const std::string& dataset_id,
                           const std::string& model) {
  v1::StartTrainingRequest train;
  train.set_dataset_id(dataset_id);
  train.set_method("slang");
  train.set_epochs(20);
  train.set_seed(2);
  train.mutable_model()->add_hidden_sizes(4);
  BNN_ASSIGN_OR_RETURN(const std::string job_id, StartTraining(stub, train));
  BNN_ASSIGN_OR_RETURN(const v1::Job job,
                       WaitForJob(stub, job_id, [](const v1::Job& j) {
                         return j.state() == v1::JOB_STATE_SUCCEEDED ||
                                j.state() == v1::JOB_STATE_FAILED;
                       }));
  if (job.state() != v1::JOB_STATE_SUCCEEDED) {
    return absl::InternalError(job.error());
  }
  std::string bytes;
  {
    grpc::ClientContext context;
    v1::ExportSnapshotRequest request;
    request.set_snapshot_id(job.snapshot_id());
    auto reader = stub.ExportSnapshot(&context, request);
    v1::SnapshotChunk chunk;
    while (reader->Read(&chunk)) bytes += chunk.data();
    if (!reader->Finish().ok()) return absl::InternalError("export failed");
  }
  v1::SnapshotInfo imported;
  {
    grpc::ClientContext context;
    auto writer = stub.ImportSnapshot(&context, &imported);
    v1::SnapshotChunk chunk;
    chunk.set_data(bytes);
    writer->Write(chunk);
    writer->WritesDone();
    const grpc::Status status = writer->Finish();
    if (!status.ok()) return absl::InternalError(status.error_message());
  }
  {
    grpc::ClientContext context;
    v1::PublishModelRequest request;
    request.set_name(model);
    request.set_snapshot_id(imported.snapshot_id());
    v1::ModelVersion published;
    const grpc::Status status =
        stub.PublishModel(&context, request, &published);
    if (!status.ok()) return absl::InternalError(status.error_message());
  }
  // Blobs are named by the SHA-256 of their bytes: the exported file's.
  const std::string blob = Sha256Hex(bytes);
  const std::string path = absl::StrCat(
      shared->dir.path(), "/data/blobs/objects/", blob.substr(0, 2), "/", blob);
  if (!std::filesystem::remove(path)) {
    return absl::InternalError(absl::StrCat("no blob at ", path));
  }
  return absl::OkStatus();
}

class InferenceV2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    shared = new Shared;
    const std::string token_file = shared->dir.path() + "/tokens";
    std::ofstream tokens(token_file);
    for (const char* scope : {"admin", "predict", "train"}) {
      const absl::StatusOr<NewToken> created =
          CreateToken(*ScopeSet::Parse(scope), scope);
      ASSERT_TRUE(created.ok()) << created.status();
      tokens << FormatTokenLine(created->entry) << "\n";
      shared->tokens[scope] = created->token;
    }
    tokens.close();
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(
            BNN_SERVER_PATH, shared->dir.path() + "/data",
            shared->dir.path() + "/server.log",
            {"--token-file", token_file, "--threads=1", "--http-listen",
             "127.0.0.1:0",
             "--max-predict-rows=" + std::to_string(kMaxPredictRows),
             "--max-message-bytes=" + std::to_string(kMaxMessageBytes)});
    ASSERT_TRUE(server.ok()) << server.status();
    shared->server = *std::move(server);
    // Printed before the "listening on" line.
    absl::StatusOr<std::string> http = shared->server->process().WaitForLine(
        "bnn-server http on ", absl::ZeroDuration());
    ASSERT_TRUE(http.ok()) << http.status();
    shared->http = *http;

    std::unique_ptr<v1::BnnService::Stub> stub = V1Stub();
    absl::StatusOr<std::string> cubic = UploadCubic(*stub, 30);
    ASSERT_TRUE(cubic.ok()) << cubic.status();
    absl::StatusOr<std::string> snapshot =
        TrainAndPublish(*stub, *cubic, "cubic");
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    shared->cubic_snapshot = *snapshot;
    absl::StatusOr<std::string> signs = UploadSigns(*stub);
    ASSERT_TRUE(signs.ok()) << signs.status();
    ASSERT_TRUE(TrainAndPublish(*stub, *signs, "signs").ok());
    const absl::Status broken = PublishBroken(*stub, *cubic, "broken");
    ASSERT_TRUE(broken.ok()) << broken;
  }
  static void TearDownTestSuite() {
    if (shared->server != nullptr) {
      EXPECT_EQ(shared->server->Stop(SIGTERM).value_or(-1), 0)
          << shared->server->Log();
    }
    delete shared;
    shared = nullptr;
  }
  void TearDown() override {
    if (HasFailure() && shared->server != nullptr) {
      std::cerr << shared->server->Log();
    }
  }
};

// A ModelInfer request for `model` of `rows` rows x = 0.25 * i (exact in
// FP32 too), FP64 contents.
inference::ModelInferRequest Infer(const std::string& model, int rows,
                                   const std::string& datatype = "FP64") {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  auto* input = request.add_inputs();
  input->set_name("INPUT");
  input->set_datatype(datatype);
  input->add_shape(rows);
  input->add_shape(1);
  for (int i = 0; i < rows; ++i) {
    if (datatype == "FP32") {
      input->mutable_contents()->add_fp32_contents(0.25f * i - 2);
    } else {
      input->mutable_contents()->add_fp64_contents(0.25 * i - 2);
    }
  }
  (*request.mutable_parameters())["num_samples"].set_int64_param(16);
  (*request.mutable_parameters())["seed"].set_int64_param(7);
  return request;
}

grpc::Status Call(Stub& stub, const inference::ModelInferRequest& request,
                  inference::ModelInferResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  return stub.ModelInfer(&context, request, response);
}

std::vector<double> Fp64(const inference::ModelInferResponse& response, int i) {
  if (i < response.raw_output_contents_size()) {
    const std::string& raw = response.raw_output_contents(i);
    std::vector<double> out(raw.size() / sizeof(double));
    std::memcpy(out.data(), raw.data(), raw.size());
    return out;
  }
  const auto& c = response.outputs(i).contents().fp64_contents();
  return std::vector<double>(c.begin(), c.end());
}

// Bitwise equality (EXPECT_EQ on doubles would accept -0 == 0).
void ExpectSameBits(const std::vector<double>& a, const std::vector<double>& b,
                    const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)), 0)
      << what;
}

TEST_F(InferenceV2Test, HealthAndMetadataOverGrpc) {
  // Health needs no token.
  std::unique_ptr<Stub> anonymous = OipStub("");
  {
    grpc::ClientContext context;
    inference::ServerLiveResponse live;
    ASSERT_TRUE(anonymous->ServerLive(&context, {}, &live).ok());
    EXPECT_TRUE(live.live());
  }
  {
    grpc::ClientContext context;
    inference::ServerReadyResponse ready;
    ASSERT_TRUE(anonymous->ServerReady(&context, {}, &ready).ok());
    EXPECT_TRUE(ready.ready());
  }
  std::unique_ptr<Stub> stub = OipStub();
  {
    grpc::ClientContext context;
    inference::ServerMetadataResponse metadata;
    ASSERT_TRUE(stub->ServerMetadata(&context, {}, &metadata).ok());
    EXPECT_EQ(metadata.name(), "bnn-serve");
    EXPECT_FALSE(metadata.version().empty());
  }
  {
    grpc::ClientContext context;
    inference::ModelMetadataRequest request;
    request.set_name("cubic");
    inference::ModelMetadataResponse metadata;
    ASSERT_TRUE(stub->ModelMetadata(&context, request, &metadata).ok());
    EXPECT_EQ(metadata.name(), "cubic");
    EXPECT_THAT(metadata.versions(), ElementsAre("1"));
    EXPECT_EQ(metadata.platform(), "bnn-serve_slang");
    ASSERT_EQ(metadata.inputs_size(), 1);
    EXPECT_EQ(metadata.inputs(0).name(), "INPUT");
    EXPECT_EQ(metadata.inputs(0).datatype(), "FP64");
    EXPECT_THAT(metadata.inputs(0).shape(), ElementsAre(-1, 1));
    std::vector<std::string> outputs;
    for (const auto& o : metadata.outputs()) outputs.push_back(o.name());
    EXPECT_THAT(outputs, ElementsAre("mean", "variance", "epistemic_variance",
                                     "aleatoric_variance"));
  }
  {
    grpc::ClientContext context;
    inference::ModelMetadataRequest request;
    request.set_name("signs");
    request.set_version("latest");
    inference::ModelMetadataResponse metadata;
    ASSERT_TRUE(stub->ModelMetadata(&context, request, &metadata).ok());
    ASSERT_EQ(metadata.outputs_size(), 3);
    EXPECT_EQ(metadata.outputs(0).name(), "probabilities");
    EXPECT_THAT(metadata.outputs(0).shape(), ElementsAre(-1, 2));
  }
  const auto model_ready = [&](const std::string& name,
                               const std::string& version, bool* ready) {
    grpc::ClientContext context;
    inference::ModelReadyRequest request;
    request.set_name(name);
    request.set_version(version);
    inference::ModelReadyResponse response;
    const grpc::Status status = stub->ModelReady(&context, request, &response);
    *ready = response.ready();
    return status.error_code();
  };
  bool ready = false;
  EXPECT_EQ(model_ready("cubic", "", &ready), grpc::StatusCode::OK);
  EXPECT_TRUE(ready);
  EXPECT_EQ(model_ready("cubic", "1", &ready), grpc::StatusCode::OK);
  EXPECT_TRUE(ready);
  EXPECT_EQ(model_ready("cubic", "latest", &ready), grpc::StatusCode::OK);
  EXPECT_TRUE(ready);
  // An unknown model, alias or version does not exist: NOT_FOUND; a model
  // that exists but cannot serve is not ready.
  EXPECT_EQ(model_ready("cubic", "2", &ready), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(model_ready("cubic", "stable", &ready),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(model_ready("nope", "", &ready), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(model_ready("broken", "", &ready), grpc::StatusCode::OK);
  EXPECT_FALSE(ready);
}

// PlanInfer hands Predict the input as one packed [batch, features] tensor
// (no per-row messages), the values bit for bit (-0 and subnormals too, FP32
// widened exactly), from the contents fields and from raw bytes alike.
TEST(PlanInferTest, InputBecomesOnePackedTensor) {
  store::SnapshotMeta meta;
  meta.set_task("regression");
  meta.set_num_features(2);
  const std::vector<double> values = {-0.0, 1.5, 4.9e-324, -3.25, 1e300, 7};
  inference::ModelInferRequest request;
  auto* input = request.add_inputs();
  input->set_name("INPUT");
  input->set_datatype("FP64");
  input->add_shape(3);
  input->add_shape(2);
  input->mutable_contents()->mutable_fp64_contents()->Add(values.begin(),
                                                          values.end());
  absl::StatusOr<oip::InferPlan> plan =
      oip::PlanInfer(request, meta, ServerLimits());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->predict.rows_size(), 0);
  EXPECT_THAT(plan->predict.features().shape(), ElementsAre(3, 2));
  EXPECT_EQ(plan->predict.features().f32_size(), 0);
  ASSERT_EQ(plan->predict.features().f64_size(), 6);
  EXPECT_EQ(std::memcmp(plan->predict.features().f64().data(), values.data(),
                        values.size() * sizeof(double)),
            0);

  input->clear_contents();
  request.add_raw_input_contents(std::string(
      reinterpret_cast<const char*>(values.data()), 6 * sizeof(double)));
  plan = oip::PlanInfer(request, meta, ServerLimits());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->predict.features().f64_size(), 6);
  EXPECT_EQ(std::memcmp(plan->predict.features().f64().data(), values.data(),
                        values.size() * sizeof(double)),
            0);

  const std::vector<float> narrow = {-0.0f, 0.1f, 3e38f, -2.5f, 1e-45f, 8};
  request.clear_raw_input_contents();
  input->set_datatype("FP32");
  input->mutable_contents()->mutable_fp32_contents()->Add(narrow.begin(),
                                                          narrow.end());
  plan = oip::PlanInfer(request, meta, ServerLimits());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->predict.features().f64_size(), 6);
  for (int i = 0; i < 6; ++i) {
    const double widened = narrow[i];
    const double got = plan->predict.features().f64(i);
    EXPECT_EQ(std::memcmp(&got, &widened, sizeof(double)), 0) << i;
  }
}

TEST_F(InferenceV2Test, ModelInferIsBitIdenticalToPredict) {
  std::unique_ptr<Stub> stub = OipStub();
  inference::ModelInferRequest request = Infer("cubic", 9);
  request.set_id("req-1");
  inference::ModelInferResponse response;
  ASSERT_TRUE(Call(*stub, request, &response).ok());
  EXPECT_EQ(response.model_name(), "cubic");
  EXPECT_EQ(response.model_version(), "1");
  EXPECT_EQ(response.id(), "req-1");
  EXPECT_EQ(response.parameters().at("seed").int64_param(), 7);
  EXPECT_EQ(response.parameters().at("num_samples").int64_param(), 16);
  EXPECT_EQ(response.parameters().at("snapshot_id").string_param(),
            shared->cubic_snapshot);
  ASSERT_EQ(response.outputs_size(), 4);
  EXPECT_EQ(response.outputs(0).datatype(), "FP64");
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(9));

  v1::PredictRequest predict;
  predict.set_model("cubic");
  predict.set_num_samples(16);
  predict.set_seed(7);
  for (int i = 0; i < 9; ++i) predict.add_rows()->add_x(0.25 * i - 2);
  v1::PredictResponse predicted;
  grpc::ClientContext context;
  ASSERT_TRUE(V1Stub()->Predict(&context, predict, &predicted).ok());
  std::vector<double> mean, variance, epistemic, aleatoric;
  for (const auto& row : predicted.predictions()) {
    mean.push_back(row.mean());
    variance.push_back(row.variance());
    epistemic.push_back(row.epistemic_variance());
    aleatoric.push_back(row.aleatoric_variance());
  }
  ExpectSameBits(Fp64(response, 0), mean, "mean");
  ExpectSameBits(Fp64(response, 1), variance, "variance");
  ExpectSameBits(Fp64(response, 2), epistemic, "epistemic_variance");
  ExpectSameBits(Fp64(response, 3), aleatoric, "aleatoric_variance");

  // FP32 inputs (exact in both types), and raw bytes, which come back raw.
  inference::ModelInferResponse fp32;
  ASSERT_TRUE(Call(*stub, Infer("cubic", 9, "FP32"), &fp32).ok());
  ExpectSameBits(Fp64(fp32, 0), mean, "FP32 mean");
  inference::ModelInferRequest raw = Infer("cubic", 9, "FP32");
  std::string bytes;
  for (const float v : raw.inputs(0).contents().fp32_contents()) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  raw.mutable_inputs(0)->clear_contents();
  raw.add_raw_input_contents(bytes);
  inference::ModelInferResponse raw_response;
  ASSERT_TRUE(Call(*stub, raw, &raw_response).ok());
  ASSERT_EQ(raw_response.raw_output_contents_size(), 4);
  EXPECT_FALSE(raw_response.outputs(0).has_contents());
  ExpectSameBits(Fp64(raw_response, 3), aleatoric, "raw aleatoric_variance");

  // A subset of the outputs, in the order asked for; version by number.
  request.add_outputs()->set_name("variance");
  request.add_outputs()->set_name("mean");
  request.set_model_version("1");
  inference::ModelInferResponse subset;
  ASSERT_TRUE(Call(*stub, request, &subset).ok());
  ASSERT_EQ(subset.outputs_size(), 2);
  EXPECT_EQ(subset.outputs(0).name(), "variance");
  ExpectSameBits(Fp64(subset, 0), variance, "subset variance");
  ExpectSameBits(Fp64(subset, 1), mean, "subset mean");
}

TEST_F(InferenceV2Test, ClassifierOutputs) {
  std::unique_ptr<Stub> stub = OipStub();
  inference::ModelInferResponse response;
  ASSERT_TRUE(Call(*stub, Infer("signs", 3), &response).ok());
  ASSERT_EQ(response.outputs_size(), 3);
  EXPECT_EQ(response.outputs(0).name(), "probabilities");
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(3, 2));
  EXPECT_EQ(response.parameters().at("class_values").string_param(), "0,1");
  const std::vector<double> p = Fp64(response, 0);
  ASSERT_EQ(p.size(), 6u);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(p[2 * i] + p[2 * i + 1], 1, 1e-12);
  EXPECT_EQ(response.outputs(1).name(), "entropy");
  EXPECT_EQ(response.outputs(2).name(), "mutual_information");
  EXPECT_THAT(response.outputs(2).shape(), ElementsAre(3));
}

TEST_F(InferenceV2Test, MessagesNameTheField) {
  std::unique_ptr<Stub> stub = OipStub();
  inference::ModelInferResponse response;
  inference::ModelInferRequest request = Infer("cubic", 2);
  request.mutable_inputs(0)->set_shape(1, 3);
  EXPECT_THAT(Call(*stub, request, &response).error_message(),
              HasSubstr("inputs[0].shape [2, 3] must be [batch, features] = "
                        "[N, 1]"));
  request = Infer("cubic", 2, "INT32");
  EXPECT_THAT(Call(*stub, request, &response).error_message(),
              HasSubstr("inputs[0].datatype 'INT32' is not supported"));
  request = Infer("cubic", 2);
  (*request.mutable_parameters())["temperature"].set_int64_param(1);
  EXPECT_THAT(Call(*stub, request, &response).error_message(),
              HasSubstr("parameters['temperature'] is not a parameter"));
  request = Infer("signs", 2);
  request.add_outputs()->set_name("mean");
  EXPECT_THAT(Call(*stub, request, &response).error_message(),
              HasSubstr("outputs[0].name 'mean' is not an output of a binary "
                        "model; its outputs are probabilities, entropy, "
                        "mutual_information"));
  request = Infer("cubic", 2);
  request.mutable_inputs(0)->mutable_contents()->add_fp64_contents(1);
  EXPECT_THAT(Call(*stub, request, &response).error_message(),
              HasSubstr("inputs[0].contents.fp64_contents has 3 values; "
                        "shape [2, 1] needs 2"));
}

// JSON of a ModelInfer request like Infer(model, rows) (data nested as
// [rows, 1]).
std::string InferJson(int rows, const std::string& datatype = "FP64") {
  json data = json::array();
  for (int i = 0; i < rows; ++i) data.push_back({0.25 * i - 2});
  return json{{"id", "r"},
              {"parameters", {{"num_samples", 16}, {"seed", 7}}},
              {"inputs",
               {{{"name", "INPUT"},
                 {"shape", {rows, 1}},
                 {"datatype", datatype},
                 {"data", data}}}}}
      .dump();
}

HttpResponse Rest(const std::string& method, const std::string& path,
                  const std::string& body = "",
                  const std::string& scope = "predict") {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!scope.empty()) {
    headers.emplace_back("Authorization", "Bearer " + shared->tokens[scope]);
  }
  if (!body.empty()) headers.emplace_back("Content-Type", "application/json");
  absl::StatusOr<HttpResponse> response =
      HttpRequest(shared->http, method, path, body, headers);
  EXPECT_TRUE(response.ok()) << response.status();
  return response.value_or(HttpResponse());
}

// A request whose data nests 10 arrays deep.
std::string json_deep_data() {
  json data = 1.0;
  for (int i = 0; i < 10; ++i) data = json::array({data});
  json body = json::parse(InferJson(1));
  body["inputs"][0]["data"] = data;
  return body.dump();
}

TEST_F(InferenceV2Test, EveryRestEndpoint) {
  // Health: no token, empty bodies.
  HttpResponse r = Rest("GET", "/v2/health/live", "", "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(Rest("GET", "/v2/health/ready", "", "").status, 200);
  r = Rest("GET", "/v2");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "application/json");
  EXPECT_EQ(json::parse(r.body)["name"], "bnn-serve");
  for (const char* path : {"/v2/models/cubic", "/v2/models/cubic/versions/1",
                           "/v2/models/cubic/versions/latest"}) {
    r = Rest("GET", path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    const json metadata = json::parse(r.body);
    EXPECT_EQ(metadata["name"], "cubic");
    EXPECT_EQ(metadata["versions"], json({"1"}));
    EXPECT_EQ(metadata["inputs"][0]["shape"], json({-1, 1}));
    EXPECT_EQ(metadata["outputs"].size(), 4u);
  }
  EXPECT_EQ(Rest("GET", "/v2/models/cubic/ready").status, 200);
  EXPECT_EQ(Rest("GET", "/v2/models/cubic/versions/1/ready").status, 200);
  EXPECT_EQ(Rest("HEAD", "/v2/models/cubic/ready").status, 200);
  EXPECT_EQ(Rest("GET", "/v2/models/broken/ready").status, 400);
  EXPECT_EQ(Rest("GET", "/v2/models/nope/ready").status, 404);

  // Inference: the same bits as over gRPC (numbers round-trip in JSON).
  r = Rest("POST", "/v2/models/cubic/infer", InferJson(9));
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = json::parse(r.body);
  EXPECT_EQ(answer["model_name"], "cubic");
  EXPECT_EQ(answer["model_version"], "1");
  EXPECT_EQ(answer["id"], "r");
  EXPECT_EQ(answer["parameters"]["seed"], 7);
  inference::ModelInferResponse grpc_answer;
  ASSERT_TRUE(Call(*OipStub(), Infer("cubic", 9), &grpc_answer).ok());
  ASSERT_EQ(answer["outputs"].size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const json& output = answer["outputs"][i];
    EXPECT_EQ(output["name"], grpc_answer.outputs(i).name());
    EXPECT_EQ(output["shape"], json({9}));
    ExpectSameBits(output["data"].get<std::vector<double>>(),
                   Fp64(grpc_answer, i), output["name"]);
  }
  // Flat data, FP32, a version, and an outputs subset.
  json flat = json::parse(InferJson(9, "FP32"));
  std::vector<double> values;
  for (int i = 0; i < 9; ++i) values.push_back(0.25 * i - 2);
  flat["inputs"][0]["data"] = values;
  flat["outputs"] = {{{"name", "epistemic_variance"}}};
  r = Rest("POST", "/v2/models/cubic/versions/1/infer", flat.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json subset = json::parse(r.body);
  ASSERT_EQ(subset["outputs"].size(), 1u);
  ExpectSameBits(subset["outputs"][0]["data"].get<std::vector<double>>(),
                 Fp64(grpc_answer, 2), "FP32 flat epistemic_variance");

  // Refusals are JSON naming the problem.
  r = Rest("POST", "/v2/models/cubic/infer", "{\"inputs\": [{\"name\": 1}]}");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"], "inputs[0].name must be a string");
  r = Rest("POST", "/v2/models/cubic/infer", "{\"inputs\": [], \"x\": 1}");
  EXPECT_THAT(json::parse(r.body)["error"].get<std::string>(),
              HasSubstr("x is not a field of an inference request"));
  r = Rest("POST", "/v2/models/cubic/infer", json_deep_data());
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(json::parse(r.body)["error"].get<std::string>(),
              HasSubstr("inputs[0].data[0][0][0][0][0][0][0][0] nests arrays "
                        "deeper than 8 levels"));
  r = Rest("POST", "/v2/models/cubic/infer", "not json");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(json::parse(r.body)["error"].get<std::string>(),
              HasSubstr("the request body is not JSON"));
  r = Rest("GET", "/v2/models/cubic/infer");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(json::parse(r.body)["error"], "/v2/models/cubic/infer takes POST");
  r = Rest("GET", "/v2/models/cubic/whatever");
  EXPECT_EQ(r.status, 404);
  EXPECT_THAT(json::parse(r.body)["error"].get<std::string>(),
              HasSubstr("no endpoint"));
}

// The rows of docs/api.md's table after `marker`: cells split on '|'.
std::vector<std::vector<std::string>> ReadTable(const std::string& marker) {
  std::ifstream in(BNN_API_DOC);
  std::string line;
  std::vector<std::vector<std::string>> rows;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line == marker) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (line.empty()) break;
    std::vector<std::string> cells;
    for (const absl::string_view cell : absl::StrSplit(line, '|')) {
      cells.push_back(
          absl::StrReplaceAll(absl::StripAsciiWhitespace(cell), {{"`", ""}}));
    }
    if (cells.size() < 3 || cells[1] == "Call" ||
        cells[1].rfind("---", 0) == 0) {
      continue;
    }
    rows.push_back(
        std::vector<std::string>(cells.begin() + 1, cells.end() - 1));
  }
  return rows;
}

std::string CodeName(grpc::StatusCode code) {
  static const auto* const kNames = new std::map<grpc::StatusCode, std::string>{
      {grpc::StatusCode::OK, "OK"},
      {grpc::StatusCode::INVALID_ARGUMENT, "INVALID_ARGUMENT"},
      {grpc::StatusCode::NOT_FOUND, "NOT_FOUND"},
      {grpc::StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"},
      {grpc::StatusCode::FAILED_PRECONDITION, "FAILED_PRECONDITION"},
      {grpc::StatusCode::INTERNAL, "INTERNAL"},
      {grpc::StatusCode::UNAVAILABLE, "UNAVAILABLE"},
      {grpc::StatusCode::DATA_LOSS, "DATA_LOSS"},
      {grpc::StatusCode::UNAUTHENTICATED, "UNAUTHENTICATED"},
  };
  const auto it = kNames->find(code);
  return it == kNames->end() ? absl::StrCat(static_cast<int>(code))
                             : it->second;
}

// One failure of one call, in both forms.
struct Scenario {
  std::function<grpc::Status()> grpc;
  std::function<HttpResponse()> http;
};

TEST_F(InferenceV2Test, StatusTableHoldsInBothForms) {
  std::map<std::string, Scenario> s;
  const auto infer = [](inference::ModelInferRequest request,
                        const std::string& scope = "predict") {
    inference::ModelInferResponse response;
    return Call(*OipStub(scope), request, &response);
  };
  const auto rest_infer = [](const std::string& model, const std::string& body,
                             const std::string& scope = "predict") {
    return Rest("POST", "/v2/models/" + model + "/infer", body, scope);
  };
  const auto json_with = [](const std::function<void(json&)>& edit) {
    json body = json::parse(InferJson(2));
    edit(body);
    return body.dump();
  };
  s["ModelInfer/wrong shape"] = {[&] {
                                   auto r = Infer("cubic", 2);
                                   r.mutable_inputs(0)->set_shape(1, 3);
                                   return infer(r);
                                 },
                                 [&] {
                                   return rest_infer(
                                       "cubic", json_with([](json& b) {
                                         b["inputs"][0]["shape"] = {2, 3};
                                       }));
                                 }};
  s["ModelInfer/wrong datatype"] = {
      [&] { return infer(Infer("cubic", 2, "INT32")); },
      [&] {
        return rest_infer("cubic", json_with([](json& b) {
                            b["inputs"][0]["datatype"] = "INT32";
                          }));
      }};
  s["ModelInfer/bad field"] = {
      [&] {
        auto r = Infer("cubic", 2);
        (*r.mutable_parameters())["seed"].set_int64_param(-1);
        return infer(r);
      },
      [&] {
        return rest_infer(
            "cubic", json_with([](json& b) { b["parameters"]["seed"] = -1; }));
      }};
  s["ModelInfer/bad JSON"] = {
      nullptr, [&] { return rest_infer("cubic", "{\"inputs\""); }};
  s["ModelInfer/unknown model"] = {
      [&] { return infer(Infer("nope", 2)); },
      [&] { return rest_infer("nope", InferJson(2)); }};
  s["ModelInfer/unknown version"] = {
      [&] {
        auto r = Infer("cubic", 2);
        r.set_model_version("9");
        return infer(r);
      },
      [&] { return rest_infer("cubic/versions/9", InferJson(2)); }};
  s["ModelInfer/unready model"] = {
      [&] { return infer(Infer("broken", 2)); },
      [&] { return rest_infer("broken", InferJson(2)); }};
  s["ModelInfer/over a limit"] = {
      [&] { return infer(Infer("cubic", kMaxPredictRows + 1)); },
      [&] { return rest_infer("cubic", InferJson(kMaxPredictRows + 1)); }};
  s["ModelInfer/body too large"] = {
      nullptr, [&] {
        return rest_infer("cubic", std::string(kMaxMessageBytes + 1, ' '));
      }};
  s["ModelInfer/no token"] = {
      [&] { return infer(Infer("cubic", 2), ""); },
      [&] { return rest_infer("cubic", InferJson(2), ""); }};
  s["ModelInfer/wrong scope"] = {
      [&] { return infer(Infer("cubic", 2), "train"); },
      [&] { return rest_infer("cubic", InferJson(2), "train"); }};
  const auto ready = [](const std::string& name, const std::string& version) {
    grpc::ClientContext context;
    inference::ModelReadyRequest request;
    request.set_name(name);
    request.set_version(version);
    inference::ModelReadyResponse response;
    const grpc::Status status =
        OipStub()->ModelReady(&context, request, &response);
    // ready = false is an answer, not an error: the table calls it
    // "OK (ready false)".
    EXPECT_TRUE(!status.ok() || response.ready() == (name == "cubic"));
    return status;
  };
  s["ModelReady/unknown model"] = {
      [&] { return ready("nope", ""); },
      [&] { return Rest("GET", "/v2/models/nope/ready"); }};
  s["ModelReady/unready model"] = {
      [&] { return ready("broken", ""); },
      [&] { return Rest("GET", "/v2/models/broken/ready"); }};
  s["ModelReady/bad field"] = {
      [&] { return ready("not a name!", ""); },
      [&] { return Rest("GET", "/v2/models/not%20a%20name!/ready"); }};
  const auto metadata = [](const std::string& name,
                           const std::string& scope = "predict") {
    grpc::ClientContext context;
    inference::ModelMetadataRequest request;
    request.set_name(name);
    inference::ModelMetadataResponse response;
    return OipStub(scope)->ModelMetadata(&context, request, &response);
  };
  s["ModelMetadata/unknown model"] = {
      [&] { return metadata("nope"); },
      [&] { return Rest("GET", "/v2/models/nope"); }};
  s["ModelMetadata/unready model"] = {
      [&] { return metadata("broken"); },
      [&] { return Rest("GET", "/v2/models/broken"); }};
  s["ModelMetadata/no token"] = {
      [&] { return metadata("cubic", ""); },
      [&] { return Rest("GET", "/v2/models/cubic", "", ""); }};
  s["ServerMetadata/wrong scope"] = {
      [&] {
        grpc::ClientContext context;
        inference::ServerMetadataResponse response;
        return OipStub("train")->ServerMetadata(&context, {}, &response);
      },
      [&] { return Rest("GET", "/v2", "", "train"); }};
  s["ServerLive/no token"] = {
      [&] {
        grpc::ClientContext context;
        inference::ServerLiveResponse response;
        return OipStub("")->ServerLive(&context, {}, &response);
      },
      [&] { return Rest("GET", "/v2/health/live", "", ""); }};

  const std::vector<std::vector<std::string>> rows =
      ReadTable("<!-- oip status table -->");
  ASSERT_GE(rows.size(), 10u) << "the OIP table of docs/api.md was not found";
  for (const std::vector<std::string>& row : rows) {
    ASSERT_EQ(row.size(), 5u) << absl::StrJoin(row, " | ");
    const std::string key = row[0] + "/" + row[1];
    SCOPED_TRACE(key);
    const auto it = s.find(key);
    if (it == s.end()) {
      ADD_FAILURE() << "docs/api.md row '" << key << "' has no scenario";
      continue;
    }
    // "OK (ready false)" and "—" (no such case in that form).
    const std::string want_grpc = row[3].substr(0, row[3].find(' '));
    if (it->second.grpc) {
      const grpc::Status status = it->second.grpc();
      EXPECT_EQ(CodeName(status.error_code()), want_grpc)
          << status.error_message();
    } else {
      EXPECT_EQ(row[3], "—");
    }
    const HttpResponse http = it->second.http();
    EXPECT_EQ(absl::StrCat(http.status), row[4].substr(0, 3)) << http.body;
    if (http.status >= 400 && !http.body.empty()) {
      EXPECT_TRUE(json::parse(http.body).contains("error")) << http.body;
    }
    s.erase(it);
  }
  for (const auto& [key, scenario] : s) {
    ADD_FAILURE() << "scenario '" << key << "' has no row in docs/api.md";
  }
  // The server still serves.
  inference::ModelInferResponse response;
  EXPECT_TRUE(Call(*OipStub(), Infer("cubic", 1), &response).ok());
}

// The scope table of the code, of the service descriptor and of the docs
// agree.
TEST(InferenceScopesTest, EveryMethodHasAScopeAndTheDocsShowIt) {
  const google::protobuf::ServiceDescriptor* service =
      inference::ModelInferRequest::descriptor()->file()->FindServiceByName(
          "GRPCInferenceService");
  ASSERT_NE(service, nullptr);
  ASSERT_EQ(service->method_count(), 6);
  std::map<std::string, std::string> code;
  for (int i = 0; i < service->method_count(); ++i) {
    const absl::StatusOr<std::optional<Scope>> scope =
        oip::RequiredScope(service->method(i)->name());
    ASSERT_TRUE(scope.ok()) << scope.status();
    code[service->method(i)->name()] =
        scope->has_value() ? std::string(ScopeToString(**scope)) : "none";
  }
  EXPECT_EQ(oip::MethodScopes().size(), 6u);
  std::ifstream in(BNN_API_DOC);
  std::stringstream docs;
  docs << in.rdbuf();
  const std::string text = docs.str();
  const std::regex row(
      "\\| `GRPCInferenceService/([A-Za-z]+)` \\| [^|]+\\| "
      "(`predict`|none) \\|");
  std::map<std::string, std::string> documented;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), row);
       it != std::sregex_iterator(); ++it) {
    std::string scope = (*it)[2];
    if (scope != "none") scope = scope.substr(1, scope.size() - 2);
    documented[(*it)[1]] = scope;
  }
  EXPECT_EQ(documented, code);
}

}  // namespace
}  // namespace bnn::server
