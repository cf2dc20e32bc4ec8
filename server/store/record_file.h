// Durable files for the embedded store: atomic replacement and a checksummed
// frame around protobuf payloads.
//
// Frame (little-endian), the layout of bnn snapshots (bnn/io/snapshot.h):
//   magic (8 bytes) | format_version u32 | payload_size u64 | payload |
//   CRC32C(payload) u32
#ifndef BNN_SERVER_STORE_RECORD_FILE_H_
#define BNN_SERVER_STORE_RECORD_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

namespace bnn::server {

struct RecordFormat {
  // Exactly 8 bytes, distinct per record kind.
  absl::string_view magic;
  // Written into new files; files with a newer version are rejected.
  uint32_t version = 1;
};

std::string EncodeRecord(const RecordFormat& format, absl::string_view payload);

// The payload inside `bytes`. DataLoss on a wrong magic, truncation, trailing
// bytes or a checksum mismatch; FailedPrecondition on a newer version.
absl::StatusOr<absl::string_view> DecodeRecord(const RecordFormat& format,
                                               absl::string_view bytes);

// Replaces `path` with `contents` so that a crash leaves either the old or
// the new file: write a temporary sibling, fsync it, rename it over `path`,
// fsync the directory.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents);

// Fsyncs directory `dir` (makes renames and unlinks in it durable).
absl::Status SyncDirectory(const std::string& dir);

// NotFound if `path` does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// A whole file mapped read-only into memory, unmapped on destruction. Store
// files are replaced by rename and never modified in place, so a mapping
// keeps seeing the same bytes even after its file is replaced or deleted;
// only the pages being read occupy memory (the page cache), which lets large
// files be streamed without a copy.
class MappedFile {
 public:
  // NotFound if `path` does not exist.
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  absl::string_view bytes() const { return {data_, size_}; }

 private:
  MappedFile(const char* data, size_t size) : data_(data), size_(size) {}

  // nullptr for an empty file (nothing to map).
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// Deletes `path`; a file that is already gone is not an error.
absl::Status RemoveFile(const std::string& path);

// Opens a store directory: creates `dir` if missing, deletes temporaries
// left by a crash in WriteFileAtomically, and returns the stems of the files
// "<stem><extension>", sorted.
absl::StatusOr<std::vector<std::string>> ScanRecordStems(
    const std::string& dir, absl::string_view extension);

// ScanRecordStems, keeping the stems that are ids of the form
// IsId(id_prefix, id).
absl::StatusOr<std::vector<std::string>> ScanRecordDir(
    const std::string& dir, absl::string_view id_prefix,
    absl::string_view extension);

// Suffix of the temporaries of WriteFileAtomically; leftovers of a crash are
// deleted when a store opens.
inline constexpr absl::string_view kTempSuffix = ".tmp";

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_RECORD_FILE_H_
