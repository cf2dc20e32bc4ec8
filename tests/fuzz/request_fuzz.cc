// Fuzz target: the request validation of every bnn.v1 RPC.
//
// Input: a bnn.fuzz.RpcCall (rpc_call.proto) in wire form: one request, or
// the messages of a client stream, and the fixture the store holds. Each
// request goes through the checks its handler (server/api/bnn_v1/) makes, in
// the handler's order, with the store's lookups answered by the fixture: a
// small dataset and a snapshot trained on it at start-up. Predict and
// Acquire requests that pass validation run on a real Predictor, as the
// server runs them, since the core checks what needs the snapshot (quantile
// levels, options the task supports).
//
// Invariants: every call ends OK or with a status of the codes the API
// documents for bad input, with a message; what validation accepts is
// usable: uploaded and appended rows make a dataset that passes
// Dataset::Validate, a training job's merged parameters pass the method's
// validation again, a Predict response fits the message limit and holds
// finite values of the right shape (probabilities summing to 1, variances
// >= 0, quantiles ordered as their levels), and an acquisition returns k
// distinct pool rows with finite scores.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include <google/protobuf/stubs/logging.h>

#include "bnn/check.h"
#include "bnn/data/dataset.h"
#include "bnn/io/snapshot.h"
#include "bnn/methods/registry.h"
#include "bnn/model/model_spec.h"
#include "bnn/predict/acquisition.h"
#include "bnn/predict/predictor.h"
#include "bnn/predict/scores.h"
#include "bnn/status.h"
#include "bnn/train/trainer.h"
#include "bnn/v1/bnn_service.pb.h"

#include "rpc_call.pb.h"
#include "server/api/bnn_v1/predict_request.h"
#include "server/api/bnn_v1/request_validation.h"
#include "server/api/bnn_v1/training_request.h"
#include "server/jobs/job_plan.h"
#include "server/store/dataset_file.h"
#include "server/store/model_store.h"
#include "server/store/snapshot_meta.h"
#include "tests/fuzz/fuzz_util.h"

