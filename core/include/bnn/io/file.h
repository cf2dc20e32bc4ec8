// Durable files: atomic replacement (temporary, fsync, rename, fsync of the
// directory), whole-file reads and read-only mappings. Shared by snapshots
// (bnn/io/snapshot.h) and the server's store through bnn/io/record.h.
#ifndef BNN_IO_FILE_H_
#define BNN_IO_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace bnn {

// Suffix of the temporaries of WriteFileAtomically; a directory's leftovers
// of a crash can be recognised (and deleted) by it.
inline constexpr absl::string_view kTempSuffix = ".tmp";

// Replaces `path` with `contents` so that a crash leaves either the old or
// the new file: write `path` + kTempSuffix, fsync it, rename it over `path`,
// fsync the directory. Internal naming the file and the failed call.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents);

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
