// Store records (store.proto) to wire messages (bnn/v1). The two are kept
// apart so that the API can evolve without migrating stored files; these
// are the only conversions between them.
#ifndef BNN_SERVER_API_BNN_V1_TO_WIRE_H_
#define BNN_SERVER_API_BNN_V1_TO_WIRE_H_

#include <cstdint>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include "bnn/v1/bnn_service.pb.h"

#include "server/jobs/job_events.h"
#include "server/store/model_store.h"
#include "store/store.pb.h"

namespace bnn::server {

// A stored task name (bnn::TaskToString) on the wire: binary and multiclass
// are both TASK_CLASSIFICATION.
v1::Task ToWireTask(absl::string_view task);

void ToDatasetInfo(const store::DatasetMeta& meta, v1::DatasetInfo* info);
void ToJob(const store::JobRecord& record, v1::Job* job);
void ToSnapshotInfo(const store::SnapshotMeta& meta, v1::SnapshotInfo* info);
// Version `version` of `model`, which must have it.
void ToModelVersion(const Model& model, int64_t version, v1::ModelVersion* out);
// With `with_versions` every version is listed (GetModel); without, only
// the counts and aliases (ListModels).
void ToModelInfo(const Model& model, bool with_versions, v1::ModelInfo* info);
void ToJobEvent(const JobEvent& event, v1::JobEvent* out);
// A wire state as stored; InvalidArgument for JOB_STATE_UNSPECIFIED and
// values that are no state.
absl::StatusOr<store::JobRecord::State> FromWireJobState(v1::JobState state);

}  // namespace bnn::server

#endif  // BNN_SERVER_API_BNN_V1_TO_WIRE_H_