namespace bnn::fuzz {
namespace {

using server::ServerLimits;
using StatusCode = absl::StatusCode;

// Small limits, so that inputs of a few KB reach them.
ServerLimits FuzzLimits() {
  ServerLimits limits;
  limits.max_upload_rows = 200;
  limits.max_predict_rows = 64;
  limits.max_predict_samples = 16;
  limits.max_snapshot_bytes = 4096;
  limits.max_message_bytes = 64 << 10;
  return limits;
}

// What the store holds for one bnn.fuzz.Fixture value.
struct StoreFixture {
  Dataset data;
  server::store::DatasetMeta meta;
  std::shared_ptr<const Snapshot> snapshot;
  server::store::SnapshotMeta snapshot_meta;
  std::unique_ptr<Predictor> predictor;
};

// 24 rows of 2 features; `labels` empty: a regression target, else the
// class labels cycled over the rows.
Dataset FixtureData(const std::vector<double>& labels) {
  Dataset data;
  data.num_features = 2;
  data.feature_names = {"a", "b"};
  data.target_name = "y";
  for (int i = 0; i < 24; ++i) {
    const double a = 0.25 * i - 3.0;
    const double b = std::sin(0.7 * i);
    data.features.push_back(a);
    data.features.push_back(b);
    data.targets.push_back(labels.empty() ? a - 2.0 * b
                                          : labels[i % labels.size()]);
  }
  if (!labels.empty()) BNN_CHECK_OK(EncodeClassLabels(&data));
  return data;
}

std::unique_ptr<StoreFixture> MakeFixture(const std::vector<double>& labels) {
  auto fixture = std::make_unique<StoreFixture>();
  fixture->data = FixtureData(labels);
  const Dataset& data = fixture->data;
  server::store::DatasetMeta& meta = fixture->meta;
  meta.set_dataset_id("ds-fixture");
  meta.set_version(1);
  meta.set_name("fixture");
  meta.set_task(std::string(TaskToString(data.task)));
  meta.set_num_rows(data.num_rows());
  meta.set_num_features(static_cast<int>(data.num_features));
  meta.set_num_classes(data.num_classes);
  meta.mutable_class_values()->Add(data.class_values.begin(),
                                   data.class_values.end());
  for (const std::string& name : data.feature_names)
    meta.add_feature_names(name);
  meta.set_target_name(data.target_name);

  TrainRequest request;
  request.method = "slang";
  request.params = {{"batch_size", "8"}};
  request.options.epochs = 2;
  request.options.seed = 1;
  request.hidden_sizes = {3};
  request.dataset_id = meta.dataset_id();
  request.dataset_version = 1;
  absl::StatusOr<Snapshot> snapshot =
      Train(request, data, MethodRegistry::Builtin());
  BNN_CHECK_OK(snapshot.status());
  fixture->snapshot = std::make_shared<const Snapshot>(*std::move(snapshot));
  const absl::StatusOr<std::string> bytes = EncodeSnapshot(*fixture->snapshot);
  BNN_CHECK_OK(bytes.status());
  fixture->snapshot_meta = server::SnapshotMetaOf(
      *fixture->snapshot, "snap-fixture", static_cast<int64_t>(bytes->size()));
  PredictorOptions options;
  options.max_samples = FuzzLimits().max_predict_samples;
  options.cache_bytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<Predictor>> predictor =
      Predictor::Create(fixture->snapshot, options);
  BNN_CHECK_OK(predictor.status());
  fixture->predictor = *std::move(predictor);
  return fixture;
}

const StoreFixture& GetFixture(int which) {
  static const auto* const fixtures = [] {
    auto* all = new std::vector<std::unique_ptr<StoreFixture>>;
    all->push_back(MakeFixture({}));
    all->push_back(MakeFixture({-1.0, 1.0}));
    all->push_back(MakeFixture({2.0, 4.0, 7.0}));
    return all;
  }();
  // Unknown enum values (proto3 keeps them) fall back to regression.
  return *(*fixtures)[which >= 0 && which < 3 ? which : 0];
}

// --- UploadDataset, AppendRows ---------------------------------------------

// The rows of `chunk` (validated) appended to `data`.
void AddRows(const server::RowMatrix& chunk, Dataset* data) {
  data->features.insert(data->features.end(), chunk.features.begin(),
                        chunk.features.end());
  data->targets.insert(data->targets.end(), chunk.targets.begin(),
                       chunk.targets.end());
}

absl::Status UploadDataset(const UploadStream& stream,
                           const ServerLimits& limits) {
  bool have_header = false;
  v1::DatasetHeader header;
  Dataset data;
  for (int i = 0; i < stream.messages_size(); ++i) {
    const v1::UploadDatasetRequest& message = stream.messages(i);
    BNN_RETURN_IF_ERROR(server::ValidateStreamMessage(
        "upload", server::PayloadOf(message), i, have_header));
    if (message.has_header()) {
      BNN_RETURN_IF_ERROR(server::ValidateDatasetHeader(message.header()));
      header = message.header();
      have_header = true;
      data.num_features = header.num_features();
      data.feature_names.assign(header.feature_names().begin(),
                                header.feature_names().end());
      data.target_name = header.target_name();
      continue;
    }
    BNN_ASSIGN_OR_RETURN(
        const server::RowMatrix chunk,
        server::LabelledRows("", message.chunk(), data.num_features,
                             data.num_rows(), server::UploadRowLimit(limits)));
    AddRows(chunk, &data);
  }
  BNN_RETURN_IF_ERROR(
      server::ValidateStreamComplete("upload", have_header, data.num_rows()));
  if (header.task() == v1::TASK_CLASSIFICATION) {
    BNN_RETURN_IF_ERROR(server::ValidateClassLabels(data.targets));
    BNN_RETURN_IF_ERROR(EncodeClassLabels(&data));
  }
  // Validated rows make a valid dataset.
  BNN_CHECK_OK(data.Validate());
  BNN_CHECK(data.num_rows() <= limits.max_upload_rows);
  return absl::OkStatus();
}

absl::Status AppendRows(const AppendStream& stream, const StoreFixture& fixture,
                        const ServerLimits& limits) {
  bool have_header = false;
  Dataset rows;
  for (int i = 0; i < stream.messages_size(); ++i) {
    const v1::AppendRowsRequest& message = stream.messages(i);
    BNN_RETURN_IF_ERROR(server::ValidateStreamMessage(
        "append", server::PayloadOf(message), i, have_header));
    if (message.has_header()) {
      const v1::AppendHeader& header = message.header();
      BNN_RETURN_IF_ERROR(
          server::RequireId("header.dataset_id", header.dataset_id()));
      BNN_RETURN_IF_ERROR(
          server::RequestedVersion("header.expected_version",
                                   header.has_expected_version(),
                                   header.expected_version())
              .status());
      BNN_ASSIGN_OR_RETURN(rows, server::DatasetSchema(fixture.meta));
      have_header = true;
      continue;
    }
    const int64_t first_row = rows.num_rows();
    BNN_ASSIGN_OR_RETURN(
        const server::RowMatrix chunk,
        server::LabelledRows("", message.chunk(), rows.num_features, first_row,
                             server::UploadRowLimit(limits)));
    AddRows(chunk, &rows);
    if (IsClassification(rows.task)) {
      BNN_RETURN_IF_ERROR(server::EncodeAppendedLabels(
          absl::MakeSpan(rows.targets).subspan(first_row), first_row,
          rows.class_values));
    }
  }
  BNN_RETURN_IF_ERROR(
      server::ValidateStreamComplete("append", have_header, rows.num_rows()));
  // Validated rows fit the dataset they are appended to.
  BNN_CHECK_OK(rows.Validate());
  Dataset all = fixture.data;
  BNN_CHECK_OK(all.Append(rows));
  BNN_CHECK_OK(all.Validate());
  return absl::OkStatus();
}

// --- StartTraining -----------------------------------------------------------

absl::Status StartTraining(const v1::StartTrainingRequest& request,
                           const StoreFixture& fixture) {
  BNN_RETURN_IF_ERROR(server::RequireId("dataset_id", request.dataset_id()));
  BNN_RETURN_IF_ERROR(server::RequestedVersion("dataset_version",
                                               request.has_dataset_version(),
                                               request.dataset_version())
                          .status());
  const server::store::SnapshotMeta* parent =
      request.parent_snapshot_id().empty() ? nullptr : &fixture.snapshot_meta;
  const MethodRegistry& registry = MethodRegistry::Builtin();
  BNN_ASSIGN_OR_RETURN(
      const server::TrainingJob job,
      server::BuildTrainingJob(request, fixture.meta, registry, parent));
  // The record is what the runner trains: it resolves to the same plan.
  BNN_CHECK(job.record.method() == request.method());
  const absl::StatusOr<TrainingPlan> again =
      server::PlanOfJob(job.record, fixture.meta, parent, registry);
  BNN_CHECK_OK(again.status());
  BNN_CHECK(again->params == job.plan.params);
  BNN_CHECK(again->options.seed == job.plan.options.seed);
  BNN_CHECK(again->options.epochs == job.plan.options.epochs);
  BNN_CHECK(again->total_steps == job.plan.total_steps);
  BNN_CHECK(again->model.hidden_sizes == job.plan.model.hidden_sizes);
  BNN_CHECK(again->model.activations == job.plan.model.activations);
  BNN_CHECK(job.plan.total_steps >= 1);
  BNN_CHECK_OK(job.plan.model.Validate());
  return absl::OkStatus();
}

// --- Predict, Acquire
// ----------------------------------------------------------

// `b` is at least `a`, up to the bisection's resolution relative to the
// spread of the values.
bool NotBelow(double a, double b, double scale) {
  return b >= a - 1e-6 * (1.0 + scale);
}

// The core's result, checking that its only Internal error is the refusal
// of a non-finite prediction.
template <typename T>
absl::StatusOr<T> OnlyNonFiniteIsInternal(absl::StatusOr<T> result) {
  if (absl::IsInternal(result.status())) {
    BNN_CHECK(
        absl::StrContains(result.status().message(), "non-finite prediction"));
  }
  return result;
}

void CheckPrediction(const v1::PredictRequest& request, int64_t n,
                     const PredictOptions& options, const StoreFixture& fixture,
                     const Prediction& prediction, const ServerLimits& limits) {
  BNN_CHECK_EQ(prediction.num_rows, n);
  if (IsClassification(fixture.data.task)) {
    const int64_t c = fixture.data.num_classes;
    BNN_CHECK_EQ(prediction.num_classes, fixture.data.num_classes);
    BNN_CHECK_EQ(static_cast<int64_t>(prediction.probabilities.size()), n * c);
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0.0;
      for (int64_t k = 0; k < c; ++k) {
        const double p = prediction.probabilities[i * c + k];
        BNN_CHECK(p >= 0.0 && p <= 1.0);
        sum += p;
      }
      BNN_CHECK(std::abs(sum - 1.0) < 1e-9);
      BNN_CHECK(std::isfinite(prediction.entropy[i]));
      BNN_CHECK(std::isfinite(prediction.mutual_information[i]));
    }
  } else {
    const size_t q = options.quantiles.size();
    BNN_CHECK_EQ(prediction.quantiles.size(), n * q);
    for (int64_t i = 0; i < n; ++i) {
      BNN_CHECK(std::isfinite(prediction.mean[i]));
      BNN_CHECK(std::isfinite(prediction.variance[i]));
      BNN_CHECK(prediction.variance[i] >= 0.0);
      BNN_CHECK(prediction.epistemic_variance[i] >= 0.0);
      const double scale =
          std::abs(prediction.mean[i]) + std::sqrt(prediction.variance[i]);
      for (size_t a = 0; a < q; ++a) {
        BNN_CHECK(std::isfinite(prediction.quantiles[i * q + a]));
        for (size_t b = 0; b < q; ++b) {
          if (options.quantiles[a] < options.quantiles[b]) {
            BNN_CHECK(NotBelow(prediction.quantiles[i * q + a],
                               prediction.quantiles[i * q + b], scale));
          }
        }
      }
    }
  }
  for (const double v : prediction.sample_outputs) BNN_CHECK(std::isfinite(v));
  v1::PredictResponse response;
  server::ToPredictResponse(prediction, options, request.snapshot_id(),
                            *fixture.snapshot, request.packed_response(),
                            &response);
  // The response (beyond the echoed id) fits the message limit, as
  // ValidateResponseSize promises.
  int64_t bytes = 0;
  for (const v1::RowPrediction& row : response.predictions()) {
    bytes += static_cast<int64_t>(row.ByteSizeLong()) + 4;
  }
  BNN_CHECK(bytes <= limits.max_message_bytes);
}

// What Predict, Acquire and ExportSnapshot answer with, as
// BnnServiceImpl::ResolveTarget checks it: a snapshot id, or a model
// reference that parses (the fixture's store then resolves every model to
// its snapshot). A reference that parses is exactly one of the three forms
// and spells back to itself.
template <typename Request>
absl::Status CheckTarget(const Request& request) {
  if (request.target_case() != Request::kModel) {
    return server::RequireId("snapshot_id", request.snapshot_id());
  }
  if (request.model().empty()) {
    return absl::InvalidArgumentError("model is required");
  }
  BNN_ASSIGN_OR_RETURN(const server::ModelRef ref,
                       server::ParseModelRef("model", request.model()));
  BNN_CHECK_OK(server::ValidateModelName("name", ref.name));
  BNN_CHECK(ref.alias.empty() != (ref.version == 0));
  if (ref.version > 0) {
    BNN_CHECK(request.model() == absl::StrCat(ref.name, ":", ref.version));
  } else if (ref.alias == server::kLatestAlias && request.model() == ref.name) {
    // The plain name means NAME@latest.
  } else {
    BNN_CHECK(request.model() == absl::StrCat(ref.name, "@", ref.alias));
    BNN_CHECK(ref.alias == server::kLatestAlias ||
              server::ValidateUserAlias("alias", ref.alias).ok());
  }
  return absl::OkStatus();
}

absl::Status Predict(const v1::PredictRequest& request,
                     const StoreFixture& fixture, const ServerLimits& limits) {
  BNN_RETURN_IF_ERROR(CheckTarget(request));
  BNN_ASSIGN_OR_RETURN(const server::RowMatrix rows,
                       server::PredictRows(request, *fixture.snapshot, limits));
  BNN_ASSIGN_OR_RETURN(const PredictOptions options,
                       server::BuildPredictOptions(request, rows.num_rows,
                                                   *fixture.snapshot, limits));
  BNN_ASSIGN_OR_RETURN(const Prediction prediction,
                       OnlyNonFiniteIsInternal(fixture.predictor->Predict(
                           rows.features, rows.num_rows, options)));
  CheckPrediction(request, rows.num_rows, options, fixture, prediction, limits);
  return absl::OkStatus();
}

absl::Status Acquire(const v1::AcquireRequest& request,
                     const StoreFixture& fixture, const ServerLimits& limits) {
  BNN_RETURN_IF_ERROR(CheckTarget(request));
  const int64_t num_features = fixture.predictor->num_features();
  std::vector<double> request_rows;
  std::unique_ptr<PoolSource> pool;
  // The pool as BnnServiceImpl::OpenPool opens it; a stored dataset is the
  // fixture's.
  switch (request.pool_case()) {
    case v1::AcquireRequest::kDatasetId:
      BNN_RETURN_IF_ERROR(
          server::RequireId("dataset_id", request.dataset_id()));
      BNN_RETURN_IF_ERROR(server::RequestedVersion(
                              "dataset_version", request.has_dataset_version(),
                              request.dataset_version())
                              .status());
      pool = std::make_unique<SpanPool>(fixture.data.features, num_features);
      break;
    case v1::AcquireRequest::kRows:
      if (request.has_dataset_version()) {
        return absl::InvalidArgumentError(
            "dataset_version is set but the pool is rows in the request");
      }
      {
        BNN_ASSIGN_OR_RETURN(
            server::RowMatrix matrix,
            server::FeatureRows("rows.rows", request.rows().rows(),
                                "rows.features", request.rows().has_features(),
                                request.rows().features(), num_features,
                                server::PredictRowLimit(limits)));
        request_rows = std::move(matrix.features);
      }
      pool = std::make_unique<SpanPool>(request_rows, num_features);
      break;
    case v1::AcquireRequest::POOL_NOT_SET:
      return absl::InvalidArgumentError("the pool is required");
  }
  BNN_ASSIGN_OR_RETURN(
      const AcquireOptions options,
      server::BuildAcquireOptions(request, pool->num_rows(), limits));
  BNN_ASSIGN_OR_RETURN(const Acquisition acquisition,
                       OnlyNonFiniteIsInternal(
                           bnn::Acquire(*fixture.predictor, *pool, options)));
  BNN_CHECK_EQ(acquisition.pool_rows, pool->num_rows());
  BNN_CHECK_EQ(static_cast<int64_t>(acquisition.indices.size()),
               static_cast<int64_t>(request.k()));
  BNN_CHECK_EQ(acquisition.scores.size(), acquisition.indices.size());
  std::set<int64_t> distinct;
  for (size_t i = 0; i < acquisition.indices.size(); ++i) {
    const int64_t index = acquisition.indices[i];
    BNN_CHECK(index >= 0 && index < pool->num_rows());
    BNN_CHECK(distinct.insert(index).second);
    BNN_CHECK(std::isfinite(acquisition.scores[i]));
  }
  return absl::OkStatus();
}

// --- Evaluate
// -----------------------------------------------------------------

// As BnnServiceImpl::DoEvaluate: a stored dataset is the fixture's (its
// labels already class indices of the fixture's snapshot, whose classes are
// the dataset's), OOD rows as a pool's.
absl::Status Evaluate(const v1::EvaluateRequest& request,
                      const StoreFixture& fixture, const ServerLimits& limits) {
  BNN_RETURN_IF_ERROR(CheckTarget(request));
  const Snapshot& snapshot = *fixture.snapshot;
  const int64_t num_features = fixture.predictor->num_features();
  BNN_ASSIGN_OR_RETURN(EvaluateOptions options,
                       server::BuildEvaluateOptions(request, limits));
  server::RowMatrix rows;
  switch (request.data_case()) {
    case v1::EvaluateRequest::kDatasetId:
      BNN_RETURN_IF_ERROR(
          server::RequireId("dataset_id", request.dataset_id()));
      BNN_RETURN_IF_ERROR(server::RequestedVersion(
                              "dataset_version", request.has_dataset_version(),
                              request.dataset_version())
                              .status());
      BNN_RETURN_IF_ERROR(server::CheckEvaluationTask(fixture.meta, snapshot));
      rows.num_rows = fixture.data.num_rows();
      rows.features = fixture.data.features;
      rows.targets = fixture.data.targets;
      break;
    case v1::EvaluateRequest::kRows: {
      BNN_ASSIGN_OR_RETURN(
          rows, server::LabelledRows("rows.", request.rows(), num_features, 0,
                                     server::PredictRowLimit(limits)));
      if (IsClassification(snapshot.task)) {
        BNN_RETURN_IF_ERROR(server::EncodeEvaluationLabels(
            request.rows().has_targets(), snapshot.class_values,
            &rows.targets));
      }
      break;
    }
    case v1::EvaluateRequest::DATA_NOT_SET:
      return absl::InvalidArgumentError("the labelled rows are required");
  }
  server::RowMatrix ood;
  if (request.ood_case() == v1::EvaluateRequest::kOodRows) {
    BNN_ASSIGN_OR_RETURN(
        ood, server::FeatureRows("ood_rows.rows", request.ood_rows().rows(),
                                 "ood_rows.features",
                                 request.ood_rows().has_features(),
                                 request.ood_rows().features(), num_features,
                                 server::PredictRowLimit(limits)));
  }
  BNN_ASSIGN_OR_RETURN(
      const Evaluation evaluation,
      OnlyNonFiniteIsInternal(
          bnn::Evaluate(*fixture.predictor, rows.features, rows.targets,
                        rows.num_rows, ood.features, ood.num_rows, options)));
  // What applies to the task is there, and probabilities' scores are in
  // range.
  BNN_CHECK_EQ(evaluation.num_rows, rows.num_rows);
  if (IsClassification(snapshot.task)) {
    BNN_CHECK(evaluation.accuracy.has_value() && !evaluation.rmse);
    BNN_CHECK(*evaluation.accuracy >= 0 && *evaluation.accuracy <= 1);
    BNN_CHECK(*evaluation.ece >= 0 && *evaluation.ece <= 1);
    BNN_CHECK(*evaluation.brier >= 0 && *evaluation.brier <= 2 + 1e-12);
    BNN_CHECK_EQ(static_cast<int>(evaluation.reliability.size()),
                 options.ece_bins);
    int64_t counted = 0;
    for (const ReliabilityBin& bin : evaluation.reliability) {
      counted += bin.count;
    }
    BNN_CHECK_EQ(counted, rows.num_rows);
    BNN_CHECK(evaluation.auroc_entropy.has_value() == (ood.num_rows > 0));
  } else {
    BNN_CHECK(evaluation.rmse.has_value() && !evaluation.accuracy);
    BNN_CHECK(*evaluation.rmse >= 0);
    BNN_CHECK(*evaluation.nll == -*evaluation.log_likelihood);
  }
  v1::EvaluateResponse response;
  server::ToEvaluateResponse(evaluation, options, snapshot, &response);
  return absl::OkStatus();
}

// --- ImportSnapshot
// ------------------------------------------------------------

absl::Status ImportSnapshot(const ImportStream& stream,
                            const ServerLimits& limits) {
  int64_t bytes = 0;
  for (const v1::SnapshotChunk& chunk : stream.chunks()) {
    BNN_RETURN_IF_ERROR(server::ValidateStreamBytes(
        "import", bytes + static_cast<int64_t>(chunk.data().size()),
        limits.max_snapshot_bytes, "--max-snapshot-bytes"));
    bytes += static_cast<int64_t>(chunk.data().size());
  }
  if (bytes == 0) {
    return absl::InvalidArgumentError("the import has no data");
  }
  BNN_CHECK(bytes <= limits.max_snapshot_bytes);
  // The bytes are then the store's to decode: snapshot_fuzz.
  return absl::OkStatus();
}

// --- Named models: the checks before the model store's lookups (the store
// checks names and aliases again; model_store_test covers what follows).

absl::Status PublishModel(const v1::PublishModelRequest& request) {
  BNN_RETURN_IF_ERROR(server::ValidateModelName("name", request.name()));
  BNN_RETURN_IF_ERROR(server::RequireId("snapshot_id", request.snapshot_id()));
  for (int i = 0; i < request.aliases_size(); ++i) {
    BNN_RETURN_IF_ERROR(server::ValidateUserAlias(
        absl::StrCat("aliases[", i, "]"), request.aliases(i)));
  }
  // What passed is a file-name-safe name and aliases a reference can name.
  BNN_CHECK(request.name().find('/') == std::string::npos);
  BNN_CHECK(request.name()[0] != '.');
  for (const std::string& alias : request.aliases()) {
    BNN_CHECK_OK(
        server::ParseModelRef("model", absl::StrCat(request.name(), "@", alias))
            .status());
  }
  return absl::OkStatus();
}

absl::Status SetAlias(const v1::SetAliasRequest& request) {
  BNN_RETURN_IF_ERROR(server::ValidateModelName("name", request.name()));
  BNN_RETURN_IF_ERROR(server::ValidateUserAlias("alias", request.alias()));
  if (request.version() < 1) {
    return absl::InvalidArgumentError("version must be >= 1");
  }
  return absl::OkStatus();
}

absl::Status GetDataset(const v1::GetDatasetRequest& request) {
  BNN_RETURN_IF_ERROR(server::RequireId("dataset_id", request.dataset_id()));
  return server::RequestedVersion("version", request.has_version(),
                                  request.version())
      .status();
}

}  // namespace
}  // namespace bnn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  using namespace bnn;
  using namespace bnn::fuzz;
  using StatusCode = absl::StatusCode;
  // Parsing logs every string field with invalid UTF-8, which fuzz inputs
  // are full of; the parse result is what matters.
  [[maybe_unused]] static auto* const logger =
      google::protobuf::SetLogHandler(nullptr);
  RpcCall call;
  // Bytes that are no RpcCall reach no handler: kept out of the corpus.
  if (!call.ParseFromArray(bytes, static_cast<int>(size))) return -1;
  const StoreFixture& fixture = GetFixture(call.fixture());
  const server::ServerLimits limits = FuzzLimits();
  const std::initializer_list<StatusCode> kBadInput = {
      StatusCode::kInvalidArgument, StatusCode::kResourceExhausted};
  // Predict and Acquire also refuse a non-finite result (finite inputs that
  // overflow the network) with Internal, naming the snapshot.
  const std::initializer_list<StatusCode> kComputed = {
      StatusCode::kInvalidArgument, StatusCode::kResourceExhausted,
      StatusCode::kInternal};
  switch (call.rpc_case()) {
    case RpcCall::kUploadDataset:
      CheckStatus(UploadDataset(call.upload_dataset(), limits), kBadInput,
                  "UploadDataset");
      break;
    case RpcCall::kGetDataset:
      CheckStatus(GetDataset(call.get_dataset()), kBadInput, "GetDataset");
      break;
    case RpcCall::kStartTraining:
      CheckStatus(StartTraining(call.start_training(), fixture), kBadInput,
                  "StartTraining");
      break;
    case RpcCall::kGetJob:
      CheckStatus(server::RequireId("job_id", call.get_job().job_id()),
                  kBadInput, "GetJob");
      break;
    case RpcCall::kCancelJob:
      CheckStatus(server::RequireId("job_id", call.cancel_job().job_id()),
                  kBadInput, "CancelJob");
      break;
    case RpcCall::kPredict:
      CheckStatus(Predict(call.predict(), fixture, limits), kComputed,
                  "Predict");
      break;
    case RpcCall::kAcquire:
      CheckStatus(Acquire(call.acquire(), fixture, limits), kComputed,
                  "Acquire");
      break;
    case RpcCall::kEvaluate:
      CheckStatus(Evaluate(call.evaluate(), fixture, limits), kComputed,
                  "Evaluate");
      break;
    case RpcCall::kGetSnapshot:
      CheckStatus(
          server::RequireId("snapshot_id", call.get_snapshot().snapshot_id()),
          kBadInput, "GetSnapshot");
      break;
    case RpcCall::kDeleteSnapshot:
      CheckStatus(server::RequireId("snapshot_id",
                                    call.delete_snapshot().snapshot_id()),
                  kBadInput, "DeleteSnapshot");
      break;
    case RpcCall::kExportSnapshot:
      CheckStatus(CheckTarget(call.export_snapshot()), kBadInput,
                  "ExportSnapshot");
      break;
    case RpcCall::kImportSnapshot:
      CheckStatus(ImportSnapshot(call.import_snapshot(), limits), kBadInput,
                  "ImportSnapshot");
      break;
    case RpcCall::kAppendRows:
      CheckStatus(AppendRows(call.append_rows(), fixture, limits), kBadInput,
                  "AppendRows");
      break;
    case RpcCall::kPublishModel:
      CheckStatus(PublishModel(call.publish_model()), kBadInput,
                  "PublishModel");
      break;
    case RpcCall::kSetAlias:
      CheckStatus(SetAlias(call.set_alias()), kBadInput, "SetAlias");
      break;
    case RpcCall::kDeleteAlias: {
      absl::Status status =
          server::ValidateModelName("name", call.delete_alias().name());
      if (status.ok()) {
        status =
            server::ValidateUserAlias("alias", call.delete_alias().alias());
      }
      CheckStatus(status, kBadInput, "DeleteAlias");
      break;
    }
    case RpcCall::kGetModel:
      CheckStatus(server::ValidateModelName("name", call.get_model().name()),
                  kBadInput, "GetModel");
      break;
    case RpcCall::kDeleteModel:
      CheckStatus(server::ValidateModelName("name", call.delete_model().name()),
                  kBadInput, "DeleteModel");
      break;
    case RpcCall::kListModels: {
      const v1::ListModelsRequest& list = call.list_models();
      CheckStatus(
          list.page_size() < 0 || list.page_size() > server::kMaxModelsPageSize
              ? absl::InvalidArgumentError("page_size out of range")
          : list.page_token().empty()
              ? absl::OkStatus()
              : server::ValidateModelName("page_token", list.page_token()),
          kBadInput, "ListModels");
      break;
    }
    case RpcCall::kDeleteDataset:
      CheckStatus(
          server::RequireId("dataset_id", call.delete_dataset().dataset_id()),
          kBadInput, "DeleteDataset");
      break;
    case RpcCall::RPC_NOT_SET:
      break;
  }
  return 0;
}
