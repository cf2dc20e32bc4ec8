// Internal: conversions between the core's types and the snapshot format's
// messages that other records reuse (a checkpoint's plan holds the model in
// the snapshot's encoding).
#ifndef BNN_IO_SNAPSHOT_PROTO_H_
#define BNN_IO_SNAPSHOT_PROTO_H_

#include "absl/status/statusor.h"

#include "bnn/core/snapshot.pb.h"
#include "bnn/model/model_spec.h"

namespace bnn::internal {

void ModelSpecToProto(const ModelSpec& spec, snapshot::ModelSpec* proto);
// Validated (ModelSpec::Validate); InvalidArgument naming the bad field.
absl::StatusOr<ModelSpec> ModelSpecFromProto(const snapshot::ModelSpec& proto);

}  // namespace bnn::internal

#endif  // BNN_IO_SNAPSHOT_PROTO_H_
