// The record frame shared by snapshots and the server's store: round trips,
// and every damaged record (each flipped byte, each truncation, trailing
// bytes, another kind's magic, a newer or zero version) is refused with its
// own status and message.
#include "bnn/io/record.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/core/snapshot.pb.h"
#include "bnn/io/file.h"

#include "tests/test_util/test_util.h"

namespace bnn {
namespace {

using ::bnn::testing::Msg;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr RecordFormat kFormat{"TESTREC1", 2, "test record"};

snapshot::TrainingSummary Message() {
  snapshot::TrainingSummary message;
  message.set_dataset_id("ds-00000000000000aa");
  message.set_steps(12345);
  message.set_final_loss(-0.25);
  return message;
}

TEST(RecordTest, RoundTripsPayloads) {
  for (const std::string& payload :
       {std::string(), std::string("hello"), std::string(100000, '\0')}) {
    const std::string bytes = EncodeRecord(kFormat, payload);
    EXPECT_EQ(bytes.size(),
              kRecordHeaderBytes + payload.size() + kRecordTrailerBytes);
    const absl::StatusOr<DecodedRecord> decoded = DecodeRecord(kFormat, bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->payload, payload);
    EXPECT_EQ(decoded->version, 2u);
  }
}

TEST(RecordTest, FrameLayoutIsLittleEndianWithCrc32cOfThePayload) {
  const std::string bytes = EncodeRecord(kFormat, "abc");
  EXPECT_EQ(bytes.substr(0, 8), "TESTREC1");
  EXPECT_EQ(bytes.substr(8, 4), std::string("\x02\0\0\0", 4));
  EXPECT_EQ(bytes.substr(12, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(bytes.substr(20, 3), "abc");
  const uint32_t crc = Crc32c("abc");
  std::string trailer;
  for (int i = 0; i < 4; ++i)
    trailer.push_back(static_cast<char>(crc >> 8 * i));
  EXPECT_EQ(bytes.substr(23), trailer);
}

TEST(RecordTest, RoundTripsMessagesAndFiles) {
  const std::string bytes = *EncodeRecordMessage(kFormat, Message());
  snapshot::TrainingSummary back;
  EXPECT_EQ(*DecodeRecordMessage(kFormat, bytes, &back), 2u);
  EXPECT_EQ(back.SerializeAsString(), Message().SerializeAsString());

  testing::ScopedTempDir dir;
  const std::string path = dir.File("message.rec");
  ASSERT_TRUE(WriteRecordFile(path, kFormat, Message()).ok());
  EXPECT_EQ(*ReadFile(path), bytes);
  snapshot::TrainingSummary read;
  EXPECT_EQ(*ReadRecordFile(path, kFormat, &read), 2u);
  EXPECT_EQ(read.steps(), 12345);
}

// Found by snapshot_fuzz: a snapshot decoded and encoded again got other
// bytes, as map entries were written in an order seeded per map object.
TEST(RecordTest, EqualMessagesWithMapsEncodeToEqualBytes) {
  snapshot::Snapshot forward;
  snapshot::Snapshot backward;
  for (int i = 0; i < 50; ++i) {
    (*forward.mutable_params())[absl::StrCat("key", i)] = absl::StrCat(i);
    (*backward.mutable_params())[absl::StrCat("key", 49 - i)] =
        absl::StrCat(49 - i);
  }
  const absl::StatusOr<std::string> a = EncodeRecordMessage(kFormat, forward);
  const absl::StatusOr<std::string> b = EncodeRecordMessage(kFormat, backward);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*a, *b);
  snapshot::Snapshot decoded;
  ASSERT_TRUE(DecodeRecordMessage(kFormat, *a, &decoded).ok());
  EXPECT_EQ(*EncodeRecordMessage(kFormat, decoded), *a);
}

TEST(RecordTest, AcceptsOlderVersions) {
  const std::string bytes = EncodeRecord({"TESTREC1", 1, "test record"}, "old");
  const absl::StatusOr<DecodedRecord> decoded = DecodeRecord(kFormat, bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->version, 1u);
  EXPECT_EQ(decoded->payload, "old");
}

TEST(RecordTest, NewerVersionIsFailedPrecondition) {
  const std::string bytes = EncodeRecord({"TESTREC1", 3, "test record"}, "new");
  const absl::Status status = DecodeRecord(kFormat, bytes).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Msg(status),
            "test record format version 3 is newer than this build supports "
            "(2); upgrade bnn-serve to load it");
}

TEST(RecordTest, VersionZeroIsDataLoss) {
  const std::string bytes = EncodeRecord({"TESTREC1", 0, "test record"}, "x");
  const absl::Status status = DecodeRecord(kFormat, bytes).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(status), HasSubstr("format version 0 is invalid"));
}

// Flipping any bit of any byte is detected: in the magic as another kind of
// file, in the version as an invalid or newer version, in the size as a
// truncation or trailing bytes, in the payload or checksum as a checksum
// mismatch.
TEST(RecordTest, DetectsEveryFlippedByte) {
  const std::string bytes = *EncodeRecordMessage(kFormat, Message());
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = bytes;
      damaged[i] = static_cast<char>(damaged[i] ^ (1 << bit));
      const absl::Status status = DecodeRecord(kFormat, damaged).status();
      ASSERT_FALSE(status.ok()) << "byte " << i << " bit " << bit;
      if (i < 8) {
        EXPECT_THAT(Msg(status), HasSubstr("missing TESTREC1 header")) << i;
      } else if (i < 12) {
        EXPECT_THAT(Msg(status), HasSubstr("format version")) << i;
      } else if (i < kRecordHeaderBytes) {
        EXPECT_THAT(Msg(status), AnyOf(HasSubstr("is truncated"),
                                       HasSubstr("has trailing bytes")))
            << i;
      } else {
        EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << i;
        EXPECT_THAT(Msg(status), HasSubstr("checksum mismatch")) << i;
      }
      if (i < 8 || i >= 12) {
        EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << i;
      }
    }
  }
}

