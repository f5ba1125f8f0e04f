#include "agent/requests/privhelper_convert.h"

#include <optional>
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

// One function per argument shape: the wire arguments into the operation's proto message.

void FillArgs(const wire::CreateArgs& a, pb::CreateArgs* c) {
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
}

void FillArgs(const wire::ResumeArgs& a, pb::ResumeArgs* out) {
  out->set_sandbox_id(a.sandbox_id);
  out->set_reconciliation_only(a.reconciliation_only);
}

void FillArgs(const wire::SandboxArgs& a, pb::SandboxArgs* out) {
  out->set_sandbox_id(a.sandbox_id);
}

void FillArgs(const wire::ExecArgs& a, pb::ExecArgs* e) {
  e->set_sandbox_id(a.sandbox_id);
  for (const std::string& s : a.argv) e->add_argv(s);
  if (a.stdin_bytes) e->set_stdin(*a.stdin_bytes);
  e->set_output_limit_bytes(a.output_limit_bytes);
}

void FillArgs(const wire::WriteFileArgs& a, pb::WriteFileArgs* w) {
  w->set_sandbox_id(a.sandbox_id);
  w->set_path(a.path);
  w->set_content(a.content);
  w->set_mode(a.mode);
}

void FillArgs(const wire::ReadFileArgs& a, pb::ReadFileArgs* rf) {
  rf->set_sandbox_id(a.sandbox_id);
  rf->set_path(a.path);
  rf->set_max_bytes(a.max_bytes);
}

// One function per result shape (<Result>FromProto): privhelper's successful answer as the
// wire outcome; nullopt when the answer is malformed for the shape.

struct SandboxAnswer {
  wire::SandboxState state;
  const std::string& native_id;
};

std::optional<SandboxAnswer> SandboxOfAnswer(const pb::ExecuteResponse& resp) {
  if (!resp.has_sandbox()) return std::nullopt;
  std::optional<wire::SandboxState> st = StateOf(resp.sandbox().state());
  if (!st) return std::nullopt;
  return SandboxAnswer{*st, resp.sandbox().native_id()};
}

std::optional<ExecOutcome> Success(wire::Result result) {
  ExecOutcome o;
  o.result = std::move(result);
  return o;
}

std::optional<ExecOutcome> CreateFromProto(const pb::ExecuteResponse& resp,
                                           const std::string& sandbox_id) {
  std::optional<SandboxAnswer> s = SandboxOfAnswer(resp);
  if (!s || s->state != wire::SandboxState::kRunning || s->native_id.empty()) return std::nullopt;
  return Success(wire::CreateResult{sandbox_id, s->native_id});
}

std::optional<ExecOutcome> ResumeFromProto(const pb::ExecuteResponse& resp,
                                           const std::string& sandbox_id) {
  std::optional<SandboxAnswer> s = SandboxOfAnswer(resp);
  if (!s || s->state == wire::SandboxState::kAbsent || s->native_id.empty()) return std::nullopt;
  return Success(wire::ResumeResult{sandbox_id, s->native_id, s->state});
}

std::optional<ExecOutcome> InspectFromProto(const pb::ExecuteResponse& resp,
                                            const std::string& sandbox_id) {
  std::optional<SandboxAnswer> s = SandboxOfAnswer(resp);
  if (!s || (s->state == wire::SandboxState::kAbsent) != s->native_id.empty()) {
    return std::nullopt;
  }
  wire::InspectResult ir{sandbox_id, s->state, std::nullopt};
  if (!s->native_id.empty()) ir.native_id = s->native_id;
  return Success(std::move(ir));
}

std::optional<ExecOutcome> ExecFromProto(const pb::ExecuteResponse& resp, const std::string&) {
  if (!resp.has_exec()) return std::nullopt;
  return Success(wire::ExecResult{resp.exec().exit_code(), resp.exec().stdout(),
                                  resp.exec().stderr(), resp.exec().truncated()});
}

std::optional<ExecOutcome> WriteFileFromProto(const pb::ExecuteResponse& resp,
                                              const std::string&) {
  if (!resp.has_write_file()) return std::nullopt;
  return Success(wire::WriteFileResult{resp.write_file().size()});
}

std::optional<ExecOutcome> ReadFileFromProto(const pb::ExecuteResponse& resp,
                                             const std::string&) {
  if (!resp.has_read_file()) return std::nullopt;
  return Success(wire::ReadFileResult{resp.read_file().content(), resp.read_file().size(),
                                      resp.read_file().truncated()});
}

// A success without a result (kill, kill_compute, delete_retained).
std::optional<ExecOutcome> NoneFromProto(const pb::ExecuteResponse&, const std::string&) {
  return ExecOutcome{};
}

}  // namespace

bool ToProto(const wire::Request& r, pb::ExecuteRequest* out) {
  out->set_request_id(r.id);
  out->set_generation(r.generation);
  switch (r.operation) {
#define SN_OPERATION(e, field, shape, result, mutation, slot)                 \
  case wire::Operation::k##e:                                                 \
    FillArgs(std::get<wire::shape##Args>(r.args), out->mutable_##field()); \
    return true;
#define SN_AGENT_OPERATION(e, field, args, result, mutation, slot) \
  case wire::Operation::k##e: return false;  // the agent answers it from its record
#include "common/operations.def"
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
  const std::string sandbox_id = SandboxOf(r.args);
  std::optional<ExecOutcome> o;
  switch (r.operation) {
#define SN_OPERATION(e, field, args, result, mutation, slot) \
  case wire::Operation::k##e: o = result##FromProto(resp, sandbox_id); break;
#define SN_AGENT_OPERATION(e, field, args, result, mutation, slot) \
  case wire::Operation::k##e: break;  // never sent to privhelper: no answer of it is valid
#include "common/operations.def"
  }
  return o.has_value() ? *std::move(o) : malformed;
}

}  // namespace sn::agent
