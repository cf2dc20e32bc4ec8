// Training plans in the job store: a job record holds the inputs of its plan
// once (method parameters, epochs, steps, seed, standardize, architecture,
// dataset version, parent), and the plan of a record is resolved again by
// bnn::ResolveTrainingPlan, the one place a training request is resolved, so
// StartTraining and the runner that trains the job later agree by
// construction.
#ifndef BNN_SERVER_JOBS_JOB_PLAN_H_
#define BNN_SERVER_JOBS_JOB_PLAN_H_

#include <absl/status/statusor.h>

#include "bnn/methods/registry.h"
#include "bnn/train/plan.h"

#include "store/store.pb.h"

namespace bnn::server {

// The schema and size of a stored dataset version.
absl::StatusOr<DatasetShape> ShapeOfDataset(const store::DatasetMeta& dataset);
// What a warm start needs of a stored snapshot, from its metadata (the
// posterior is loaded only when the job runs).
absl::StatusOr<ParentModel> ParentModelOfSnapshot(
    const store::SnapshotMeta& snapshot);

// A new job record (no id, no state) holding `plan`.
store::JobRecord JobRecordOf(const TrainingPlan& plan);

// The plan of `job` on its dataset version `dataset`, warm-starting from
// `parent` (the snapshot job.parent_snapshot_id() names; null without one).
// Records written before plans were stored (epochs and seed also among the
// parameters) resolve to the same plan.
absl::StatusOr<TrainingPlan> PlanOfJob(const store::JobRecord& job,
                                       const store::DatasetMeta& dataset,
                                       const store::SnapshotMeta* parent,
                                       const MethodRegistry& registry);

}  // namespace bnn::server

#endif  // BNN_SERVER_JOBS_JOB_PLAN_H_
