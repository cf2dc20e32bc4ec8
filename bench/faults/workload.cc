#include "bench/faults/workload.h"

#include <algorithm>
#include <openssl/sha.h>
#include <random>

#include <absl/strings/escaping.h>
#include <absl/strings/str_cat.h>

namespace bnn::faults {
namespace {

constexpr int kFingerprintRows = 3;
constexpr int kFingerprintSamples = 8;
constexpr uint64_t kFingerprintSeed = 20261124;

}  // namespace

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kUpload:
      return "upload";
    case OpKind::kAppend:
      return "append";
    case OpKind::kImport:
      return "import";
    case OpKind::kTrain:
      return "train";
    case OpKind::kModel:
      return "model";
  }
  return "unknown";
}

Rows MakeRows(uint64_t seed, int64_t num_rows, int64_t num_features,
              const std::vector<double>& class_labels) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-2.0, 2.0);
  std::normal_distribution<double> noise(0.0, 0.3);
  Rows rows;
  rows.num_features = num_features;
  rows.features.resize(num_rows * num_features);
  rows.labels.resize(num_rows);
  for (int64_t i = 0; i < num_rows; ++i) {
    double sum = 0.0;
    for (int64_t f = 0; f < num_features; ++f) {
      const double x = uniform(rng);
      rows.features[i * num_features + f] = x;
      sum += x;
    }
    if (class_labels.empty()) {
      rows.labels[i] = sum + noise(rng);
    } else if (i < static_cast<int64_t>(class_labels.size())) {
      rows.labels[i] = class_labels[i];
    } else {
      rows.labels[i] = class_labels[rng() % class_labels.size()];
    }
  }
  return rows;
}

Schema SchemaOf(const Rows& rows, bool classification) {
  Schema schema;
  schema.num_features = rows.num_features;
  if (!classification) return schema;
  schema.class_values = rows.labels;
  std::sort(schema.class_values.begin(), schema.class_values.end());
  schema.class_values.erase(
      std::unique(schema.class_values.begin(), schema.class_values.end()),
      schema.class_values.end());
  schema.task =
      schema.class_values.size() == 2 ? Task::kBinary : Task::kMulticlass;
  return schema;
}

void HashRows(const Schema& schema, const Rows& rows, DatasetHasher* hasher) {
  if (!IsClassification(schema.task)) {
    hasher->AddRows(rows.features.data(), rows.labels.data(), rows.num_rows());
    return;
  }
  std::vector<double> indices(rows.labels.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    const auto it = std::lower_bound(schema.class_values.begin(),
                                     schema.class_values.end(), rows.labels[i]);
    indices[i] = static_cast<double>(it - schema.class_values.begin());
  }
  hasher->AddRows(rows.features.data(), indices.data(), rows.num_rows());
}

std::string Sha256Hex(absl::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
         digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

absl::StatusOr<std::vector<double>> PredictFingerprint(
    client::BnnClient& client, const std::string& snapshot_id,
    int64_t num_features) {
  std::vector<double> features(kFingerprintRows * num_features);
  for (size_t i = 0; i < features.size(); ++i) {
    features[i] = 0.37 * static_cast<double>(i % 7) - 1.1;
  }
  absl::StatusOr<v1::PredictResponse> response =
      client.Predict(snapshot_id, features, num_features, kFingerprintSamples,
                     kFingerprintSeed);
  if (!response.ok()) return response.status();
  std::vector<double> values;
  for (const v1::RowPrediction& row : response->predictions()) {
    if (row.probabilities_size() > 0) {
      values.insert(values.end(), row.probabilities().begin(),
                    row.probabilities().end());
    } else {
      values.push_back(row.mean());
      values.push_back(row.variance());
    }
  }
  return values;
}

}  // namespace bnn::faults
