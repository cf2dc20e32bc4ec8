#include "bnn/data/readers.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <zlib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

#include "bnn/status.h"

namespace bnn {
namespace {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Reads a file through zlib, which passes plain (non-gzip) files through.
absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr)
    return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(f, gzclose);
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, n);
  if (n < 0) {
    int err = 0;
    return absl::DataLossError(absl::StrCat(path, ": ", gzerror(f, &err)));
  }
  return out;
}

bool IsBlank(absl::string_view line) {
  return absl::StripAsciiWhitespace(line).empty();
}

// Splits CSV text into records as RFC 4180 describes: fields separated by
// the delimiter, records by LF or CRLF, and a field in double quotes may hold
// the delimiter, line breaks and doubled quotes ("" for one "). Beyond the
// RFC, blanks around a field (and around its quotes) are dropped and blank
// lines are skipped, as spreadsheets and hand-written files have them.
class CsvRecordReader {
 public:
  CsvRecordReader(absl::string_view text, char delimiter)
      : text_(text), delimiter_(delimiter) {}

  // Reads the next non-blank record into *fields, reusing the storage of
  // the strings already there; false at the end of the text. An unterminated
  // quote or text between a closing quote and the next delimiter is an
  // error naming the line.
  absl::StatusOr<bool> Next(std::vector<std::string>* fields) {
    while (pos_ < text_.size()) {
      record_line_ = line_;
      size_t count = 0;
      bool quoted = false;
      bool end_of_record = false;
      while (!end_of_record) {
        if (count == fields->size()) fields->emplace_back();
        std::string& field = (*fields)[count++];
        field.clear();
        BNN_ASSIGN_OR_RETURN(quoted, ReadField(&field));
        end_of_record = pos_ >= text_.size() || text_[pos_] == '\n';
        ++pos_;  // past the delimiter or the line feed
        if (end_of_record) ++line_;
      }
      if (count == 1 && !quoted && (*fields)[0].empty()) continue;  // blank
      fields->resize(count);
      return true;
    }
    return false;
  }

  // The 1-based line on which the last record read starts.
  int line() const { return record_line_; }

 private:
  // Blanks around fields; never the delimiter (a tab-separated file keeps
  // its empty fields and the tab after a quoted field).
  bool IsSpace(char c) const {
    return c != delimiter_ && (c == ' ' || c == '\t' || c == '\r');
  }

  // Appends the field at pos_ to *field and stops at the delimiter, line
  // feed or end of text that ends it. Returns whether it was quoted.
  absl::StatusOr<bool> ReadField(std::string* field) {
    while (pos_ < text_.size() && IsSpace(text_[pos_])) ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '"') {
      const int opened_on = line_;
      ++pos_;
      while (true) {
        if (pos_ >= text_.size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "line ", opened_on, ": a quoted field is not closed"));
        }
        const char c = text_[pos_++];
        if (c == '"') {
          if (pos_ < text_.size() && text_[pos_] == '"') {
            field->push_back('"');
            ++pos_;
            continue;
          }
          break;
        }
        if (c == '\n') ++line_;
        field->push_back(c);
      }
      while (pos_ < text_.size() && IsSpace(text_[pos_])) ++pos_;
      if (pos_ < text_.size() && text_[pos_] != delimiter_ &&
          text_[pos_] != '\n') {
        return absl::InvalidArgumentError(absl::StrCat(
            "line ", line_, ": unexpected '", text_.substr(pos_, 1),
            "' after a quoted field (quotes inside a quoted "
            "field are written twice)"));
      }
      return true;
    }
    const size_t begin = pos_;
    while (pos_ < text_.size() && text_[pos_] != delimiter_ &&
           text_[pos_] != '\n') {
      ++pos_;
    }
    size_t end = pos_;
    while (end > begin && IsSpace(text_[end - 1])) --end;
    field->append(text_.data() + begin, end - begin);
    return false;
  }

  const absl::string_view text_;
  const char delimiter_;
  size_t pos_ = 0;
  int line_ = 1;
  int record_line_ = 0;
};

