// Fuzz target: bnn::DecodeSnapshot, which every snapshot passes through
// before it is served: ImportSnapshot's bytes, the store's files, and a
// parent snapshot of continual learning.
//
// Input: one byte of flags (bit 0: repair the record frame, see
// RepairRecordFrame), then the snapshot file.
//
// Invariants: decoding fails with DataLoss, FailedPrecondition or
// InvalidArgument and a message, or returns a snapshot that
//  - encodes again, and decodes from that encoding to a snapshot whose
//    encoding is the same bytes (encoding is a fixed point after one round);
//  - serves: a Predictor is built from it and predicts the row of its
//    training means (OK, or Internal refusing a non-finite result) and a row
//    of zeros (also InvalidArgument when the standardisation overflows).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include <google/protobuf/stubs/logging.h>

#include "bnn/check.h"
#include "bnn/io/snapshot.h"

#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/serving_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bnn;
  using namespace bnn::fuzz;
  // Parsing logs every string field with invalid UTF-8, which fuzz inputs
  // are full of; the parse result is what matters.
  [[maybe_unused]] static auto* const logger =
      google::protobuf::SetLogHandler(nullptr);
  FuzzInput input(data, size);
  const uint8_t flags = input.Byte();
  std::string bytes(input.Rest());
  if ((flags & 1) != 0) RepairRecordFrame(&bytes);

  absl::StatusOr<Snapshot> decoded = DecodeSnapshot(bytes);
  if (!decoded.ok()) {
    CheckStatus(
        decoded.status(),
        {absl::StatusCode::kDataLoss, absl::StatusCode::kFailedPrecondition,
         absl::StatusCode::kInvalidArgument},
        "DecodeSnapshot");
    return 0;
  }
  const absl::StatusOr<std::string> encoded = EncodeSnapshot(*decoded);
  BNN_CHECK_OK(encoded.status());
  const absl::StatusOr<Snapshot> again = DecodeSnapshot(*encoded);
  BNN_CHECK_OK(again.status());
  const absl::StatusOr<std::string> reencoded = EncodeSnapshot(*again);
  BNN_CHECK_OK(reencoded.status());
  BNN_CHECK(*reencoded == *encoded);

  CheckServes(std::make_shared<const Snapshot>(*std::move(decoded)));
  return 0;
}
