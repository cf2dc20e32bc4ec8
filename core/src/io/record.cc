#include "bnn/io/record.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define BNN_CRC32C_SSE42 1
#endif

#include "absl/strings/str_cat.h"
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message_lite.h>

#include "bnn/check.h"
#include "bnn/io/file.h"
#include "bnn/status.h"

namespace bnn {
namespace {

constexpr size_t kMagicBytes = 8;

std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82f63b78u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

template <typename U>
void PutLittleEndian(U value, std::string* out) {
  for (size_t i = 0; i < sizeof(U); ++i) {
    out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

template <typename U>
U GetLittleEndian(const char* p) {
  U value = 0;
  for (size_t i = 0; i < sizeof(U); ++i) {
    value |= static_cast<U>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return value;
}

#ifdef BNN_CRC32C_SSE42
// SSE4.2's crc32 instruction computes this CRC (reflected Castagnoli
// polynomial 0x82f63b78, the same register convention as the table): 8
// bytes per instruction, ~6 GB/s on one core against ~0.4 GB/s for the
// table, which made the checksum the largest part of decoding a 124 MB
// snapshot (perf.md, "Loading a snapshot"). Compiled for SSE4.2 whatever
// the build's -march, and chosen at run time by the CPU, so the portable
// image has it too.
__attribute__((target("sse4.2"))) uint32_t Crc32cSse42(uint32_t crc,
                                                       absl::string_view data) {
  crc ^= 0xffffffffu;
  const char* p = data.data();
  size_t n = data.size();
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; --n, ++p) {
    crc = _mm_crc32_u8(crc, static_cast<unsigned char>(*p));
  }
  uint64_t wide = crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    wide = _mm_crc32_u64(wide, word);
  }
  crc = static_cast<uint32_t>(wide);
  for (; n > 0; --n, ++p) {
    crc = _mm_crc32_u8(crc, static_cast<unsigned char>(*p));
  }
  return crc ^ 0xffffffffu;
}
#endif

}  // namespace

namespace internal {

uint32_t Crc32cExtendPortable(uint32_t crc, absl::string_view data) {
  static const std::array<uint32_t, 256> table = MakeCrcTable();
  crc ^= 0xffffffffu;
  for (unsigned char c : data) crc = table[(crc ^ c) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

}  // namespace internal

uint32_t Crc32c(absl::string_view data) { return Crc32cExtend(0, data); }

uint32_t Crc32cExtend(uint32_t crc, absl::string_view data) {
#ifdef BNN_CRC32C_SSE42
  // __builtin_cpu_init: safe even if this first runs during static
  // initialisation, before libgcc has read the CPU's features.
  static const bool has_sse42 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  if (has_sse42) return Crc32cSse42(crc, data);
#endif
  return internal::Crc32cExtendPortable(crc, data);
}

std::string EncodeRecord(const RecordFormat& format,
                         absl::string_view payload) {
  std::string out;
  out.reserve(kRecordHeaderBytes + payload.size() + kRecordTrailerBytes);
  out.append(format.magic.data(), format.magic.size());
  PutLittleEndian<uint32_t>(format.version, &out);
  PutLittleEndian<uint64_t>(payload.size(), &out);
  out.append(payload.data(), payload.size());
  PutLittleEndian<uint32_t>(Crc32c(payload), &out);
  return out;
}

absl::StatusOr<DecodedRecord> DecodeRecord(const RecordFormat& format,
                                           absl::string_view bytes) {
  const absl::string_view kind = format.kind;
  // A prefix of the magic is a truncated record, anything else another kind
  // of file.
  const size_t magic_bytes = std::min(bytes.size(), kMagicBytes);
  if (bytes.substr(0, magic_bytes) != format.magic.substr(0, magic_bytes)) {
    return absl::DataLossError(absl::StrCat(
        "not a bnn-serve ", kind, " (missing ", format.magic, " header)"));
  }
  if (bytes.size() < kRecordHeaderBytes) {
    return absl::DataLossError(absl::StrCat(
        kind, " is truncated: ", bytes.size(), " bytes, shorter than its ",
        kRecordHeaderBytes, "-byte header"));
  }
  const uint32_t version = GetLittleEndian<uint32_t>(bytes.data() + 8);
  if (version > format.version) {
    return absl::FailedPreconditionError(
        absl::StrCat(kind, " format version ", version,
                     " is newer than this build supports (", format.version,
                     "); upgrade bnn-serve to load it"));
  }
  if (version == 0) {
    return absl::DataLossError(
        absl::StrCat(kind, " format version 0 is invalid"));
  }
  const uint64_t size = GetLittleEndian<uint64_t>(bytes.data() + 12);
  const uint64_t available =
      bytes.size() >= kRecordHeaderBytes + kRecordTrailerBytes
          ? bytes.size() - kRecordHeaderBytes - kRecordTrailerBytes
          : 0;
  if (size > available ||
      bytes.size() < kRecordHeaderBytes + kRecordTrailerBytes) {
    return absl::DataLossError(
        absl::StrCat(kind, " is truncated: its header declares ", size,
                     " payload bytes, the file holds ", available));
  }
  if (size < available) {
    return absl::DataLossError(
        absl::StrCat(kind, " has trailing bytes: its header declares ", size,
                     " payload bytes, the file holds ", available));
  }
  const absl::string_view payload = bytes.substr(kRecordHeaderBytes, size);
  const uint32_t stored =
      GetLittleEndian<uint32_t>(bytes.data() + kRecordHeaderBytes + size);
  const uint32_t actual = Crc32c(payload);
  if (stored != actual) {
    return absl::DataLossError(absl::StrCat(
        kind, " checksum mismatch (stored CRC32C ", absl::Hex(stored),
        ", computed ", absl::Hex(actual), "): the file is corrupted"));
  }
  return DecodedRecord{version, payload};
}

absl::StatusOr<std::string> EncodeRecordMessage(
    const RecordFormat& format, const google::protobuf::MessageLite& message) {
  // Protobuf cannot serialise messages of 2 GiB or more.
  if (message.ByteSizeLong() >= static_cast<size_t>(INT_MAX)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(format.kind, " of ", message.ByteSizeLong(),
                     " bytes exceeds the 2 GiB limit of a record"));
  }
  std::string payload;
  {
    google::protobuf::io::StringOutputStream stream(&payload);
    google::protobuf::io::CodedOutputStream coded(&stream);
    // Map entries in key order: by default their order follows a hash
    // seeded per map object, so equal records (a snapshot decoded and
    // encoded again) would get different bytes.
    coded.SetSerializationDeterministic(true);
    BNN_CHECK(message.SerializeToCodedStream(&coded));
  }
  return EncodeRecord(format, payload);
}

absl::StatusOr<uint32_t> DecodeRecordMessage(
    const RecordFormat& format, absl::string_view bytes,
    google::protobuf::MessageLite* message) {
  BNN_ASSIGN_OR_RETURN(const DecodedRecord record, DecodeRecord(format, bytes));
  if (record.payload.size() > static_cast<size_t>(INT_MAX) ||
      !message->ParseFromArray(record.payload.data(),
                               static_cast<int>(record.payload.size()))) {
    return absl::DataLossError(
        absl::StrCat(format.kind, " payload is not a valid message"));
  }
  return record.version;
}

absl::Status WriteRecordFile(const std::string& path,
                             const RecordFormat& format,
                             const google::protobuf::MessageLite& message) {
  BNN_ASSIGN_OR_RETURN(const std::string bytes,
                       EncodeRecordMessage(format, message));
  return WriteFileAtomically(path, bytes);
}

absl::StatusOr<uint32_t> ReadRecordFile(
    const std::string& path, const RecordFormat& format,
    google::protobuf::MessageLite* message) {
  BNN_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  absl::StatusOr<uint32_t> version =
      DecodeRecordMessage(format, bytes, message);
  if (!version.ok()) return InFile(path, version.status());
  return version;
}

absl::StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Create(
    const RecordFormat& format, std::string temp_path) {
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<FileWriter> file,
                       FileWriter::Create(std::move(temp_path)));
  // The header, rewritten with the payload size by Commit.
  BNN_RETURN_IF_ERROR(file->Append(std::string(kRecordHeaderBytes, '\0')));
  return std::unique_ptr<RecordWriter>(
      new RecordWriter(format, std::move(file)));
}

absl::Status RecordWriter::Append(absl::string_view bytes) {
  BNN_RETURN_IF_ERROR(file_->Append(bytes));
  payload_size_ += bytes.size();
  if (crc_valid_) crc_ = Crc32cExtend(crc_, bytes);
  return absl::OkStatus();
}

absl::Status RecordWriter::Overwrite(uint64_t offset, absl::string_view bytes) {
  if (offset + bytes.size() > payload_size_) {
    return absl::OutOfRangeError(absl::StrCat(
        format_.kind, " payload bytes [", offset, ", ", offset + bytes.size(),
        ") were not written yet (", payload_size_, " written)"));
  }
  crc_valid_ = false;
  return file_->WriteAt(kRecordHeaderBytes + offset, bytes);
}

absl::Status RecordWriter::Read(uint64_t offset, size_t size, char* out) const {
  return file_->ReadAt(kRecordHeaderBytes + offset, size, out);
}

absl::Status RecordWriter::Commit(const std::string& path) {
  if (!crc_valid_) {
    std::string block(std::min<uint64_t>(payload_size_, 1 << 20), '\0');
    crc_ = 0;
    for (uint64_t offset = 0; offset < payload_size_;) {
      const size_t n = std::min<uint64_t>(block.size(), payload_size_ - offset);
      BNN_RETURN_IF_ERROR(Read(offset, n, block.data()));
      crc_ = Crc32cExtend(crc_, absl::string_view(block.data(), n));
      offset += n;
    }
    crc_valid_ = true;
  }
  std::string trailer;
  PutLittleEndian<uint32_t>(crc_, &trailer);
  BNN_RETURN_IF_ERROR(file_->Append(trailer));
  std::string header(format_.magic.data(), format_.magic.size());
  PutLittleEndian<uint32_t>(format_.version, &header);
  PutLittleEndian<uint64_t>(payload_size_, &header);
  BNN_RETURN_IF_ERROR(file_->WriteAt(0, header));
  return file_->Commit(path);
}

absl::Status InFile(absl::string_view path, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(path, ": ", status.message()));
}

}  // namespace bnn
