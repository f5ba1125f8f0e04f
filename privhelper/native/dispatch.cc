#include "privhelper/native/dispatch.h"

#include <algorithm>
#include <set>
#include <string>

#include "common/operations.h"
#include "common/wire/argument_rules.h"
#include "proto/execute_stream.h"
#include "proto/operation_args.h"
#include "proto/operation_of.h"

namespace sn::native {

namespace pb = ::sn::privhelper::v1;

std::string_view OperationName(const pb::ExecuteRequest& r) {
  const std::optional<Operation> op = ::sn::privhelper::OperationOf(r);
  return op.has_value() ? ::sn::OperationName(*op) : std::string_view();
}

bool ArgumentsWithinSpec(const pb::ExecuteRequest& r) {
  // The payload is in its member here (privhelper reassembled it).
  const std::string* payload = ::sn::privhelper::Payload(r);
  return !::sn::privhelper::BrokenArgument(r, payload == nullptr ? 0 : payload->size())
              .has_value();
}

bool InFlightIdsWellFormed(const pb::ExecuteRequest& r, const std::vector<std::string>& ids,
                           int64_t max_active, int64_t max_retained) {
  int64_t bound = 0;
  switch (::sn::privhelper::SlotOfRequest(r)) {
    case Slot::kNone: return ids.empty();
    case Slot::kActive: bound = max_active; break;
    case Slot::kRetained: bound = max_retained; break;
  }
  const std::string& own = ::sn::privhelper::SandboxIdOf(r);
  // privhelper admits a call while fewer than max(bound, 1) of its kind are in flight.
  if (static_cast<int64_t>(ids.size()) > std::max<int64_t>(bound, 1) - 1) return false;
  std::set<std::string_view> seen;
  for (const std::string& id : ids) {
    if (!::sn::wire::rules::SandboxId(id) || id == own || !seen.insert(id).second) return false;
  }
  return true;
}

std::optional<pb::ExecuteResponse> EarlyOutcome(std::span<const OperationDeclaration> table,
                                                std::string_view provider, int64_t generation,
                                                const pb::ExecuteRequest& r) {
  pb::ExecuteResponse out;
  std::string_view op = OperationName(r);
  if (op.empty() || !ArgumentsWithinSpec(r)) {
    out.set_error_code(pb::ERROR_CODE_INVALID);
    return out;
  }
  std::optional<OperationDeclaration> decl = FindDeclaration(table, provider, op);
  if (!decl.has_value() || !decl->supported) {
    out.set_error_code(pb::ERROR_CODE_UNSUPPORTED);
    out.mutable_unsupported()->set_operation(std::string(op));
    // Startup validation (ValidateDeclarations) guarantees a declaration for every §5
    // operation; the fallback only guards a table that was not validated.
    out.mutable_unsupported()->set_reason(decl.has_value() ? std::string(decl->reason)
                                                           : "operation not declared");
    return out;
  }
  if (r.generation() != generation || r.budget_ms() <= 0) {
    out.set_error_code(pb::ERROR_CODE_UNCONFIRMED);
    return out;
  }
  return std::nullopt;
}

}  // namespace sn::native
