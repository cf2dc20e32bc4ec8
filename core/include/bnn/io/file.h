// Durable files: atomic replacement (temporary, fsync, rename, fsync of the
// directory), whole-file reads and read-only mappings. Shared by snapshots
// (bnn/io/snapshot.h) and the server's store through bnn/io/record.h.
#ifndef BNN_IO_FILE_H_
#define BNN_IO_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace bnn {

// Suffix of the temporaries of WriteFileAtomically; a directory's leftovers
// of a crash can be recognised (and deleted) by it.
inline constexpr absl::string_view kTempSuffix = ".tmp";

// Errors of the functions below name the file and the failed call: Internal,
// or ResourceExhausted when the file system is full (ENOSPC, EDQUOT, EFBIG).
// A temporary is deleted on every failure.

// Replaces `path` with `contents` so that a crash leaves either the old or
// the new file: write `path` + kTempSuffix, fsync it, rename it over `path`,
// fsync the directory (a FileWriter written at once).
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents);

// A file written piece by piece under a temporary name and renamed into
// place by Commit, with the guarantees of WriteFileAtomically, for contents
// too large to hold in memory (streamed uploads). Destroying an uncommitted
// writer deletes the temporary; the temporary's name should end in
// kTempSuffix so that a crash's leftover is recognised. Not thread-safe.
class FileWriter {
 public:
  // Creates (or truncates) `temp_path`.
  static absl::StatusOr<std::unique_ptr<FileWriter>> Create(
      std::string temp_path);
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  // Appends at the end.
  absl::Status Append(absl::string_view bytes);
  // Overwrites bytes already written, [offset, offset + bytes.size()).
  absl::Status WriteAt(uint64_t offset, absl::string_view bytes);
  // Reads back `size` written bytes from `offset` into `out`.
  absl::Status ReadAt(uint64_t offset, size_t size, char* out) const;
  uint64_t size() const { return size_; }
  const std::string& temp_path() const { return temp_path_; }

  // Fsyncs the file, renames it over `path` and fsyncs the directory. On
  // failure the temporary is deleted. Call at most once, last.
  absl::Status Commit(const std::string& path);

 private:
  FileWriter(std::string temp_path, int fd)
      : temp_path_(std::move(temp_path)), fd_(fd) {}

  const std::string temp_path_;
  int fd_;  // -1 once committed or failed
  uint64_t size_ = 0;
};

// Fsyncs directory `dir` (makes renames and unlinks in it durable).
absl::Status SyncDirectory(const std::string& dir);

// The whole file. NotFound if `path` does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Deletes `path`; a file that is already gone is not an error.
absl::Status RemoveFile(const std::string& path);

// A whole file mapped read-only into memory, unmapped on destruction. Files
// written by WriteFileAtomically are replaced by rename and never modified in
// place, so a mapping keeps seeing the same bytes even after its file is
// replaced or deleted; only the pages being read occupy memory (the page
// cache), which lets large files be streamed without a copy.
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

}  // namespace bnn

#endif  // BNN_IO_FILE_H_
