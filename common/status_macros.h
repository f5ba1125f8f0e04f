// RETURN_IF_ERROR / ASSIGN_OR_RETURN: Abseil 20220623 ships no status macros.
#ifndef SANDBOX_NODE_COMMON_STATUS_MACROS_H_
#define SANDBOX_NODE_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SN_STATUS_CONCAT_INNER_(a, b) a##b
#define SN_STATUS_CONCAT_(a, b) SN_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the caller when not OK.
#define RETURN_IF_ERROR(expr)                               \
  do {                                                      \
    ::absl::Status sn_status_ = (expr);                     \
    if (!sn_status_.ok()) return sn_status_;                \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): `expr` is an absl::StatusOr<T>; on error returns its status,
// otherwise moves the value into `lhs` (which may be a declaration: `auto x`).
#define ASSIGN_OR_RETURN(lhs, expr) \
  SN_ASSIGN_OR_RETURN_IMPL_(SN_STATUS_CONCAT_(sn_statusor_, __LINE__), lhs, expr)

#define SN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = std::move(tmp).value()

#endif  // SANDBOX_NODE_COMMON_STATUS_MACROS_H_
