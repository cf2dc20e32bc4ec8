// StartTraining requests to training plans and job records: merges typed
// method options and string overrides into one ParamMap and resolves the
// whole request synchronously, so that a bad request fails the RPC instead
// of a job.
#ifndef BNN_SERVER_API_BNN_V1_TRAINING_REQUEST_H_
#define BNN_SERVER_API_BNN_V1_TRAINING_REQUEST_H_

#include <absl/status/statusor.h>
#include <google/protobuf/message.h>

#include "bnn/methods/options.h"
#include "bnn/methods/registry.h"
#include "bnn/train/plan.h"
#include "bnn/v1/bnn_service.pb.h"

#include "store/store.pb.h"

namespace bnn::server {

// The set fields of a typed options message (e.g. v1::SlangOptions) as
// parameters: field name -> value printed so that it parses back exactly.
// Generic over the message type, so a new method's options need no code
// here. InvalidArgument for field types that have no parameter form.
absl::StatusOr<ParamMap> TypedOptionsToParams(
    const google::protobuf::Message& options);

// A validated StartTraining request: its plan, and the job record that
// stores it (JobRecordOf(plan)).
struct TrainingJob {
  TrainingPlan plan;
  store::JobRecord record;
};

// The wire request as the core's TrainRequest (typed options, then `params`
// overrides; the trainer's options from the typed fields, a random seed if
// none is given, so that every job is reproducible), resolved by
// bnn::ResolveTrainingPlan against the dataset version it trains on, its
// parent snapshot (null without parent_snapshot_id) and the registered
// methods. A warm start keeps the parent's architecture, so the job records
// the parent's. The record also holds model_name and publish (validated).
absl::StatusOr<TrainingJob> BuildTrainingJob(
    const v1::StartTrainingRequest& request, const store::DatasetMeta& dataset,
    const MethodRegistry& registry,
    const store::SnapshotMeta* parent = nullptr);

}  // namespace bnn::server

#endif  // BNN_SERVER_API_BNN_V1_TRAINING_REQUEST_H_
