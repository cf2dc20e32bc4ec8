// Helpers shared by the unit tests.
#ifndef BNN_TESTS_TEST_UTIL_TEST_UTIL_H_
#define BNN_TESTS_TEST_UTIL_TEST_UTIL_H_

#include <filesystem>
#include <fstream>
#include <stdlib.h>
#include <string>
#include <sys/resource.h>
#include <system_error>
#include <unistd.h>

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

// Caps the process's address space at its current size plus `extra_bytes`
// (RLIMIT_AS), so that larger allocations fail with std::bad_alloc instead
// of being overcommitted. For death tests, which run in a forked child;
// they skip under the sanitizers (BNN_SKIP_IF_SANITIZED): ASan's shadow
// memory needs terabytes of address space.
inline bool LimitAddressSpace(int64_t extra_bytes) {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0;
  if (!(statm >> pages)) return false;
  const rlim_t limit =
      static_cast<rlim_t>(pages * sysconf(_SC_PAGESIZE) + extra_bytes);
  const struct rlimit rl = {limit, limit};
  return setrlimit(RLIMIT_AS, &rl) == 0;
}

}  // namespace bnn::testing

// How many times slower than an optimised build the sanitizer build
// (cmake -DBNN_SANITIZE=ON: ASan and UBSan at -O1) runs training steps, for
// tests that size a job to run for a while without running for minutes.
#ifdef BNN_SANITIZED
inline constexpr int kSanitizerSlowdown = 8;
#else
inline constexpr int kSanitizerSlowdown = 1;
#endif

// Skips the current test in a sanitizer build (cmake -DBNN_SANITIZE=ON).
#ifdef BNN_SANITIZED
#define BNN_SKIP_IF_SANITIZED(why) GTEST_SKIP() << "sanitizer build: " << why
#else
#define BNN_SKIP_IF_SANITIZED(why) static_cast<void>(0)
#endif

#endif  // BNN_TESTS_TEST_UTIL_TEST_UTIL_H_