absl::StatusOr<std::vector<int64_t>> ReadIndexFile(const std::string& path,
                                                   int64_t limit) {
  BNN_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  std::vector<int64_t> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    for (absl::string_view tok :
         absl::StrSplit(line, absl::ByAnyChar(" \t\r,"), absl::SkipEmpty())) {
      double v;
      if (!absl::SimpleAtod(tok, &v) || v != std::floor(v) || v < 0 ||
          v >= limit) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_no, ": '", tok,
                         "' is not an index in [0, ", limit, ")"));
      }
      out.push_back(static_cast<int64_t>(v));
    }
  }
  return out;
}

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Parses an IDX header of unsigned bytes: returns the dims.
absl::StatusOr<std::vector<uint32_t>> IdxDims(absl::string_view data,
                                              absl::string_view path) {
  if (data.size() < 4) {
    return absl::DataLossError(absl::StrCat(path, ": too short for IDX"));
  }
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  if (p[0] != 0 || p[1] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not an IDX file (bad magic)"));
  }
  if (p[2] != 0x08) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": IDX element type 0x", absl::Hex(p[2]),
                     " is not supported (only unsigned byte, 0x08)"));
  }
  const int rank = p[3];
  if (rank < 1 || data.size() < 4 + 4 * static_cast<size_t>(rank)) {
    return absl::DataLossError(absl::StrCat(path, ": truncated IDX header"));
  }
  const size_t payload = data.size() - 4 - 4 * static_cast<size_t>(rank);
  std::vector<uint32_t> dims(rank);
  uint64_t total = 1;
  bool overflow = false;
  for (int i = 0; i < rank; ++i) {
    dims[i] = BigEndian32(p + 4 + 4 * i);
    if (dims[i] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": IDX dimension ", i, " is 0; the file holds no data"));
    }
    overflow = overflow || __builtin_mul_overflow(total, dims[i], &total);
  }
  if (overflow || payload != total) {
    return absl::DataLossError(absl::StrCat(
        path, ": IDX payload has ", payload, " bytes; the header declares ",
        overflow ? "more than 2^64" : absl::StrCat(total)));
  }
  return dims;
}

// ParseIdx with the names errors give the two files; `labels_name` empty:
// no labels.
absl::StatusOr<Dataset> ParseIdxFiles(absl::string_view images,
                                      absl::string_view images_name,
                                      absl::string_view labels,
                                      absl::string_view labels_name,
                                      const IdxOptions& options) {
  BNN_ASSIGN_OR_RETURN(std::vector<uint32_t> dims,
                       IdxDims(images, images_name));
  if (dims.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_name, ": image file must have rank >= 2, has ", dims.size()));
  }
  Dataset data;
  const int64_t n = dims[0];
  int64_t p = 1;
  for (size_t i = 1; i < dims.size(); ++i) p *= dims[i];
  data.num_features = p;
  data.features.resize(n * p);
  const auto* pixels = reinterpret_cast<const unsigned char*>(images.data()) +
                       4 + 4 * dims.size();
  for (int64_t i = 0; i < n * p; ++i) {
    data.features[i] = pixels[i] * options.scale;
  }
  data.targets.assign(n, 0.0);
  if (!labels_name.empty()) {
    BNN_ASSIGN_OR_RETURN(std::vector<uint32_t> ldims,
                         IdxDims(labels, labels_name));
    if (ldims.size() != 1 || ldims[0] != dims[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          labels_name, ": expected a rank-1 label file with ", n, " entries"));
    }
    // IDX labels are class indices already; keep them (no compaction) so
    // that a split missing a class still uses the same indices.
    const auto* l = reinterpret_cast<const unsigned char*>(labels.data()) + 8;
    int max_label = 0;
    for (int64_t i = 0; i < n; ++i) {
      data.targets[i] = l[i];
      max_label = std::max<int>(max_label, l[i]);
    }
    data.num_classes = std::max(2, max_label + 1);
    data.task = data.num_classes == 2 ? Task::kBinary : Task::kMulticlass;
    for (int c = 0; c < data.num_classes; ++c) data.class_values.push_back(c);
  }
  return data;
}

}  // namespace

absl::StatusOr<Dataset> ParseCsv(absl::string_view text,
                                 const CsvOptions& options) {
  // A UTF-8 byte-order mark (spreadsheet exports) is not part of the header.
  if (absl::StartsWith(text, "\xEF\xBB\xBF")) text.remove_prefix(3);
  CsvRecordReader reader(text, options.delimiter);
  std::vector<std::string> header;
  BNN_ASSIGN_OR_RETURN(const bool has_header, reader.Next(&header));
  if (!has_header) {
    return absl::InvalidArgumentError("CSV is empty: no header line");
  }
  const int header_line = reader.line();
  const int num_columns = static_cast<int>(header.size());
  const bool has_target = !options.target_column.empty();
  if (!has_target && options.classification) {
    return absl::InvalidArgumentError(
        "classification needs a target column for its labels");
  }
  int target = -1;
  for (int j = 0; j < num_columns; ++j) {
    if (has_target && header[j] == options.target_column) target = j;
  }
  if (has_target && target < 0) {
    int index;
    if (absl::SimpleAtoi(options.target_column, &index) && index >= 0 &&
        index < num_columns) {
      target = index;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "target column '", options.target_column,
          "' is neither a header name nor an index in [0, ", num_columns, ")"));
    }
  }
  if (num_columns < (has_target ? 2 : 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", header_line, ": the header has ", num_columns,
                     " column; need a target and at least one feature"));
  }

  Dataset data;
  data.num_features = has_target ? num_columns - 1 : num_columns;
  if (has_target) data.target_name = header[target];
  for (int j = 0; j < num_columns; ++j) {
    if (j != target) data.feature_names.push_back(header[j]);
  }
  std::vector<std::string> fields;
  while (true) {
    BNN_ASSIGN_OR_RETURN(const bool more, reader.Next(&fields));
    if (!more) break;
    const int num_fields = static_cast<int>(fields.size());
    if (num_fields != num_columns) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", reader.line(), " has ",
                       num_fields > num_columns ? "more than " : "",
                       num_fields > num_columns ? num_columns : num_fields,
                       " fields; the header has ", num_columns));
    }
    for (int column = 0; column < num_columns; ++column) {
      double v;
      const std::string& f = fields[column];
      if (!absl::SimpleAtod(f, &v) || !std::isfinite(v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "line ", reader.line(), ", column ", column + 1, " ('",
            header[column], "'): '", f, "' is not a finite number"));
      }
      if (column == target) {
        data.targets.push_back(v);
      } else {
        data.features.push_back(v);
      }
    }
    if (!has_target) data.targets.push_back(0.0);
  }
  if (data.num_rows() == 0) {
    return absl::InvalidArgumentError("CSV has a header but no data rows");
  }
  if (options.classification) {
    BNN_RETURN_IF_ERROR(EncodeClassLabels(&data));
  }
  return data;
}

