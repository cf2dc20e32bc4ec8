// CHECK macros for broken invariants (programmer errors), never for bad
// input: those return absl::Status. absl 20220623 predates absl/log.
#ifndef BNN_CHECK_H_
#define BNN_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"

namespace bnn::internal {

[[noreturn]] inline void CheckFailed(const char* file, int line,
                                     const char* what,
                                     const std::string& detail) {
  std::fprintf(stderr, "%s:%d: CHECK failed: %s %s\n", file, line, what,
               detail.c_str());
  std::abort();
}

}  // namespace bnn::internal

#define BNN_CHECK(cond)                                                       \
  do {                                                                        \
    if (!(cond)) ::bnn::internal::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (false)

#define BNN_CHECK_EQ(a, b)                                                 \
  do {                                                                     \
    const auto& bnn_a_ = (a);                                              \
    const auto& bnn_b_ = (b);                                              \
    if (!(bnn_a_ == bnn_b_)) {                                             \
      ::bnn::internal::CheckFailed(__FILE__, __LINE__, #a " == " #b,       \
                                   "(" + std::to_string(bnn_a_) + " vs " + \
                                       std::to_string(bnn_b_) + ")");      \
    }                                                                      \
  } while (false)

#define BNN_CHECK_OK(expr)                                          \
  do {                                                              \
    const ::absl::Status bnn_s_ = (expr);                           \
    if (!bnn_s_.ok()) {                                             \
      ::bnn::internal::CheckFailed(__FILE__, __LINE__, #expr,       \
                                   std::string(bnn_s_.ToString())); \
    }                                                               \
  } while (false)

#endif  // BNN_CHECK_H_
