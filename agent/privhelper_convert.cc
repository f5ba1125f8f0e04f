#include "agent/privhelper_convert.h"

#include <utility>

namespace sn::agent {
namespace {

const char* ErrorCodeName(pb::ErrorCode c) {
  switch (c) {
    case pb::ERROR_CODE_INVALID: return "invalid";
    case pb::ERROR_CODE_UNSUPPORTED: return "unsupported";
    case pb::ERROR_CODE_CAPACITY: return "capacity";
    case pb::ERROR_CODE_CONFLICT: return "conflict";
    case pb::ERROR_CODE_NOT_FOUND: return "not_found";
    case pb::ERROR_CODE_FAILED: return "failed";
    case pb::ERROR_CODE_UNCONFIRMED: return "unconfirmed";
    case pb::ERROR_CODE_UNAVAILABLE: return "unavailable";
    case pb::ERROR_CODE_UNCERTAIN: return "uncertain";
    default: return nullptr;
  }
}

ExecOutcome Error(const char* code) {
  ExecOutcome o;
  o.error_code = code;
  return o;
}

std::optional<wire::SandboxState> StateOf(pb::SandboxState s) {
  switch (s) {
    case pb::SANDBOX_STATE_RUNNING: return wire::SandboxState::kRunning;
    case pb::SANDBOX_STATE_RETAINED: return wire::SandboxState::kRetained;
    case pb::SANDBOX_STATE_ABSENT: return wire::SandboxState::kAbsent;
    default: return std::nullopt;
  }
}

}  // namespace

bool ToProto(const wire::Request& r, pb::ExecuteRequest* out) {
  out->set_request_id(r.id);
  out->set_generation(r.generation);
  switch (r.operation) {
    case wire::Operation::kCreate: {
      const auto& a = std::get<wire::CreateArgs>(r.args);
      pb::CreateArgs* c = out->mutable_create();
      c->set_sandbox_id(a.sandbox_id);
      c->set_image(a.image);  // the specification's name: privhelper resolves it
      if (a.command) {
        for (const std::string& s : *a.command) c->add_command(s);
      }
      if (a.env) {
        for (const auto& [k, v] : *a.env) (*c->mutable_env())[k] = v;
      }
      c->set_cpu_millis(a.cpu_millis);
      c->set_memory_bytes(a.memory_bytes);
      return true;
    }
    case wire::Operation::kResume: {
      const auto& a = std::get<wire::ResumeArgs>(r.args);
      out->mutable_resume()->set_sandbox_id(a.sandbox_id);
      out->mutable_resume()->set_reconciliation_only(a.reconciliation_only);
      return true;
    }
    case wire::Operation::kKill:
      out->mutable_kill()->set_sandbox_id(std::get<wire::SandboxArgs>(r.args).sandbox_id);
      return true;
    case wire::Operation::kKillCompute:
      out->mutable_kill_compute()->set_sandbox_id(
          std::get<wire::SandboxArgs>(r.args).sandbox_id);
      return true;
    case wire::Operation::kDeleteRetained:
      out->mutable_delete_retained()->set_sandbox_id(
          std::get<wire::SandboxArgs>(r.args).sandbox_id);
      return true;
    case wire::Operation::kInspect:
      out->mutable_inspect()->set_sandbox_id(std::get<wire::SandboxArgs>(r.args).sandbox_id);
      return true;
    case wire::Operation::kExec: {
      const auto& a = std::get<wire::ExecArgs>(r.args);
      pb::ExecArgs* e = out->mutable_exec();
      e->set_sandbox_id(a.sandbox_id);
      for (const std::string& s : a.argv) e->add_argv(s);
      if (a.stdin_bytes) e->set_stdin(*a.stdin_bytes);
      e->set_output_limit_bytes(a.output_limit_bytes);
      return true;
    }
    case wire::Operation::kWriteFile: {
      const auto& a = std::get<wire::WriteFileArgs>(r.args);
      pb::WriteFileArgs* w = out->mutable_write_file();
      w->set_sandbox_id(a.sandbox_id);
      w->set_path(a.path);
      w->set_content(a.content);
      w->set_mode(a.mode);
      return true;
    }
    case wire::Operation::kReadFile: {
      const auto& a = std::get<wire::ReadFileArgs>(r.args);
      pb::ReadFileArgs* rf = out->mutable_read_file();
      rf->set_sandbox_id(a.sandbox_id);
      rf->set_path(a.path);
      rf->set_max_bytes(a.max_bytes);
      return true;
    }
    case wire::Operation::kObserve:
      return false;
  }
  return false;
}

wire::Request WithoutPayload(const wire::Request& r) {
  wire::Request out;
  out.id = r.id;
  out.connection_id = r.connection_id;
  out.owner_epoch = r.owner_epoch;
  out.sequence = r.sequence;
  out.generation = r.generation;
  out.operation_name = r.operation_name;
  out.operation = r.operation;
  out.timeout_ms = r.timeout_ms;
  out.request_error = r.request_error;
  if (const auto* w = std::get_if<wire::WriteFileArgs>(&r.args)) {
    out.args = wire::WriteFileArgs{w->sandbox_id, w->path, "", w->mode};
  } else if (const auto* e = std::get_if<wire::ExecArgs>(&r.args)) {
    out.args = wire::ExecArgs{e->sandbox_id, e->argv, std::nullopt, e->output_limit_bytes};
  } else {
    out.args = r.args;
  }
  return out;
}

ExecOutcome FromProto(const wire::Request& r, const pb::ExecuteResponse& resp,
                      const std::string& digest) {
  const bool mutation = wire::IsMutationRequest(r.operation, r.args);
  const ExecOutcome malformed = Error(mutation ? "uncertain" : "unavailable");
  // A refusal is privhelper's own answer before any native I/O; its error_code is the answer.
  // A refusal that claims success is inconsistent: never a success.
  if (resp.refusal() != pb::REFUSAL_NONE && resp.error_code() == pb::ERROR_CODE_NONE) {
    return malformed;
  }
  if (resp.error_code() != pb::ERROR_CODE_NONE) {
    const char* code = ErrorCodeName(resp.error_code());
    if (code == nullptr) return malformed;
    ExecOutcome o = Error(code);
    if (resp.error_code() == pb::ERROR_CODE_FAILED && resp.has_create_settled() &&
        r.operation == wire::Operation::kCreate && !digest.empty()) {
      const pb::CreateSettled& s = resp.create_settled();
      o.create_settled = wire::CreateSettled{s.request_id(), s.sandbox_id(), s.native_id(),
                                             s.generation(), digest};
    }
    if (resp.error_code() == pb::ERROR_CODE_UNSUPPORTED && resp.has_unsupported()) {
      o.unsupported = wire::Unsupported{resp.unsupported().operation(),
                                        resp.unsupported().reason()};
    }
    return o;
  }
  ExecOutcome o;
  const std::string sandbox_id = SandboxOf(r.args);
  switch (r.operation) {
    case wire::Operation::kCreate:
    case wire::Operation::kResume:
    case wire::Operation::kInspect: {
      if (!resp.has_sandbox()) return malformed;
      std::optional<wire::SandboxState> st = StateOf(resp.sandbox().state());
      if (!st) return malformed;
      const std::string& native = resp.sandbox().native_id();
      if (r.operation == wire::Operation::kCreate) {
        if (*st != wire::SandboxState::kRunning || native.empty()) return malformed;
        o.result = wire::CreateResult{sandbox_id, native};
      } else if (r.operation == wire::Operation::kResume) {
        if (*st == wire::SandboxState::kAbsent || native.empty()) return malformed;
        o.result = wire::ResumeResult{sandbox_id, native, *st};
      } else {
        if ((*st == wire::SandboxState::kAbsent) != native.empty()) return malformed;
        wire::InspectResult ir{sandbox_id, *st, std::nullopt};
        if (!native.empty()) ir.native_id = native;
        o.result = ir;
      }
      return o;
    }
    case wire::Operation::kExec:
      if (!resp.has_exec()) return malformed;
      o.result = wire::ExecResult{resp.exec().exit_code(), resp.exec().stdout(),
                                  resp.exec().stderr(), resp.exec().truncated()};
      return o;
    case wire::Operation::kWriteFile:
      if (!resp.has_write_file()) return malformed;
      o.result = wire::WriteFileResult{resp.write_file().size()};
      return o;
    case wire::Operation::kReadFile:
      if (!resp.has_read_file()) return malformed;
      o.result = wire::ReadFileResult{resp.read_file().content(), resp.read_file().size(),
                                      resp.read_file().truncated()};
      return o;
    case wire::Operation::kKill:
    case wire::Operation::kKillCompute:
    case wire::Operation::kDeleteRetained:
      return o;
    case wire::Operation::kObserve:
      return malformed;
  }
  return malformed;
}


}  // namespace sn::agent
