#include "server/store/record_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/mman.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>
#include <utility>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/strip.h>

#include "bnn/io/snapshot.h"
#include "bnn/status.h"

#include "server/store/ids.h"

namespace bnn::server {
namespace {

constexpr size_t kMagicSize = 8;
constexpr size_t kHeaderSize = kMagicSize + sizeof(uint32_t) + sizeof(uint64_t);
constexpr size_t kTrailerSize = sizeof(uint32_t);

template <typename T>
void PutLittleEndian(T value, std::string* out) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out->push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  }
}

template <typename T>
T GetLittleEndian(absl::string_view bytes) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<T>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return value;
}

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int error = errno;
  return absl::InternalError(
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(error)));
}

// Closes the descriptor on every path out of WriteFileAtomically.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now so that the error of close() (which can report a failed
  // write-back) is seen.
  bool Close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

// The size of the file `fd` has open for reading, `path` naming it in
// errors; NotFound if the open failed because `path` does not exist. Call
// right after the open, which leaves its error in errno.
absl::StatusOr<size_t> SizeOfOpened(const Fd& fd, const std::string& path) {
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    }
    return ErrnoError("open", path);
  }
  struct stat info;
  if (::fstat(fd.get(), &info) != 0) return ErrnoError("stat", path);
  return static_cast<size_t>(info.st_size);
}

}  // namespace

std::string EncodeRecord(const RecordFormat& format,
                         absl::string_view payload) {
  std::string out;
  out.reserve(kHeaderSize + payload.size() + kTrailerSize);
  out.append(format.magic.data(), format.magic.size());
  PutLittleEndian<uint32_t>(format.version, &out);
  PutLittleEndian<uint64_t>(payload.size(), &out);
  out.append(payload.data(), payload.size());
  PutLittleEndian<uint32_t>(Crc32c(payload), &out);
  return out;
}

absl::StatusOr<absl::string_view> DecodeRecord(const RecordFormat& format,
                                               absl::string_view bytes) {
  if (bytes.size() < kHeaderSize + kTrailerSize ||
      bytes.substr(0, kMagicSize) != format.magic) {
    return absl::DataLossError(absl::StrCat(
        "not a '", format.magic, "' record (bad magic or too short)"));
  }
  const uint32_t version = GetLittleEndian<uint32_t>(bytes.substr(kMagicSize));
  if (version > format.version) {
    return absl::FailedPreconditionError(
        absl::StrCat("record format version ", version,
                     " is newer than this server's ", format.version));
  }
  const uint64_t size =
      GetLittleEndian<uint64_t>(bytes.substr(kMagicSize + sizeof(uint32_t)));
  const uint64_t available = bytes.size() - kHeaderSize - kTrailerSize;
  if (size != available) {
    return absl::DataLossError(absl::StrCat("record payload is ", available,
                                            " bytes; the header says ", size,
                                            " (truncated or extended file)"));
  }
  const absl::string_view payload = bytes.substr(kHeaderSize, size);
  const uint32_t expected =
      GetLittleEndian<uint32_t>(bytes.substr(kHeaderSize + size));
  if (Crc32c(payload) != expected) {
    return absl::DataLossError("record checksum mismatch (corrupt file)");
  }
  return payload;
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents) {
  const std::string temp = absl::StrCat(path, kTempSuffix);
  {
    Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) return ErrnoError("create", temp);
    const char* data = contents.data();
    size_t left = contents.size();
    while (left > 0) {
      const ssize_t written = ::write(fd.get(), data, left);
      if (written < 0) {
        if (errno == EINTR) continue;
        return ErrnoError("write", temp);
      }
      data += written;
      left -= static_cast<size_t>(written);
    }
    if (::fsync(fd.get()) != 0) return ErrnoError("fsync", temp);
    if (!fd.Close()) return ErrnoError("close", temp);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    return ErrnoError("rename into place", path);
  }
  return SyncDirectory(std::filesystem::path(path).parent_path().string());
}

absl::Status SyncDirectory(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("open directory", dir);
  if (::fsync(fd.get()) != 0) return ErrnoError("fsync directory", dir);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  BNN_ASSIGN_OR_RETURN(const size_t size, SizeOfOpened(fd, path));
  std::string contents(size, '\0');
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t got =
        ::read(fd.get(), contents.data() + done, contents.size() - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read", path);
    }
    if (got == 0) break;  // shrank while reading; the frame check reports it
    done += static_cast<size_t>(got);
  }
  contents.resize(done);
  return contents;
}

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  BNN_ASSIGN_OR_RETURN(const size_t size, SizeOfOpened(fd, path));
  if (size == 0) return MappedFile(nullptr, 0);
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (data == MAP_FAILED) return ErrnoError("map", path);
  // The mapping outlives the descriptor, which Fd closes.
  return MappedFile(static_cast<const char*>(data), size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
}

absl::Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError("delete", path);
  }
  return absl::OkStatus();
}

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

}  // namespace bnn::server
