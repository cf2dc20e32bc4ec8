#include "bnn/data/dataset_hash.h"

#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

#include "train/sha256.h"

namespace bnn {
namespace {

// Tells a saved state apart from other bytes, and pins the layout.
constexpr absl::string_view kStateMagic = "BNNHSH1\n";

}  // namespace

DatasetHasher::DatasetHasher(Task task, int64_t num_features)
    : sha_(std::make_unique<internal::Sha256>()), num_features_(num_features) {
  sha_->Update(TaskToString(task));
  sha_->Update(&num_features, sizeof(num_features));
}

DatasetHasher::DatasetHasher(std::unique_ptr<internal::Sha256> sha,
                             int64_t num_features, int64_t num_rows)
    : sha_(std::move(sha)), num_features_(num_features), num_rows_(num_rows) {}

DatasetHasher::DatasetHasher(const DatasetHasher& other)
    : sha_(std::make_unique<internal::Sha256>(*other.sha_)),
      num_features_(other.num_features_),
      num_rows_(other.num_rows_) {}

DatasetHasher& DatasetHasher::operator=(const DatasetHasher& other) {
  if (this != &other) *this = DatasetHasher(other);
  return *this;
}

DatasetHasher::DatasetHasher(DatasetHasher&&) noexcept = default;
DatasetHasher& DatasetHasher::operator=(DatasetHasher&&) noexcept = default;
DatasetHasher::~DatasetHasher() = default;

absl::StatusOr<DatasetHasher> DatasetHasher::FromState(absl::string_view state,
                                                       int64_t num_features) {
  // kStateMagic | num_features i64 | num_rows i64 | SHA-256 state
  const size_t fixed = kStateMagic.size() + 2 * sizeof(int64_t);
  int64_t stored_features = -1;
  int64_t num_rows = -1;
  if (state.size() >= fixed &&
      state.substr(0, kStateMagic.size()) == kStateMagic) {
    std::memcpy(&stored_features, state.data() + kStateMagic.size(),
                sizeof(int64_t));
    std::memcpy(&num_rows, state.data() + kStateMagic.size() + sizeof(int64_t),
                sizeof(int64_t));
  }
  std::optional<internal::Sha256> sha =
      state.size() >= fixed ? internal::Sha256::LoadState(state.substr(fixed))
                            : std::nullopt;
  if (!sha.has_value() || stored_features != num_features || num_rows < 0) {
    return absl::DataLossError(
        absl::StrCat("the stored dataset hash state is invalid for ",
                     num_features, " features"));
  }
  return DatasetHasher(std::make_unique<internal::Sha256>(*sha), num_features,
                       num_rows);
}

void DatasetHasher::AddRows(const double* features, const double* targets,
                            int64_t num_rows) {
  const size_t row_bytes = static_cast<size_t>(num_features_) * sizeof(double);
  for (int64_t r = 0; r < num_rows; ++r) {
    sha_->Update(features + r * num_features_, row_bytes);
    sha_->Update(targets + r, sizeof(double));
  }
  num_rows_ += num_rows;
}

std::string DatasetHasher::State() const {
  std::string state(kStateMagic);
  state.append(reinterpret_cast<const char*>(&num_features_), sizeof(int64_t));
  state.append(reinterpret_cast<const char*>(&num_rows_), sizeof(int64_t));
  state.append(sha_->SaveState());
  return state;
}

std::string DatasetHasher::HexDigest(
    absl::Span<const double> class_values) const {
  internal::Sha256 sha = *sha_;
  const int64_t trailer[2] = {num_rows_,
                              static_cast<int64_t>(class_values.size())};
  sha.Update(trailer, sizeof(trailer));
  sha.Update(class_values.data(), class_values.size() * sizeof(double));
  return sha.HexDigest();
}

std::string DatasetHash(const Dataset& data) {
  DatasetHasher hasher(data.task, data.num_features);
  hasher.AddRows(data.features.data(), data.targets.data(), data.num_rows());
  return hasher.HexDigest(data.class_values);
}

}  // namespace bnn
