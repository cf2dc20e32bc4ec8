// Helpers shared by the server tests: scratch directories, matchers and
// small datasets. Child processes: tests/test_util/subprocess.h.
#ifndef BNN_TESTS_SERVER_SERVER_TEST_UTIL_H_
#define BNN_TESTS_SERVER_SERVER_TEST_UTIL_H_

#include <cstdint>

#include <absl/strings/string_view.h>
#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>

#include "bnn/data/dataset.h"
#include "bnn/io/snapshot.h"

#include "tests/test_util/subprocess.h"
#include "tests/test_util/test_util.h"

namespace bnn::server::testutil {

// Scratch directories and files (tests/test_util/).
using TempDir = ::bnn::testing::ScopedTempDir;
using ::bnn::testing::ReadFileOrEmpty;

// Matches an absl::Status (or the status of a StatusOr via .status()) with
// `code` whose message contains `substring`.
MATCHER_P2(StatusIs, code, substring, "") {
  *result_listener << "status is " << arg.ToString();
  return arg.code() == code &&
         arg.message().find(substring) != absl::string_view::npos;
}

// Matches a protobuf message equal to `expected` (maps compare as maps,
// whatever their serialisation order).
MATCHER_P(EqualsProto, expected, "") {
  *result_listener << "message is " << arg.ShortDebugString();
  return google::protobuf::util::MessageDifferencer::Equals(arg, expected);
}

// y = x^3 + noise, x uniform on [-4, 4] (SLANG App. F.1), one feature.
Dataset CubicDataset(int num_rows, uint64_t seed = 1);

// A SLANG snapshot of 4 hidden units trained one epoch on CubicDataset(20)
// with `seed`, recorded as trained on version 2 of ds-00000000000000aa.
Snapshot TinySnapshot(uint64_t seed);

}  // namespace bnn::server::testutil

#endif  // BNN_TESTS_SERVER_SERVER_TEST_UTIL_H_
