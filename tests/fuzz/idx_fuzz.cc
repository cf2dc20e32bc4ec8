// Fuzz target: bnn::ParseIdx, the IDX image/label reader behind ReadIdx
// (Fashion-MNIST and the OOD sets of the BALI experiments).
//
// Input: a little-endian 16-bit length n, then n bytes of image file, then
// the label file (none when empty).
//
// Invariants: a parse either fails with InvalidArgument or DataLoss and a
// message, or returns a dataset that passes Dataset::Validate with at least
// one row, whose size is what the header declares (rows x the product of the
// other dimensions), whose pixels are byte values times the scale and whose
// labels are the label file's bytes.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

#include "bnn/check.h"
#include "bnn/data/dataset.h"
#include "bnn/data/readers.h"

#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  using namespace bnn;
  using namespace bnn::fuzz;
  FuzzInput input(bytes, size);
  const absl::string_view images = input.Take(input.Uint16());
  const absl::string_view labels = input.Rest();
  IdxOptions options;
  options.scale = 1.0 / 255.0;
  const absl::StatusOr<Dataset> data = ParseIdx(images, labels, options);
  if (!data.ok()) {
    CheckStatus(
        data.status(),
        {absl::StatusCode::kInvalidArgument, absl::StatusCode::kDataLoss},
        "ParseIdx");
    return 0;
  }
  BNN_CHECK_OK(data->Validate());
  BNN_CHECK(data->num_rows() >= 1);
  // The header: 0, 0, type, rank, then rank big-endian 32-bit dimensions.
  const auto* header = reinterpret_cast<const unsigned char*>(images.data());
  const size_t rank = header[3];
  const size_t header_bytes = 4 + 4 * rank;
  BNN_CHECK_EQ(static_cast<int64_t>(images.size() - header_bytes),
               data->num_rows() * data->num_features);
  for (size_t i = 0; i < data->features.size(); ++i) {
    BNN_CHECK(data->features[i] == header[header_bytes + i] * options.scale);
  }
  if (labels.empty()) {
    BNN_CHECK(data->task == Task::kRegression);
    return 0;
  }
  BNN_CHECK(IsClassification(data->task));
  const auto* label_bytes =
      reinterpret_cast<const unsigned char*>(labels.data() + 8);
  for (int64_t i = 0; i < data->num_rows(); ++i) {
    BNN_CHECK(data->targets[i] == label_bytes[i]);
  }
  return 0;
}
