#include "privhelper/rpc/execute_check.h"

#include "common/wire/argument_rules.h"
#include "proto/execute_stream.h"
#include "proto/operation_of.h"

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;
namespace rules = ::sn::wire::rules;

Refusal Refuse(pb::Refusal kind, pb::ErrorCode code, std::string reason) {
  return Refusal{kind, code, std::move(reason)};
}

Refusal Invalid(std::string member) {
  return Refuse(pb::REFUSAL_ARGUMENTS, pb::ERROR_CODE_INVALID, "bad " + member);
}

// A message carrying fields this privhelper does not know is refused: the agent and privhelper
// ship together, so an unknown field is a confused or hostile caller.
bool HasUnknownFields(const google::protobuf::Message& m) {
  return !m.GetReflection()->GetUnknownFields(m).empty();
}

template <typename Strings>
bool AllStrings(const Strings& v, bool (*rule)(std::string_view)) {
  for (const std::string& s : v) {
    if (!rule(s)) return false;
  }
  return true;
}

Refusal CheckCreate(const pb::CreateArgs& a) {
  if (!rules::SandboxId(a.sandbox_id())) return Invalid("create.sandbox_id");
  if (!rules::ImageName(a.image())) return Invalid("create.image");
  if (!rules::CommandCount(static_cast<size_t>(a.command_size()))) return Invalid("create.command");
  if (!AllStrings(a.command(), rules::CommandArg)) return Invalid("create.command");
  if (!rules::EnvCount(a.env().size())) return Invalid("create.env");
  for (const auto& [k, v] : a.env()) {
    if (!rules::EnvKey(k) || !rules::EnvValue(v)) return Invalid("create.env");
  }
  if (!rules::CpuMillis(a.cpu_millis())) return Invalid("create.cpu_millis");
  if (!rules::MemoryBytes(a.memory_bytes())) return Invalid("create.memory_bytes");
  return {};
}

// The declared payload: never negative, and the payload member itself is empty (the bytes
// follow as chunks).
bool PayloadDeclared(const pb::ExecuteRequest& r, const std::string& member) {
  return r.payload_bytes() >= 0 && member.empty();
}

Refusal CheckExec(const pb::ExecuteRequest& r) {
  const pb::ExecArgs& a = r.exec();
  if (!rules::SandboxId(a.sandbox_id())) return Invalid("exec.sandbox_id");
  if (!rules::ArgvCount(static_cast<size_t>(a.argv_size()))) return Invalid("exec.argv");
  if (!AllStrings(a.argv(), rules::ArgvArg)) return Invalid("exec.argv");
  if (!PayloadDeclared(r, a.stdin()) || !rules::StdinBytes(static_cast<size_t>(r.payload_bytes()))) {
    return Invalid("exec.stdin");
  }
  if (!rules::OutputLimitBytes(a.output_limit_bytes())) return Invalid("exec.output_limit_bytes");
  return {};
}

Refusal CheckWriteFile(const pb::ExecuteRequest& r) {
  const pb::WriteFileArgs& a = r.write_file();
  if (!rules::SandboxId(a.sandbox_id())) return Invalid("write_file.sandbox_id");
  if (!rules::FilePath(a.path())) return Invalid("write_file.path");
  if (!PayloadDeclared(r, a.content()) ||
      !rules::FileContentBytes(static_cast<size_t>(r.payload_bytes()))) {
    return Invalid("write_file.content");
  }
  if (!rules::FileMode(a.mode())) return Invalid("write_file.mode");
  return {};
}

Refusal CheckReadFile(const pb::ReadFileArgs& a) {
  if (!rules::SandboxId(a.sandbox_id())) return Invalid("read_file.sandbox_id");
  if (!rules::FilePath(a.path())) return Invalid("read_file.path");
  if (!rules::ReadMaxBytes(a.max_bytes())) return Invalid("read_file.max_bytes");
  return {};
}

Refusal CheckSandboxOnly(const pb::SandboxArgs& a, const char* op) {
  if (!rules::SandboxId(a.sandbox_id())) return Invalid(std::string(op) + ".sandbox_id");
  return {};
}

const google::protobuf::Message* OperationMessage(const pb::ExecuteRequest& r) {
  switch (r.operation_case()) {
    case pb::ExecuteRequest::kCreate: return &r.create();
    case pb::ExecuteRequest::kResume: return &r.resume();
    case pb::ExecuteRequest::kKill: return &r.kill();
    case pb::ExecuteRequest::kKillCompute: return &r.kill_compute();
    case pb::ExecuteRequest::kDeleteRetained: return &r.delete_retained();
    case pb::ExecuteRequest::kInspect: return &r.inspect();
    case pb::ExecuteRequest::kExec: return &r.exec();
    case pb::ExecuteRequest::kWriteFile: return &r.write_file();
    case pb::ExecuteRequest::kReadFile: return &r.read_file();
    case pb::ExecuteRequest::OPERATION_NOT_SET: break;
  }
  return nullptr;
}

}  // namespace

