// Directories of record files (bnn/io/record.h, written with
// bnn::WriteFileAtomically): the checkpoints of jobs, and the record-file
// layout of older servers that the migration (metadata_dir.h) reads.
#ifndef BNN_SERVER_STORE_RECORD_DIR_H_
#define BNN_SERVER_STORE_RECORD_DIR_H_

#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

namespace bnn::server {

// Opens a store directory: creates `dir` if missing, deletes temporaries
// left by a crash in bnn::WriteFileAtomically (names ending in
// bnn::kTempSuffix), and returns the stems of the files
// "<stem><extension>", sorted.
absl::StatusOr<std::vector<std::string>> ScanRecordStems(
    const std::string& dir, absl::string_view extension);

// ScanRecordStems, keeping the stems that are ids of the form
// IsId(id_prefix, id).
absl::StatusOr<std::vector<std::string>> ScanRecordDir(
    const std::string& dir, absl::string_view id_prefix,
    absl::string_view extension);

// Creates `dir` and every missing parent, fsyncing each new directory's
// parent so that the creation survives a crash. Internal naming the
// directory on failure.
absl::Status CreateDirectoryDurably(const std::string& dir);

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_RECORD_DIR_H_