TEST(RecordTest, DetectsEveryTruncation) {
  const std::string bytes = *EncodeRecordMessage(kFormat, Message());
  for (size_t keep = 0; keep < bytes.size(); ++keep) {
    const absl::Status status =
        DecodeRecord(kFormat, bytes.substr(0, keep)).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << keep;
    EXPECT_THAT(Msg(status),
                AllOf(StartsWith("test record"), HasSubstr("truncated")))
        << keep;
  }
}

TEST(RecordTest, TrailingBytesAreDataLoss) {
  const std::string bytes = EncodeRecord(kFormat, "payload") + "x";
  const absl::Status status = DecodeRecord(kFormat, bytes).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(status), HasSubstr("has trailing bytes"));
}

TEST(RecordTest, AnotherKindOfFileIsDataLoss) {
  const std::string bytes = EncodeRecord({"OTHERREC", 2, "other"}, "payload");
  const absl::Status status = DecodeRecord(kFormat, bytes).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Msg(status),
            "not a bnn-serve test record (missing TESTREC1 header)");
}

TEST(RecordTest, UnparsablePayloadWithValidChecksumIsDataLoss) {
  snapshot::TrainingSummary message;
  const absl::Status status =
      DecodeRecordMessage(kFormat, EncodeRecord(kFormat, "\xff\xff\xff"),
                          &message)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(status), HasSubstr("test record payload is not a valid"));
}

TEST(RecordTest, FileErrorsNameThePath) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("damaged.rec");
  std::string bytes = *EncodeRecordMessage(kFormat, Message());
  bytes[kRecordHeaderBytes] ^= 1;
  ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  snapshot::TrainingSummary message;
  const absl::Status status = ReadRecordFile(path, kFormat, &message).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(status),
              AllOf(StartsWith(path + ": "), HasSubstr("checksum mismatch")));
  EXPECT_EQ(
      ReadRecordFile(dir.File("absent"), kFormat, &message).status().code(),
      absl::StatusCode::kNotFound);
}

TEST(Crc32cTest, KnownAnswers) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  // RFC 3720 (iSCSI) B.4 test vectors.
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32cTest, ExtendsOverSplits) {
  const std::string data = "123456789";
  for (size_t split = 0; split <= data.size(); ++split) {
    EXPECT_EQ(Crc32cExtend(Crc32c(data.substr(0, split)), data.substr(split)),
              0xE3069283u)
        << split;
  }
}

// Crc32cExtend takes the SSE4.2 instruction where the CPU has it: the same
// CRC as the table for every length and alignment, and from any start.
TEST(Crc32cTest, InstructionRouteMatchesTheTable) {
  std::string bytes(300, '\0');
  uint64_t x = 88172645463325252ull;  // xorshift64
  for (char& c : bytes) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x);
  }
  for (size_t begin = 0; begin < 9; ++begin) {
    for (size_t n = 0; begin + n <= bytes.size(); n += 1 + n / 8) {
      const absl::string_view piece(bytes.data() + begin, n);
      for (const uint32_t start : {0u, 0xE3069283u}) {
        ASSERT_EQ(Crc32cExtend(start, piece),
                  internal::Crc32cExtendPortable(start, piece))
            << "begin " << begin << ", " << n << " bytes";
      }
    }
  }
}

// A record written piece by piece is the record EncodeRecord makes of the
// whole payload, also after bytes were overwritten in place.
TEST(RecordWriterTest, WritesTheSameRecordAsEncodeRecord) {
  testing::ScopedTempDir dir;
  const std::string payload = "a payload written in three pieces";
  for (const bool overwrite : {false, true}) {
    absl::StatusOr<std::unique_ptr<RecordWriter>> writer =
        RecordWriter::Create(kFormat, dir.File("record.tmp"));
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Append(payload.substr(0, 5)).ok());
    ASSERT_TRUE((*writer)->Append(payload.substr(5, 10)).ok());
    ASSERT_TRUE((*writer)->Append(payload.substr(15)).ok());
    std::string expected = payload;
    if (overwrite) {
      ASSERT_TRUE((*writer)->Overwrite(2, "XYZ").ok());
      expected.replace(2, 3, "XYZ");
    }
    char back[3];
    ASSERT_TRUE((*writer)->Read(2, 3, back).ok());
    EXPECT_EQ(std::string(back, 3), expected.substr(2, 3));
    EXPECT_EQ((*writer)->payload_size(), payload.size());
    ASSERT_TRUE((*writer)->Commit(dir.File("record")).ok());
    EXPECT_EQ(*ReadFile(dir.File("record")), EncodeRecord(kFormat, expected));
    EXPECT_FALSE(std::filesystem::exists(dir.File("record.tmp")));
  }
}

TEST(RecordWriterTest, OverwriteOutsideThePayloadFails) {
  testing::ScopedTempDir dir;
  std::unique_ptr<RecordWriter> writer =
      *RecordWriter::Create(kFormat, dir.File("record.tmp"));
  ASSERT_TRUE(writer->Append("abc").ok());
  EXPECT_EQ(writer->Overwrite(2, "xy").code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace bnn