Refusal CheckArguments(const pb::ExecuteRequest& r) {
  if (!rules::RequestId(r.request_id())) return Invalid("request_id");
  if (!rules::Generation(r.generation())) return Invalid("generation");
  if (!rules::TimeoutMs(r.budget_ms())) return Invalid("budget_ms");
  if (!OperationOf(r).has_value()) return Invalid("operation (none set)");
  const google::protobuf::Message* args = OperationMessage(r);
  if (HasUnknownFields(r) || args == nullptr || HasUnknownFields(*args)) {
    return Invalid("message (unknown fields)");
  }
  if (!r.has_write_file() && !r.has_exec() && r.payload_bytes() != 0) {
    return Invalid("payload_bytes (the operation has no payload)");
  }
  switch (r.operation_case()) {
    case pb::ExecuteRequest::kCreate: return CheckCreate(r.create());
    case pb::ExecuteRequest::kResume:
      return rules::SandboxId(r.resume().sandbox_id()) ? Refusal{} : Invalid("resume.sandbox_id");
    case pb::ExecuteRequest::kKill: return CheckSandboxOnly(r.kill(), "kill");
    case pb::ExecuteRequest::kKillCompute: return CheckSandboxOnly(r.kill_compute(), "kill_compute");
    case pb::ExecuteRequest::kDeleteRetained:
      return CheckSandboxOnly(r.delete_retained(), "delete_retained");
    case pb::ExecuteRequest::kInspect: return CheckSandboxOnly(r.inspect(), "inspect");
    case pb::ExecuteRequest::kExec: return CheckExec(r);
    case pb::ExecuteRequest::kWriteFile: return CheckWriteFile(r);
    case pb::ExecuteRequest::kReadFile: return CheckReadFile(r.read_file());
    case pb::ExecuteRequest::OPERATION_NOT_SET: break;
  }
  return Invalid("operation");
}

Refusal ReadPayload(const std::function<bool(pb::ExecuteMessage*)>& next, size_t bytes,
                    pb::ExecuteRequest* req) {
  std::string* payload = MutablePayload(req);
  if (payload == nullptr && bytes > 0) return Invalid("payload (the operation has none)");
  if (payload != nullptr) payload->reserve(bytes);
  pb::ExecuteMessage m;
  size_t got = 0;
  while (got < bytes) {
    if (!next(&m) || !m.has_payload() || m.payload().empty() ||
        m.payload().size() > kMaxPayloadChunkBytes || m.payload().size() > bytes - got) {
      return Invalid("payload (the chunks do not match payload_bytes)");
    }
    payload->append(m.payload());
    got += m.payload().size();
  }
  if (next(&m)) return Invalid("payload (a message after it)");
  req->set_payload_bytes(0);
  return {};
}

Refusal Resolve(const pb::ExecuteRequest& r, const ResolveContext& ctx, ResolvedCall* out) {
  if (ctx.installation_id.empty() || r.installation_id() != ctx.installation_id) {
    return Refuse(pb::REFUSAL_INSTALLATION, pb::ERROR_CODE_UNAVAILABLE,
                  "the request names another installation");
  }
  std::shared_ptr<const store::HeldGeneration> held =
      ctx.generations == nullptr ? nullptr : ctx.generations->Find(r.generation());
  if (held == nullptr) {
    return Refuse(pb::REFUSAL_GENERATION_NOT_HELD, pb::ERROR_CODE_UNCONFIRMED,
                  "privhelper does not hold the generation");
  }
  const bool needs_ready =
      r.has_create() || (r.has_resume() && !r.resume().reconciliation_only());
  if (needs_ready && !ctx.generations->Ready(r.generation())) {
    return Refuse(pb::REFUSAL_GENERATION_NOT_READY, pb::ERROR_CODE_UNCONFIRMED,
                  "the generation is held but not ready (it needs repair)");
  }
  *out = ResolvedCall{};
  out->max_active = ctx.max_active;
  out->max_retained = ctx.max_retained;
  if (r.has_create()) {
    const std::string* native = held->NativeImage(r.create().image());
    if (native == nullptr) return Invalid("create.image (not in the generation's specification)");
    out->native_image = *native;
  }
  return {};
}

}  // namespace sn::privhelper
