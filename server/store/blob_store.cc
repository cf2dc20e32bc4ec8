#include "server/store/blob_store.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>

#include "bnn/io/sha256.h"
#include "bnn/status.h"

#include "server/store/ids.h"
#include "server/store/record_dir.h"

namespace bnn::server {
namespace {

namespace fs = std::filesystem;

constexpr size_t kBlobNameSize = 64;
constexpr size_t kPrefixSize = 2;

absl::Status FsError(absl::string_view what, const std::string& path,
                     const std::error_code& error) {
  return absl::InternalError(
      absl::StrCat("cannot ", what, " ", path, ": ", error.message()));
}

std::string QuarantinedError(const QuarantinedBlob& q) {
  return absl::StrCat("blob ", q.blob, " is quarantined (", q.reason, ") at ",
                      q.path, " and is not served");
}

}  // namespace

bool BlobStore::IsBlobName(absl::string_view blob) {
  if (blob.size() != kBlobNameSize) return false;
  for (const char c : blob) {
    if (!absl::ascii_isxdigit(c) || absl::ascii_isupper(c)) return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<BlobStore>> BlobStore::Open(
    std::string root, const Options& options, OpenReport* report) {
  OpenReport local;
  if (report == nullptr) report = &local;
  *report = OpenReport();
  std::unique_ptr<BlobStore> store(
      new BlobStore(root, root + "/objects", root + "/tmp",
                    root + "/quarantine", options.shared));
  for (const std::string* dir :
       {&store->objects_, &store->tmp_, &store->quarantine_}) {
    BNN_RETURN_IF_ERROR(CreateDirectoryDurably(*dir));
  }
  std::error_code error;
  // Temporaries of interrupted writes (in a shared store, only old ones:
  // the others may be writes of another replica).
  const fs::file_time_type old_enough =
      fs::file_time_type::clock::now() -
      std::chrono::duration_cast<fs::file_time_type::duration>(
          absl::ToChronoSeconds(kSharedTemporaryAge));
  for (fs::directory_iterator it(store->tmp_, error), end; !error && it != end;
       it.increment(error)) {
    if (options.shared) {
      std::error_code time_error;
      const fs::file_time_type written = it->last_write_time(time_error);
      if (time_error || written > old_enough) continue;
    }
    fs::remove(it->path(), error);
    if (error) return FsError("delete", it->path().string(), error);
    ++report->temporaries_removed;
  }
  if (error) return FsError("scan", store->tmp_, error);
  if (report->temporaries_removed > 0) {
    BNN_RETURN_IF_ERROR(SyncDirectory(store->tmp_));
  }
  // Blobs quarantined earlier stay refused.
  for (fs::directory_iterator it(store->quarantine_, error), end;
       !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    // A blob stored again after its quarantine is served from objects/.
    std::error_code exists_error;
    if (!IsBlobName(name) ||
        fs::exists(store->ObjectPath(name), exists_error)) {
      continue;
    }
    absl::MutexLock lock(&store->mu_);
    store->quarantined_[name] = {name, it->path().string(),
                                 "it failed its check at an earlier start"};
  }
  if (error) return FsError("scan", store->quarantine_, error);

  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> blobs, store->List());
  for (const std::string& blob : blobs) {
    std::error_code size_error;
    const uintmax_t size = fs::file_size(store->ObjectPath(blob), size_error);
    if (!size_error) {
      ++report->blobs;
      report->bytes += static_cast<int64_t>(size);
    }
  }
  if (options.verify_on_open) {
    BNN_ASSIGN_OR_RETURN(report->quarantined, store->Verify());
    report->blobs -= static_cast<int64_t>(report->quarantined.size());
  }
  return store;
}

std::string BlobStore::ObjectPath(absl::string_view blob) const {
  return absl::StrCat(objects_, "/", blob.substr(0, kPrefixSize), "/", blob);
}

absl::Status BlobStore::CreateObjectDir(absl::string_view blob) const {
  return CreateDirectoryDurably(
      absl::StrCat(objects_, "/", blob.substr(0, kPrefixSize)));
}

absl::StatusOr<std::unique_ptr<FileWriter>> BlobStore::NewTempFile() const {
  return FileWriter::Create(NewTempPath());
}

std::string BlobStore::NewTempPath() const {
  return absl::StrCat(tmp_, "/", NewId("blob"), kTempSuffix);
}

absl::StatusOr<std::string> BlobStore::Put(absl::string_view contents) {
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<FileWriter> file, NewTempFile());
  BNN_RETURN_IF_ERROR(file->Append(contents));
  return Commit(std::move(file));
}

absl::StatusOr<std::string> BlobStore::Commit(
    std::unique_ptr<FileWriter> file) {
  std::string blob;
  {
    BNN_ASSIGN_OR_RETURN(const MappedFile mapped,
                         MappedFile::Open(file->temp_path()));
    blob = Sha256Hex(mapped.bytes());
  }
  {
    absl::MutexLock lock(&mu_);
    if (quarantined_.contains(blob)) {
      // The same bytes again: store them, and serve them from now on.
      quarantined_.erase(blob);
    }
  }
  std::error_code error;
  if (fs::exists(ObjectPath(blob), error)) return blob;  // `file` is dropped
  BNN_RETURN_IF_ERROR(CreateObjectDir(blob));
  BNN_RETURN_IF_ERROR(file->Commit(ObjectPath(blob)));
  return blob;
}

absl::StatusOr<std::string> BlobStore::Adopt(const std::string& path) {
  std::string blob;
  {
    BNN_ASSIGN_OR_RETURN(const MappedFile mapped, MappedFile::Open(path));
    blob = Sha256Hex(mapped.bytes());
  }
  {
    absl::MutexLock lock(&mu_);
    quarantined_.erase(blob);
  }
  const std::string target = ObjectPath(blob);
  std::error_code error;
  if (fs::exists(target, error)) return blob;
  BNN_RETURN_IF_ERROR(CreateObjectDir(blob));
  // A link under a temporary name renamed into place, so that a crash never
  // leaves a half-made blob under a final name (a copy is written the same
  // way by FileWriter).
  const std::string temp = absl::StrCat(tmp_, "/", NewId("blob"), kTempSuffix);
  fs::create_hard_link(path, temp, error);
  if (error) {
    BNN_ASSIGN_OR_RETURN(const std::string contents, ReadFile(path));
    BNN_ASSIGN_OR_RETURN(std::string copied, Put(contents));
    if (copied != blob) {
      return absl::DataLossError(
          absl::StrCat(path, " changed while it was stored as a blob"));
    }
    return copied;
  }
  fs::rename(temp, target, error);
  if (error) {
    fs::remove(temp, error);
    return FsError("rename into place", target, error);
  }
  BNN_RETURN_IF_ERROR(SyncDirectory(fs::path(target).parent_path().string()));
  return blob;
}

absl::Status BlobStore::CheckServable(absl::string_view blob) const {
  {
    absl::MutexLock lock(&mu_);
    const auto it = quarantined_.find(blob);
    if (it != quarantined_.end()) {
      return absl::DataLossError(QuarantinedError(it->second));
    }
  }
  std::error_code error;
  if (!IsBlobName(blob) || !fs::exists(ObjectPath(blob), error)) {
    return absl::NotFoundError(absl::StrCat("blob ", blob, " not found"));
  }
  return absl::OkStatus();
}

absl::Status BlobStore::CheckNotQuarantined(absl::string_view blob) const {
  absl::MutexLock lock(&mu_);
  const auto it = quarantined_.find(blob);
  if (it == quarantined_.end()) return absl::OkStatus();
  return absl::DataLossError(QuarantinedError(it->second));
}

absl::StatusOr<std::string> BlobStore::PathOf(absl::string_view blob) const {
  BNN_RETURN_IF_ERROR(CheckServable(blob));
  return ObjectPath(blob);
}

absl::StatusOr<MappedFile> BlobStore::Map(absl::string_view blob, Check check) {
  BNN_RETURN_IF_ERROR(CheckServable(blob));
  absl::StatusOr<MappedFile> mapped = MappedFile::Open(ObjectPath(blob));
  if (absl::IsNotFound(mapped.status())) {
    // Quarantined or swept meanwhile.
    BNN_RETURN_IF_ERROR(CheckServable(blob));
  }
  BNN_RETURN_IF_ERROR(mapped.status());
  if (check == Check::kVerify && Sha256Hex(mapped->bytes()) != blob) {
    BNN_ASSIGN_OR_RETURN(
        const QuarantinedBlob q,
        Quarantine(blob, "its SHA-256 does not match its name"));
    return absl::DataLossError(QuarantinedError(q));
  }
  return mapped;
}

absl::StatusOr<std::optional<QuarantinedBlob>> BlobStore::CheckOne(
    absl::string_view blob) {
  absl::StatusOr<MappedFile> mapped = MappedFile::Open(ObjectPath(blob));
  if (absl::IsNotFound(mapped.status())) return std::nullopt;
  BNN_RETURN_IF_ERROR(mapped.status());
  if (Sha256Hex(mapped->bytes()) == blob) return std::nullopt;
  return Quarantine(blob, "its SHA-256 does not match its name");
}

absl::StatusOr<std::vector<QuarantinedBlob>> BlobStore::Verify() {
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> blobs, List());
  std::vector<QuarantinedBlob> failed;
  for (const std::string& blob : blobs) {
    BNN_ASSIGN_OR_RETURN(std::optional<QuarantinedBlob> q, CheckOne(blob));
    if (q.has_value()) failed.push_back(*std::move(q));
  }
  return failed;
}

