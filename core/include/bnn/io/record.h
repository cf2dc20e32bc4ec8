// The one on-disk record format of bnn-serve: snapshots (bnn/io/snapshot.h),
// training checkpoints (bnn/train/checkpoint.h) and every file of the
// server's store are records.
//
// Frame (little-endian):
//   magic (8 bytes) | format_version u32 | payload_size u64 | payload |
//   CRC32C(payload) u32
// The payload is a serialised protobuf message. Decoding checks, in order:
// the magic (a different kind of file), the header's length, the version (a
// newer one is refused with FailedPrecondition; version 0 is invalid), the
// payload size (truncation or trailing bytes) and the checksum (corruption).
// Files are written with WriteFileAtomically (bnn/io/file.h).
#ifndef BNN_IO_RECORD_H_
#define BNN_IO_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "bnn/io/file.h"

namespace google::protobuf {
class MessageLite;
}  // namespace google::protobuf

namespace bnn {

struct RecordFormat {
  // Exactly 8 bytes, distinct per kind of record.
  absl::string_view magic;
  // Written into new records; records with a newer version are refused.
  uint32_t version = 1;
  // What errors call the record, e.g. "snapshot" or "job record".
  absl::string_view kind = "record";
};

// Bytes of the frame around the payload.
inline constexpr size_t kRecordHeaderBytes = 8 + 4 + 8;
inline constexpr size_t kRecordTrailerBytes = 4;

struct DecodedRecord {
  // 1 <= version <= RecordFormat::version.
  uint32_t version = 0;
  // Points into the decoded bytes.
  absl::string_view payload;
};

std::string EncodeRecord(const RecordFormat& format, absl::string_view payload);

// The payload inside `bytes`. DataLoss for a wrong magic, truncation
// (messages say "truncated"), trailing bytes, version 0 or a checksum
// mismatch ("checksum mismatch"); FailedPrecondition for a newer version.
// Every message starts with the format's kind.
absl::StatusOr<DecodedRecord> DecodeRecord(const RecordFormat& format,
                                           absl::string_view bytes);

// EncodeRecord of the serialised `message`. ResourceExhausted if the message
// cannot be serialised (2 GiB or more).
absl::StatusOr<std::string> EncodeRecordMessage(
    const RecordFormat& format, const google::protobuf::MessageLite& message);

// DecodeRecord, then parses the payload into `message` (DataLoss if it does
// not parse); returns the record's version.
absl::StatusOr<uint32_t> DecodeRecordMessage(
    const RecordFormat& format, absl::string_view bytes,
    google::protobuf::MessageLite* message);

// EncodeRecordMessage written with WriteFileAtomically.
absl::Status WriteRecordFile(const std::string& path,
                             const RecordFormat& format,
                             const google::protobuf::MessageLite& message);

// ReadFile and DecodeRecordMessage; errors other than NotFound name `path`.
absl::StatusOr<uint32_t> ReadRecordFile(const std::string& path,
                                        const RecordFormat& format,
                                        google::protobuf::MessageLite* message);

// A record file written piece by piece, its payload appended as it arrives
// (bnn::FileWriter), for payloads too large to hold in memory. The header
// is written last, once the payload size is known. Not thread-safe.
class RecordWriter {
 public:
  // Creates `temp_path` (see FileWriter) with room for the header.
  static absl::StatusOr<std::unique_ptr<RecordWriter>> Create(
      const RecordFormat& format, std::string temp_path);

  // Appends to the payload.
  absl::Status Append(absl::string_view bytes);
  // Overwrites payload bytes [offset, offset + bytes.size()) already
  // appended; the checksum is then computed by reading the payload back.
  absl::Status Overwrite(uint64_t offset, absl::string_view bytes);
  // Reads back payload bytes [offset, offset + size).
  absl::Status Read(uint64_t offset, size_t size, char* out) const;
  uint64_t payload_size() const { return payload_size_; }

  // Writes the checksum and the header and commits the file to `path`
  // (FileWriter::Commit). Call at most once, last.
  absl::Status Commit(const std::string& path);

 private:
  RecordWriter(const RecordFormat& format, std::unique_ptr<FileWriter> file)
      : format_(format), file_(std::move(file)) {}

  const RecordFormat format_;
  std::unique_ptr<FileWriter> file_;
  uint64_t payload_size_ = 0;
  // Of the payload so far, while only appended to.
  uint32_t crc_ = 0;
  bool crc_valid_ = true;
};

// The error `status` with `path: ` before its message.
absl::Status InFile(absl::string_view path, const absl::Status& status);

// CRC32C (Castagnoli), the frame's checksum.
uint32_t Crc32c(absl::string_view data);
// The CRC32C of the bytes whose CRC32C is `crc` followed by `data`:
// Crc32c(a + b) == Crc32cExtend(Crc32c(a), b), and Crc32c(a) ==
// Crc32cExtend(0, a).
uint32_t Crc32cExtend(uint32_t crc, absl::string_view data);

namespace internal {
// Crc32cExtend by a byte-at-a-time table: what it computes on CPUs without
// SSE4.2 (for tests comparing the two routes).
uint32_t Crc32cExtendPortable(uint32_t crc, absl::string_view data);
}  // namespace internal

}  // namespace bnn

#endif  // BNN_IO_RECORD_H_
