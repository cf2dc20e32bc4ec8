#include "bnn/io/file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include "absl/strings/str_cat.h"

#include "bnn/status.h"

namespace bnn {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int error = errno;
  const bool full = error == ENOSPC || error == EDQUOT || error == EFBIG;
  return absl::Status(
      full ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal,
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(error)));
}

// write(2) of all of `bytes` at `offset`, retrying short writes.
bool WriteAll(int fd, absl::string_view bytes, uint64_t offset) {
  const char* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t written =
        ::pwrite(fd, data, left, static_cast<off_t>(offset));
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += written;
    offset += static_cast<uint64_t>(written);
    left -= static_cast<size_t>(written);
  }
  return true;
}

// Closes the descriptor on every path out.
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

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents) {
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<FileWriter> writer,
                       FileWriter::Create(absl::StrCat(path, kTempSuffix)));
  BNN_RETURN_IF_ERROR(writer->Append(contents));
  return writer->Commit(path);
}

absl::StatusOr<std::unique_ptr<FileWriter>> FileWriter::Create(
    std::string temp_path) {
  const int fd =
      ::open(temp_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("create", temp_path);
  return std::unique_ptr<FileWriter>(new FileWriter(std::move(temp_path), fd));
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

absl::Status FileWriter::Append(absl::string_view bytes) {
  return WriteAt(size_, bytes);
}

absl::Status FileWriter::WriteAt(uint64_t offset, absl::string_view bytes) {
  if (fd_ < 0 || offset > size_) {
    return absl::FailedPreconditionError(
        absl::StrCat("write at ", offset, " of ", temp_path_, " (", size_,
                     " bytes, ", fd_ < 0 ? "closed" : "open", ")"));
  }
  if (!WriteAll(fd_, bytes, offset)) return ErrnoError("write", temp_path_);
  size_ = std::max<uint64_t>(size_, offset + bytes.size());
  return absl::OkStatus();
}

absl::Status FileWriter::ReadAt(uint64_t offset, size_t size, char* out) const {
  if (fd_ < 0 || offset + size > size_) {
    return absl::FailedPreconditionError(
        absl::StrCat("read of [", offset, ", ", offset + size, ") of ",
                     temp_path_, " (", size_, " bytes)"));
  }
  while (size > 0) {
    const ssize_t got = ::pread(fd_, out, size, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return ErrnoError("read back", temp_path_);
    out += got;
    offset += static_cast<uint64_t>(got);
    size -= static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

absl::Status FileWriter::Commit(const std::string& path) {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(temp_path_, " is already committed or failed"));
  }
  absl::Status status;
  if (::fsync(fd_) != 0) status = ErrnoError("fsync", temp_path_);
  // close() can report a failed write-back.
  if (::close(fd_) != 0 && status.ok())
    status = ErrnoError("close", temp_path_);
  fd_ = -1;
  if (status.ok() && ::rename(temp_path_.c_str(), path.c_str()) != 0) {
    status = ErrnoError("rename into place", path);
  }
  if (!status.ok()) {
    ::unlink(temp_path_.c_str());
    return status;
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return SyncDirectory(dir.empty() ? "." : dir);
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
    if (got == 0) break;  // shrank while reading; a frame check reports it
    done += static_cast<size_t>(got);
  }
  contents.resize(done);
  return contents;
}

absl::Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError("delete", path);
  }
  return absl::OkStatus();
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

}  // namespace bnn
