#include "server/api/inference_v2/inference_api.h"

#include <memory>
#include <string_view>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <spdlog/spdlog.h>

#include "bnn/status.h"
#include "bnn/version.h"

#include "server/api/inference_v2/infer_request.h"
#include "server/api/inference_v2/method_scopes.h"
#include "server/common/status_util.h"
#include "server/common/user_text.h"

namespace bnn::server::oip {
namespace {

bool AllDigits(absl::string_view text) {
  if (text.empty()) return false;
  for (const char c : text) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

// Failures that point at the server rather than the request.
bool IsServerError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kUnavailable:
      return true;
    default:
      return false;
  }
}

}  // namespace

InferenceApi::InferenceApi(const Options& options, const Authenticator* auth,
                           const ModelStore* models,
                           const SnapshotStore* snapshots,
                           BnnServiceImpl* predict, ServerMetrics* metrics,
                           std::function<bool()> ready)
    : options_(options),
      auth_(auth),
      models_(models),
      snapshots_(snapshots),
      predict_(predict),
      metrics_(metrics),
      ready_(std::move(ready)) {}

absl::StatusOr<std::string> InferenceApi::Authorize(
    const grpc::ServerContextBase& context, absl::string_view rpc) const {
  BNN_ASSIGN_OR_RETURN(const std::optional<Scope> required, RequiredScope(rpc));
  if (!required.has_value()) return std::string();
  return auth_->Authorize(context, rpc, *required);
}

absl::StatusOr<std::string> InferenceApi::Authorize(
    absl::Span<const absl::string_view> authorization,
    absl::string_view rpc) const {
  BNN_ASSIGN_OR_RETURN(const std::optional<Scope> required, RequiredScope(rpc));
  if (!required.has_value()) return std::string();
  return auth_->Authorize(authorization, rpc, *required);
}

bool InferenceApi::Ready() const { return !draining_.load() && ready_(); }

void InferenceApi::ServerMetadata(
    inference::ServerMetadataResponse* response) const {
  response->set_name(std::string(kServerName));
  response->set_version(kLibraryVersion);
  // No protocol extensions (model repository, statistics, binary data,
  // ...) are served.
}

absl::StatusOr<ResolvedModel> InferenceApi::Resolve(
    const std::string& name, const std::string& version) const {
  BNN_RETURN_IF_ERROR(ValidateModelName("model name", name));
  std::string reference = name;
  if (AllDigits(version)) {
    absl::StrAppend(&reference, ":", version);
  } else if (!version.empty()) {
    absl::StrAppend(&reference, "@", version);
  }
  BNN_ASSIGN_OR_RETURN(const ModelRef ref,
                       ParseModelRef("model version", reference));
  return models_->Resolve(ref);
}

absl::StatusOr<bool> InferenceApi::ModelReady(
    const std::string& name, const std::string& version) const {
  const absl::StatusOr<ResolvedModel> resolved = Resolve(name, version);
  if (absl::IsNotFound(resolved.status()) ||
      absl::IsInvalidArgument(resolved.status())) {
    return resolved.status();
  }
  // A model whose record cannot be read exists but serves nothing.
  if (!resolved.ok() || !Ready()) return false;
  return snapshots_->GetMeta(resolved->snapshot_id).ok() &&
         snapshots_->OpenFile(resolved->snapshot_id).ok();
}

absl::Status InferenceApi::ModelMetadata(
    const std::string& name, const std::string& version,
    inference::ModelMetadataResponse* response) const {
  BNN_ASSIGN_OR_RETURN(const ResolvedModel resolved, Resolve(name, version));
  BNN_ASSIGN_OR_RETURN(const Model model, models_->Get(resolved.name));
  BNN_ASSIGN_OR_RETURN(const store::SnapshotMeta meta,
                       snapshots_->GetMeta(resolved.snapshot_id));
  response->set_name(resolved.name);
  for (const store::ModelVersion& v : model.versions) {
    response->add_versions(absl::StrCat(v.version()));
  }
  response->set_platform(absl::StrCat(kServerName, "_", meta.method()));
  AddTensorMetadata(meta, response);
  return absl::OkStatus();
}

void InferenceApi::ModelInfer(BnnServiceImpl::ForeignCall call,
                              const inference::ModelInferRequest* request,
                              inference::ModelInferResponse* response,
                              absl::AnyInvocable<void(absl::Status) &&> done) {
  // What the compute worker needs until `done` has run.
  struct State {
    ResolvedModel model;
    InferPlan plan;
    v1::PredictResponse predicted;
    absl::AnyInvocable<void(absl::Status) &&> done;
  };
  auto state = std::make_unique<State>();
  state->done = std::move(done);
  absl::Status checked = [&]() -> absl::Status {
    BNN_ASSIGN_OR_RETURN(
        state->model, Resolve(request->model_name(), request->model_version()));
    BNN_ASSIGN_OR_RETURN(const store::SnapshotMeta meta,
                         snapshots_->GetMeta(state->model.snapshot_id));
    BNN_ASSIGN_OR_RETURN(state->plan,
                         PlanInfer(*request, meta, options_.limits));
    return absl::OkStatus();
  }();
  if (!checked.ok()) {
    std::move(state->done)(
        HideDataDir(checked, options_.data_dir, options_.blob_dir));
    return;
  }
  BnnServiceImpl::Target target;
  target.snapshot_id = state->model.snapshot_id;
  target.model_name = state->model.name;
  target.model_version = state->model.version;
  State* raw = state.release();
  predict_->PredictFor(
      std::move(call), std::move(target), &raw->plan.predict, &raw->predicted,
      [raw, request, response](absl::Status status) {
        const std::unique_ptr<State> owned(raw);
        if (status.ok()) {
          ToInferResponse(owned->plan, owned->predicted, owned->model.name,
                          owned->model.version, request->id(), response);
        }
        std::move(owned->done)(std::move(status));
      });
}

absl::Status InferenceApi::RecordOutcome(absl::string_view rpc,
                                         absl::string_view peer,
                                         absl::Time start,
                                         const absl::Status& status) {
  metrics_->RecordRpc(rpc, status.code(), absl::Now() - start);
  if (status.ok()) return status;
  const std::string_view name(rpc.data(), rpc.size());  // fmt-formattable
  const std::string_view from(peer.data(), peer.size());
  const std::string line = SafeText(status.ToString(), kMaxStatusMessageBytes);
  if (IsServerError(status)) {
    spdlog::error("{} from {} failed: {}", name, from, line);
  } else {
    spdlog::warn("{} from {} rejected: {}", name, from, line);
  }
  return HideDataDir(status, options_.data_dir, options_.blob_dir);
}

void InferenceApi::BeginShutdown(absl::Time cancel_deadline) {
  draining_.store(true);
  absl::MutexLock lock(&mu_);
  cancel_deadline_ = cancel_deadline;
}

bool InferenceApi::Cancelled() const {
  absl::MutexLock lock(&mu_);
  return absl::Now() >= cancel_deadline_;
}

}  // namespace bnn::server::oip
