#include "server/store/record_dir.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/strip.h>

#include "bnn/io/file.h"
#include "bnn/status.h"

#include "server/store/ids.h"

namespace bnn::server {

absl::StatusOr<std::vector<std::string>> ScanRecordDir(
    const std::string& dir, absl::string_view id_prefix,
    absl::string_view extension) {
  BNN_ASSIGN_OR_RETURN(std::vector<std::string> ids,
                       ScanRecordStems(dir, extension));
  ids.erase(std::remove_if(ids.begin(), ids.end(),
                           [&](const std::string& stem) {
                             return !IsId(id_prefix, stem);
                           }),
            ids.end());
  return ids;
}

absl::StatusOr<std::vector<std::string>> ScanRecordStems(
    const std::string& dir, absl::string_view extension) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create directory ", dir, ": ", error.message()));
  }
  std::vector<std::string> stems;
  for (fs::directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (absl::EndsWith(name, kTempSuffix)) {
      fs::remove(it->path(), error);
      if (error) break;
      continue;
    }
    absl::string_view stem = name;
    if (absl::ConsumeSuffix(&stem, extension)) stems.emplace_back(stem);
  }
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot scan directory ", dir, ": ", error.message()));
  }
  std::sort(stems.begin(), stems.end());
  return stems;
}

absl::Status CreateDirectoryDurably(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path path = fs::path(dir).lexically_normal();
  std::error_code error;
  if (fs::is_directory(path, error)) return absl::OkStatus();
  const fs::path parent =
      path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (path.has_parent_path() && path.parent_path() != path) {
    BNN_RETURN_IF_ERROR(CreateDirectoryDurably(parent.string()));
  }
  if (!fs::create_directory(path, error) && error) {
    return absl::InternalError(absl::StrCat(
        "cannot create directory ", path.string(), ": ", error.message()));
  }
  return SyncDirectory(parent.empty() ? "." : parent.string());
}

}  // namespace bnn::server
