#include "server/store/dataset_file.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

#include <absl/base/config.h>
#include <absl/strings/str_cat.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "bnn/io/file.h"
#include "bnn/io/record.h"
#include "bnn/status.h"

namespace bnn::server {
namespace {

// Rows are read straight out of the packed doubles of the protobuf payload,
// which are little-endian on the wire.
static_assert(ABSL_IS_LITTLE_ENDIAN, "in-place row reads need little-endian");

constexpr RecordFormat kDatasetFormat{"BNNDSET1", 1, "dataset file"};

// Rows in a version file: those of the version minus those before it.
int64_t RowsInFile(const store::DatasetMeta& meta) {
  return meta.num_rows() - meta.first_row();
}

// A problem with the contents of `path`, naming it: FailedPrecondition for
// a file from a newer server, otherwise DataLoss (the store wrote every file
// valid).
absl::Status DatasetFileError(const std::string& path,
                              const absl::Status& status) {
  return absl::Status(absl::IsFailedPrecondition(status)
                          ? absl::StatusCode::kFailedPrecondition
                          : absl::StatusCode::kDataLoss,
                      absl::StrCat(path, ": ", status.message()));
}

absl::Status CheckRowRange(const store::DatasetMeta& meta) {
  if (meta.first_row() < 0 || meta.first_row() >= meta.num_rows()) {
    return absl::DataLossError(absl::StrCat("first_row ", meta.first_row(),
                                            " is outside the version's ",
                                            meta.num_rows(), " rows"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Dataset> RowsFromFile(const store::DatasetFile& file) {
  const store::DatasetMeta& meta = file.meta();
  BNN_RETURN_IF_ERROR(CheckRowRange(meta));
  BNN_ASSIGN_OR_RETURN(Dataset data, DatasetSchema(meta));
  data.features.assign(file.features().begin(), file.features().end());
  data.targets.assign(file.targets().begin(), file.targets().end());
  if (data.num_rows() != RowsInFile(meta)) {
    return absl::DataLossError(absl::StrCat("the file holds ", data.num_rows(),
                                            " rows; its metadata says ",
                                            RowsInFile(meta)));
  }
  BNN_RETURN_IF_ERROR(data.Validate());
  return data;
}

absl::StatusOr<DatasetFileContents> ParseDatasetFile(absl::string_view bytes) {
  store::DatasetFile file;
  BNN_RETURN_IF_ERROR(
      DecodeRecordMessage(kDatasetFormat, bytes, &file).status());
  BNN_ASSIGN_OR_RETURN(Dataset rows, RowsFromFile(file));
  return DatasetFileContents{std::move(*file.mutable_meta()), std::move(rows)};
}

// A verified version file mapped into memory, with where its feature values
// lie in the mapping.
class MappedDatasetFile {
 public:
  static absl::StatusOr<MappedDatasetFile> Open(const std::string& path) {
    BNN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
    MappedDatasetFile mapped(std::move(file));
    if (absl::Status status = mapped.Index(); !status.ok()) {
      return DatasetFileError(path, status);
    }
    return mapped;
  }

  const store::DatasetMeta& meta() const { return meta_; }
  int64_t num_values() const { return num_values_; }

  // Copies feature values [first, first + count) of this file (row-major)
  // to `out`.
  void CopyValues(int64_t first, int64_t count, double* out) const {
    // The run holding `first`: the last one starting at or before it.
    auto run = std::upper_bound(runs_.begin(), runs_.end(), first,
                                [](int64_t value, const Run& r) {
                                  return value < r.first;
                                }) -
               1;
    while (count > 0) {
      const int64_t skip = first - run->first;
      const int64_t n = std::min(count, run->count - skip);
      std::memcpy(out, file_.bytes().data() + run->offset + skip * 8, n * 8);
      out += n;
      first += n;
      count -= n;
      ++run;
    }
  }

 private:
  // A packed (or single) stretch of feature values in the mapping.
  struct Run {
    size_t offset;  // of its first byte in the file
    int64_t first;  // index of its first value in the file's features
    int64_t count;
  };

  explicit MappedDatasetFile(MappedFile file) : file_(std::move(file)) {}

  // Verifies the frame, then walks the payload's top-level fields: parses
  // the metadata and records the feature runs without decoding them. The
  // writer emits one packed run, but any valid encoding is accepted.
  absl::Status Index() {
    BNN_ASSIGN_OR_RETURN(const DecodedRecord record,
                         DecodeRecord(kDatasetFormat, file_.bytes()));
    const absl::string_view payload = record.payload;
    if (payload.size() > static_cast<size_t>(INT_MAX)) {
      return absl::DataLossError("dataset payload exceeds 2 GiB");
    }
    const size_t base = payload.data() - file_.bytes().data();
    google::protobuf::io::CodedInputStream in(
        reinterpret_cast<const uint8_t*>(payload.data()),
        static_cast<int>(payload.size()));
    const absl::Status unparseable =
        absl::DataLossError("unparseable dataset payload");
    while (const uint32_t tag = in.ReadTag()) {
      const uint32_t field = tag >> 3;
      const bool features = field == store::DatasetFile::kFeaturesFieldNumber;
      switch (tag & 7) {
        case 0: {  // varint
          uint64_t ignored;
          if (!in.ReadVarint64(&ignored)) return unparseable;
          break;
        }
        case 1:  // 64-bit: an unpacked feature value
          if (features) AddRun(base + in.CurrentPosition(), 1);
          if (!in.Skip(8)) return unparseable;
          break;
        case 2: {  // length-delimited
          int length = 0;
          if (!in.ReadVarintSizeAsInt(&length)) return unparseable;
          const int position = in.CurrentPosition();
          if (!in.Skip(length)) return unparseable;
          if (field == store::DatasetFile::kMetaFieldNumber) {
            if (!meta_.MergeFromString(
                    std::string(payload.substr(position, length)))) {
              return unparseable;
            }
          } else if (features) {
            if (length % 8 != 0) return unparseable;
            AddRun(base + position, length / 8);
          }
          break;
        }
        case 5:  // 32-bit
          if (!in.Skip(4)) return unparseable;
          break;
        default:  // groups are not used by this message
          return unparseable;
      }
    }
    if (!in.ConsumedEntireMessage()) return unparseable;
    return CheckRowRange(meta_);
  }

  void AddRun(size_t offset, int64_t count) {
    runs_.push_back({offset, num_values_, count});
    num_values_ += count;
  }

  MappedFile file_;
  store::DatasetMeta meta_;
  std::vector<Run> runs_;
  int64_t num_values_ = 0;
};

// The rows of versions 1..N, file after file.
class StoredRowsPool final : public PoolSource {
 public:
  StoredRowsPool(std::vector<MappedDatasetFile> files, int64_t num_features,
                 int64_t num_rows)
      : files_(std::move(files)),
        num_features_(num_features),
        num_rows_(num_rows) {}

  int64_t num_rows() const override { return num_rows_; }
  int64_t num_features() const override { return num_features_; }

  absl::Status Read(int64_t begin, int64_t count,
                    std::vector<double>* out) const override {
    if (begin < 0 || count < 0 || begin + count > num_rows_) {
      return absl::OutOfRangeError(absl::StrCat(
          "pool rows [", begin, ", ", begin + count, ") exceed ", num_rows_));
    }
    out->resize(count * num_features_);
    double* next = out->data();
    const int64_t end = begin + count;
    for (const MappedDatasetFile& file : files_) {
      const int64_t file_begin = file.meta().first_row();
      const int64_t file_end = file.meta().num_rows();
      const int64_t from = std::max(begin, file_begin);
      const int64_t to = std::min(end, file_end);
      if (from >= to) continue;
      const int64_t values = (to - from) * num_features_;
      file.CopyValues((from - file_begin) * num_features_, values, next);
      next += values;
    }
    return absl::OkStatus();
  }

 private:
  const std::vector<MappedDatasetFile> files_;
  const int64_t num_features_;
  const int64_t num_rows_;
};

}  // namespace

absl::StatusOr<Dataset> DatasetSchema(const store::DatasetMeta& meta) {
  Dataset data;
  absl::StatusOr<Task> task = StringToTask(meta.task());
  if (!task.ok()) return absl::DataLossError(task.status().message());
  data.task = *task;
  data.num_features = meta.num_features();
  data.num_classes = meta.num_classes();
  data.class_values.assign(meta.class_values().begin(),
                           meta.class_values().end());
  data.feature_names.assign(meta.feature_names().begin(),
                            meta.feature_names().end());
  data.target_name = meta.target_name();
  return data;
}

absl::StatusOr<std::unique_ptr<DatasetFileWriter>> DatasetFileWriter::Create(
    std::string temp_path, int64_t num_features) {
  BNN_ASSIGN_OR_RETURN(
      std::unique_ptr<RecordWriter> record,
      RecordWriter::Create(kDatasetFormat, std::move(temp_path)));
  return std::unique_ptr<DatasetFileWriter>(
      new DatasetFileWriter(std::move(record), num_features));
}

absl::StatusOr<uint64_t> DatasetFileWriter::AppendPacked(
    int field, absl::Span<const double> values) {
  // Tag (wire type 2, length-delimited) and length, as varints.
  std::string prefix;
  const auto put_varint = [&prefix](uint64_t v) {
    while (v >= 0x80) {
      prefix.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    prefix.push_back(static_cast<char>(v));
  };
  put_varint((static_cast<uint64_t>(field) << 3) | 2);
  put_varint(values.size() * sizeof(double));
  BNN_RETURN_IF_ERROR(record_->Append(prefix));
  const uint64_t offset = record_->payload_size();
  BNN_RETURN_IF_ERROR(record_->Append(
      absl::string_view(reinterpret_cast<const char*>(values.data()),
                        values.size() * sizeof(double))));
  return offset;
}

absl::Status DatasetFileWriter::AddRows(absl::Span<const double> features,
                                        absl::Span<const double> targets) {
  if (features.size() != targets.size() * num_features_) {
    return absl::InvalidArgumentError(
        absl::StrCat(features.size(), " feature values for ", targets.size(),
                     " rows of ", num_features_, " features"));
  }
  const int64_t run_rows =
      std::max<int64_t>(1, kRunBytes / (num_features_ * 8));
  for (int64_t first = 0; first < static_cast<int64_t>(targets.size());
       first += run_rows) {
    const int64_t rows = std::min<int64_t>(
        run_rows, static_cast<int64_t>(targets.size()) - first);
    Run run;
    run.num_rows = rows;
    BNN_ASSIGN_OR_RETURN(run.features_offset,
                         AppendPacked(store::DatasetFile::kFeaturesFieldNumber,
                                      features.subspan(first * num_features_,
                                                       rows * num_features_)));
    BNN_ASSIGN_OR_RETURN(run.targets_offset,
                         AppendPacked(store::DatasetFile::kTargetsFieldNumber,
                                      targets.subspan(first, rows)));
    runs_.push_back(run);
    num_rows_ += rows;
  }
  return absl::OkStatus();
}

absl::Status DatasetFileWriter::ForEachBlock(
    absl::FunctionRef<absl::Status(absl::Span<const double> features,
                                   absl::Span<double> targets)>
        visit,
    bool write_back) {
  std::vector<double> features;
  std::vector<double> targets;
  for (const Run& run : runs_) {
    features.resize(run.num_rows * num_features_);
    targets.resize(run.num_rows);
    BNN_RETURN_IF_ERROR(
        record_->Read(run.features_offset, features.size() * sizeof(double),
                      reinterpret_cast<char*>(features.data())));
    BNN_RETURN_IF_ERROR(record_->Read(run.targets_offset,
                                      targets.size() * sizeof(double),
                                      reinterpret_cast<char*>(targets.data())));
    BNN_RETURN_IF_ERROR(visit(features, absl::MakeSpan(targets)));
    if (write_back) {
      BNN_RETURN_IF_ERROR(record_->Overwrite(
          run.targets_offset,
          absl::string_view(reinterpret_cast<const char*>(targets.data()),
                            targets.size() * sizeof(double))));
    }
  }
  return absl::OkStatus();
}

absl::Status DatasetFileWriter::Commit(const store::DatasetMeta& meta,
                                       const std::string& path) {
  if (RowsInFile(meta) != num_rows_) {
    return absl::InternalError(absl::StrCat("dataset file metadata spans ",
                                            RowsInFile(meta), " rows; ",
                                            num_rows_, " were written"));
  }
  std::string field;
  {
    google::protobuf::io::StringOutputStream out(&field);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.WriteTag((store::DatasetFile::kMetaFieldNumber << 3) | 2);
    coded.WriteVarint64(meta.ByteSizeLong());
  }
  field.append(meta.SerializeAsString());
  // Protobuf parses payloads below 2 GiB only.
  if (record_->payload_size() + field.size() >=
      static_cast<uint64_t>(INT_MAX)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("dataset file of ", record_->payload_size() + field.size(),
                     " bytes exceeds the 2 GiB limit of a record"));
  }
  BNN_RETURN_IF_ERROR(record_->Append(field));
  return record_->Commit(path);
}

absl::StatusOr<DatasetFileContents> ReadDatasetFile(const std::string& path) {
  BNN_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  absl::StatusOr<DatasetFileContents> parsed = ParseDatasetFile(bytes);
  if (!parsed.ok()) return DatasetFileError(path, parsed.status());
  return parsed;
}

absl::StatusOr<std::unique_ptr<PoolSource>> OpenDatasetRows(
    const std::vector<std::string>& paths, int64_t num_features,
    int64_t num_rows) {
  std::vector<MappedDatasetFile> files;
  int64_t rows_so_far = 0;
  for (const std::string& path : paths) {
    BNN_ASSIGN_OR_RETURN(MappedDatasetFile file, MappedDatasetFile::Open(path));
    const store::DatasetMeta& meta = file.meta();
    if (meta.num_features() != num_features ||
        meta.first_row() != rows_so_far ||
        file.num_values() != RowsInFile(meta) * num_features) {
      return DatasetFileError(
          path, absl::DataLossError(absl::StrCat(
                    "holds ", file.num_values(), " values for rows [",
                    meta.first_row(), ", ", meta.num_rows(), ") of ",
                    meta.num_features(), " features; expected rows ", "from ",
                    rows_so_far, " of ", num_features, " features")));
    }
    rows_so_far = meta.num_rows();
    files.push_back(std::move(file));
  }
  if (rows_so_far != num_rows) {
    return absl::DataLossError(absl::StrCat(
        "the dataset files hold ", rows_so_far, " rows; expected ", num_rows));
  }
  return std::make_unique<StoredRowsPool>(std::move(files), num_features,
                                          num_rows);
}

}  // namespace bnn::server