absl::StatusOr<Dataset> ReadCsv(const std::string& path,
                                const CsvOptions& options) {
  BNN_ASSIGN_OR_RETURN(std::string text, ReadMaybeGzip(path));
  absl::StatusOr<Dataset> data = ParseCsv(text, options);
  if (!data.ok()) {
    return absl::Status(data.status().code(),
                        absl::StrCat(path, ": ", data.status().message()));
  }
  return data;
}

absl::StatusOr<UciDataset> ReadUciDataset(const std::string& dir) {
  UciDataset out;
  BNN_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(dir + "/data.txt"));
  std::vector<std::vector<double>> rows;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (IsBlank(line)) continue;
    std::vector<double> row;
    int column = 0;
    for (absl::string_view tok :
         absl::StrSplit(line, absl::ByAnyChar(" \t\r,"), absl::SkipEmpty())) {
      ++column;
      double v;
      if (!absl::SimpleAtod(tok, &v) || !std::isfinite(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat(dir, "/data.txt: line ", line_no, ", column ", column,
                         ": '", tok, "' is not a finite number"));
      }
      row.push_back(v);
    }
    if (!rows.empty() && row.size() != rows[0].size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, "/data.txt: line ", line_no, " has ", row.size(),
                       " columns; line 1 has ", rows[0].size()));
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, "/data.txt is empty"));
  }
  const int64_t num_columns = rows[0].size();
  BNN_ASSIGN_OR_RETURN(std::vector<int64_t> feature_cols,
                       ReadIndexFile(dir + "/index_features.txt", num_columns));
  BNN_ASSIGN_OR_RETURN(std::vector<int64_t> target_cols,
                       ReadIndexFile(dir + "/index_target.txt", num_columns));
  if (target_cols.size() != 1 || feature_cols.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": need exactly one target index and at least one feature index"));
  }
  out.all.num_features = static_cast<int64_t>(feature_cols.size());
  out.all.features.reserve(rows.size() * feature_cols.size());
  for (const auto& row : rows) {
    for (int64_t c : feature_cols) out.all.features.push_back(row[c]);
    out.all.targets.push_back(row[target_cols[0]]);
  }

  BNN_ASSIGN_OR_RETURN(std::string n_splits_text,
                       ReadWholeFile(dir + "/n_splits.txt"));
  int n_splits;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(n_splits_text), &n_splits) ||
      n_splits < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, "/n_splits.txt: not a positive integer"));
  }
  if (auto hidden = ReadWholeFile(dir + "/n_hidden.txt"); hidden.ok()) {
    int n;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(*hidden), &n) && n > 0) {
      out.n_hidden = n;
    }
  }
  const int64_t n = out.all.num_rows();
  for (int k = 0; k < n_splits; ++k) {
    BNN_ASSIGN_OR_RETURN(
        std::vector<int64_t> train,
        ReadIndexFile(absl::StrCat(dir, "/index_train_", k, ".txt"), n));
    BNN_ASSIGN_OR_RETURN(
        std::vector<int64_t> test,
        ReadIndexFile(absl::StrCat(dir, "/index_test_", k, ".txt"), n));
    if (train.empty() || test.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": split ", k, " has an empty train or test set"));
    }
    out.train_indices.push_back(std::move(train));
    out.test_indices.push_back(std::move(test));
  }
  return out;
}

absl::StatusOr<Dataset> ReadIdx(const std::string& images_path,
                                const std::string& labels_path,
                                const IdxOptions& options) {
  BNN_ASSIGN_OR_RETURN(std::string images, ReadMaybeGzip(images_path));
  std::string labels;
  if (!labels_path.empty()) {
    BNN_ASSIGN_OR_RETURN(labels, ReadMaybeGzip(labels_path));
  }
  return ParseIdxFiles(images, images_path, labels, labels_path, options);
}

absl::StatusOr<Dataset> ParseIdx(absl::string_view images,
                                 absl::string_view labels,
                                 const IdxOptions& options) {
  return ParseIdxFiles(images, "images", labels, labels.empty() ? "" : "labels",
                       options);
}

}  // namespace bnn
