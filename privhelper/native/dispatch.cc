#include "privhelper/native/dispatch.h"

#include <string>

namespace sn::native {

namespace pb = ::sn::privhelper::v1;

std::string_view OperationName(const pb::ExecuteRequest& r) {
  switch (r.operation_case()) {
    case pb::ExecuteRequest::kCreate: return "create";
    case pb::ExecuteRequest::kResume: return "resume";
    case pb::ExecuteRequest::kKill: return "kill";
    case pb::ExecuteRequest::kKillCompute: return "kill_compute";
    case pb::ExecuteRequest::kDeleteRetained: return "delete_retained";
    case pb::ExecuteRequest::kInspect: return "inspect";
    case pb::ExecuteRequest::kExec: return "exec";
    case pb::ExecuteRequest::kWriteFile: return "write_file";
    case pb::ExecuteRequest::kReadFile: return "read_file";
    case pb::ExecuteRequest::OPERATION_NOT_SET: break;
  }
  return "";
}

std::optional<pb::ExecuteResponse> EarlyOutcome(std::span<const OperationDeclaration> table,
                                                std::string_view provider, int64_t generation,
                                                const pb::ExecuteRequest& r) {
  pb::ExecuteResponse out;
  std::string_view op = OperationName(r);
  if (op.empty()) {
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
