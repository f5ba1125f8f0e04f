#include "proto/operation_args.h"

#include <string_view>

#include "common/operations.h"
#include "common/wire/argument_rules.h"

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;
namespace rules = ::sn::wire::rules;

using Payload = std::optional<size_t>;

template <typename Strings>
bool AllStrings(const Strings& v, bool (*rule)(std::string_view)) {
  for (const std::string& s : v) {
    if (!rule(s)) return false;
  }
  return true;
}

// One function per argument message: the first member that breaks its rule, nullptr if none.

const char* BrokenMember(const pb::CreateArgs& a, Payload) {
  if (!rules::SandboxId(a.sandbox_id())) return "sandbox_id";
  if (!rules::ImageName(a.image())) return "image";
  if (!rules::CommandCount(static_cast<size_t>(a.command_size()))) return "command";
  if (!AllStrings(a.command(), rules::CommandArg)) return "command";
  if (!rules::EnvCount(a.env().size())) return "env";
  for (const auto& [k, v] : a.env()) {
    if (!rules::EnvKey(k) || !rules::EnvValue(v)) return "env";
  }
  if (!rules::CpuMillis(a.cpu_millis())) return "cpu_millis";
  if (!rules::MemoryBytes(a.memory_bytes())) return "memory_bytes";
  return nullptr;
}

const char* BrokenMember(const pb::ResumeArgs& a, Payload) {
  return rules::SandboxId(a.sandbox_id()) ? nullptr : "sandbox_id";
}

const char* BrokenMember(const pb::SandboxArgs& a, Payload) {
  return rules::SandboxId(a.sandbox_id()) ? nullptr : "sandbox_id";
}

const char* BrokenMember(const pb::ExecArgs& a, Payload stdin_bytes) {
  if (!rules::SandboxId(a.sandbox_id())) return "sandbox_id";
  if (!rules::ArgvCount(static_cast<size_t>(a.argv_size()))) return "argv";
  if (!AllStrings(a.argv(), rules::ArgvArg)) return "argv";
  if (!stdin_bytes.has_value() || !rules::StdinBytes(*stdin_bytes)) return "stdin";
  if (!rules::OutputLimitBytes(a.output_limit_bytes())) return "output_limit_bytes";
  return nullptr;
}

const char* BrokenMember(const pb::WriteFileArgs& a, Payload content_bytes) {
  if (!rules::SandboxId(a.sandbox_id())) return "sandbox_id";
  if (!rules::FilePath(a.path())) return "path";
  if (!content_bytes.has_value() || !rules::FileContentBytes(*content_bytes)) return "content";
  if (!rules::FileMode(a.mode())) return "mode";
  return nullptr;
}

const char* BrokenMember(const pb::ReadFileArgs& a, Payload) {
  if (!rules::SandboxId(a.sandbox_id())) return "sandbox_id";
  if (!rules::FilePath(a.path())) return "path";
  if (!rules::ReadMaxBytes(a.max_bytes())) return "max_bytes";
  return nullptr;
}

}  // namespace

std::optional<std::string> BrokenArgument(const pb::ExecuteRequest& r, Payload payload_bytes) {
  const char* member = nullptr;
  switch (r.operation_case()) {
#define SN_OPERATION(e, field, args, result, mutation, slot)       \
  case pb::ExecuteRequest::k##e:                                    \
    member = BrokenMember(r.field(), payload_bytes);                \
    if (member == nullptr) return std::nullopt;                     \
    return std::string(OperationName(Operation::k##e)) + "." + member;
#define SN_AGENT_OPERATION(...)
#include "common/operations.def"
    case pb::ExecuteRequest::OPERATION_NOT_SET: break;
  }
  return "operation";
}

}  // namespace sn::privhelper
