// Helpers shared by the unit tests.
#ifndef BNN_TESTS_TEST_UTIL_TEST_UTIL_H_
#define BNN_TESTS_TEST_UTIL_TEST_UTIL_H_

#include <filesystem>
#include <stdlib.h>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include <gtest/gtest.h>

namespace bnn::testing {

// The message of a status as a std::string (for gmock string matchers).
inline std::string Msg(const absl::Status& status) {
  return std::string(status.message());
}

// A fresh directory under the test temp dir, removed with its contents.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& prefix = "bnn_test") {
    std::string tmpl =
        (std::filesystem::path(::testing::TempDir()) / (prefix + "_XXXXXX"))
            .string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScopedTempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  // Empty if the directory could not be created.
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace bnn::testing

#endif  // BNN_TESTS_TEST_UTIL_TEST_UTIL_H_
