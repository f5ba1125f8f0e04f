#include "privhelper/native/dispatch.h"

#include <algorithm>
#include <set>
#include <string>

#include "common/wire/argument_rules.h"

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

bool ArgumentsWithinSpec(const pb::ExecuteRequest& r) {
  namespace rules = ::sn::wire::rules;
  auto sandbox = [](const std::string& id) { return rules::SandboxId(id); };
  switch (r.operation_case()) {
    case pb::ExecuteRequest::kCreate: {
      const pb::CreateArgs& a = r.create();
      if (!sandbox(a.sandbox_id()) || !rules::ImageName(a.image()) ||
          !rules::CommandCount(static_cast<size_t>(a.command_size())) ||
          !rules::EnvCount(a.env().size()) || !rules::CpuMillis(a.cpu_millis()) ||
          !rules::MemoryBytes(a.memory_bytes())) {
        return false;
      }
      for (const std::string& c : a.command()) {
        if (!rules::CommandArg(c)) return false;
      }
      for (const auto& [k, v] : a.env()) {
        if (!rules::EnvKey(k) || !rules::EnvValue(v)) return false;
      }
      return true;
    }
    case pb::ExecuteRequest::kResume: return sandbox(r.resume().sandbox_id());
    case pb::ExecuteRequest::kKill: return sandbox(r.kill().sandbox_id());
    case pb::ExecuteRequest::kKillCompute: return sandbox(r.kill_compute().sandbox_id());
    case pb::ExecuteRequest::kDeleteRetained: return sandbox(r.delete_retained().sandbox_id());
    case pb::ExecuteRequest::kInspect: return sandbox(r.inspect().sandbox_id());
    case pb::ExecuteRequest::kExec: {
      const pb::ExecArgs& a = r.exec();
      if (!sandbox(a.sandbox_id()) || !rules::ArgvCount(static_cast<size_t>(a.argv_size())) ||
          !rules::StdinBytes(a.stdin().size()) ||
          !rules::OutputLimitBytes(a.output_limit_bytes())) {
        return false;
      }
      for (const std::string& arg : a.argv()) {
        if (!rules::ArgvArg(arg)) return false;
      }
      return true;
    }
    case pb::ExecuteRequest::kWriteFile: {
      const pb::WriteFileArgs& a = r.write_file();
      return sandbox(a.sandbox_id()) && rules::FilePath(a.path()) &&
             rules::FileContentBytes(a.content().size()) && rules::FileMode(a.mode());
    }
    case pb::ExecuteRequest::kReadFile: {
      const pb::ReadFileArgs& a = r.read_file();
      return sandbox(a.sandbox_id()) && rules::FilePath(a.path()) &&
             rules::ReadMaxBytes(a.max_bytes());
    }
    case pb::ExecuteRequest::OPERATION_NOT_SET: break;
  }
  return false;
}

bool InFlightIdsWellFormed(const pb::ExecuteRequest& r, const std::vector<std::string>& ids,
                           int64_t max_active, int64_t max_retained) {
  const std::string* own = nullptr;
  int64_t bound = 0;
  if (r.has_create()) {
    own = &r.create().sandbox_id();
    bound = max_active;
  } else if (r.has_resume() && !r.resume().reconciliation_only()) {
    own = &r.resume().sandbox_id();
    bound = max_active;
  } else if (r.has_kill_compute()) {
    own = &r.kill_compute().sandbox_id();
    bound = max_retained;
  }
  if (own == nullptr) return ids.empty();
  // privhelper admits a call while fewer than max(bound, 1) of its kind are in flight.
  if (static_cast<int64_t>(ids.size()) > std::max<int64_t>(bound, 1) - 1) return false;
  std::set<std::string_view> seen;
  for (const std::string& id : ids) {
    if (!::sn::wire::rules::SandboxId(id) || id == *own || !seen.insert(id).second) return false;
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