absl::StatusOr<QuarantinedBlob> BlobStore::Quarantine(absl::string_view blob,
                                                      std::string reason) {
  const std::string from = ObjectPath(blob);
  QuarantinedBlob q{std::string(blob), absl::StrCat(quarantine_, "/", blob),
                    std::move(reason)};
  std::error_code error;
  fs::rename(from, q.path, error);
  if (error) return FsError("quarantine", from, error);
  BNN_RETURN_IF_ERROR(SyncDirectory(quarantine_));
  BNN_RETURN_IF_ERROR(SyncDirectory(fs::path(from).parent_path().string()));
  absl::MutexLock lock(&mu_);
  quarantined_[q.blob] = q;
  return q;
}

absl::StatusOr<int64_t> BlobStore::Sweep(
    const absl::flat_hash_set<std::string>& referenced) {
  if (shared_) {
    return absl::FailedPreconditionError(absl::StrCat(
        root_,
        " is shared with other servers: a sweep could delete a blob another "
        "one is about to refer to"));
  }
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> blobs, List());
  int64_t deleted = 0;
  absl::flat_hash_set<std::string> dirs;
  for (const std::string& blob : blobs) {
    if (referenced.contains(blob)) continue;
    const std::string path = ObjectPath(blob);
    std::error_code error;
    fs::remove(path, error);
    if (error) return FsError("delete", path, error);
    dirs.insert(fs::path(path).parent_path().string());
    ++deleted;
  }
  for (const std::string& dir : dirs) {
    BNN_RETURN_IF_ERROR(SyncDirectory(dir));
  }
  return deleted;
}

