// Error-propagation helpers over absl::Status / absl::StatusOr.
#ifndef BNN_STATUS_H_
#define BNN_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define BNN_STATUS_CONCAT_INNER_(a, b) a##b
#define BNN_STATUS_CONCAT_(a, b) BNN_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` is not OK.
#define BNN_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::absl::Status bnn_status_ = (expr);       \
    if (!bnn_status_.ok()) return bnn_status_; \
  } while (false)

// `BNN_ASSIGN_OR_RETURN(auto x, F());` binds the value or returns the error.
#define BNN_ASSIGN_OR_RETURN(lhs, rexpr)                                       \
  BNN_ASSIGN_OR_RETURN_IMPL_(BNN_STATUS_CONCAT_(bnn_statusor_, __LINE__), lhs, \
                             rexpr)
#define BNN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                               \
  if (!statusor.ok()) return statusor.status();          \
  lhs = std::move(statusor).value()

#endif  // BNN_STATUS_H_