absl::Status BlobStore::RemoveIfUnreferenced(
    absl::string_view blob,
    absl::FunctionRef<absl::StatusOr<bool>()> referenced) {
  if (!IsBlobName(blob)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", blob, "' is not a blob name"));
  }
  if (shared_) return absl::OkStatus();
  absl::MutexLock reference_lock(&reference_mu_);
  BNN_ASSIGN_OR_RETURN(const bool in_use, referenced());
  if (in_use) return absl::OkStatus();
  const std::string path = ObjectPath(blob);
  std::error_code error;
  if (fs::exists(path, error)) {
    BNN_RETURN_IF_ERROR(RemoveFile(path));
    BNN_RETURN_IF_ERROR(SyncDirectory(fs::path(path).parent_path().string()));
  }
  absl::MutexLock lock(&mu_);
  if (const auto it = quarantined_.find(blob); it != quarantined_.end()) {
    BNN_RETURN_IF_ERROR(RemoveFile(it->second.path));
    quarantined_.erase(it);
  }
  return absl::OkStatus();
}

std::vector<QuarantinedBlob> BlobStore::Quarantined() const {
  absl::MutexLock lock(&mu_);
  std::vector<QuarantinedBlob> result;
  for (const auto& [blob, q] : quarantined_) result.push_back(q);
  std::sort(result.begin(), result.end(),
            [](const QuarantinedBlob& a, const QuarantinedBlob& b) {
              return a.blob < b.blob;
            });
  return result;
}

absl::StatusOr<std::vector<std::string>> BlobStore::List() const {
  std::vector<std::string> blobs;
  std::error_code error;
  for (fs::directory_iterator dir(objects_, error), end; !error && dir != end;
       dir.increment(error)) {
    if (!dir->is_directory()) continue;
    for (fs::directory_iterator it(dir->path(), error); !error && it != end;
         it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (IsBlobName(name)) blobs.push_back(name);
    }
    if (error) return FsError("scan", dir->path().string(), error);
  }
  if (error) return FsError("scan", objects_, error);
  std::sort(blobs.begin(), blobs.end());
  return blobs;
}

}  // namespace bnn::server
