#include "tests/fuzz/execute_oracle.h"

#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "google/protobuf/message.h"
#include "google/protobuf/unknown_field_set.h"

namespace sn::fuzz {
namespace {

namespace pb = ::sn::privhelper::v1;

// ---- spec/wire.md §2.6, read afresh (deliberately not common/wire/validate.h) ----

constexpr int64_t kMiB = int64_t{1} << 20;

// RFC 3629 well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool WellFormedUtf8(std::string_view s) {
  size_t i = 0;
  auto cont = [&](size_t k, unsigned lo, unsigned hi) {
    if (i + k >= s.size()) return false;
    const unsigned c = static_cast<unsigned char>(s[i + k]);
    return c >= lo && c <= hi;
  };
  while (i < s.size()) {
    const unsigned c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    if (c <= 0x7F) {
      n = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      if (!cont(1, 0x80, 0xBF)) return false;
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      const unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
      if (!cont(1, lo, hi) || !cont(2, 0x80, 0xBF)) return false;
      n = 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
      const unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
      if (!cont(1, lo, hi) || !cont(2, 0x80, 0xBF) || !cont(3, 0x80, 0xBF)) return false;
      n = 4;
    } else {
      return false;
    }
    i += n;
  }
  return true;
}

// "string ≤ max": well-formed UTF-8, no U+0000, at most `max` bytes.
bool Str(std::string_view s, size_t max) {
  return s.size() <= max && s.find('\0') == std::string_view::npos && WellFormedUtf8(s);
}

// "uuid": lowercase canonical 8-4-4-4-12 hex.
bool Uuid(std::string_view s) {
  static constexpr std::string_view kShape = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
  if (s.size() != kShape.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    if (kShape[i] == '-' ? c != '-' : !hex) return false;
  }
  return true;
}

// §5 path: absolute, ≤ 4096 bytes, no empty, "." or ".." component (so not "/" itself).
bool SandboxPath(std::string_view s) {
  if (!Str(s, 4096) || s.empty() || s[0] != '/') return false;
  std::vector<std::string_view> parts;
  size_t start = 1;
  for (size_t i = 1; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == '/') {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  for (std::string_view p : parts) {
    if (p.empty() || p == "." || p == "..") return false;
  }
  return true;
}

// env keys: [A-Za-z_][A-Za-z0-9_]{0,255}
bool EnvKey(std::string_view s) {
  auto word = [](char c, bool first) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
  };
  if (s.empty() || s.size() > 256) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!word(s[i], i == 0)) return false;
  }
  return true;
}

bool In(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }

// Unknown fields anywhere in the message tree (map entries included).
bool AnyUnknownFields(const google::protobuf::Message& m) {
  const google::protobuf::Reflection* refl = m.GetReflection();
  if (!refl->GetUnknownFields(m).empty()) return true;
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  refl->ListFields(m, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < refl->FieldSize(m, f); ++i) {
        if (AnyUnknownFields(refl->GetRepeatedMessage(m, f, i))) return true;
      }
    } else if (AnyUnknownFields(refl->GetMessage(m, f))) {
      return true;
    }
  }
  return false;
}

bool Strings(const google::protobuf::RepeatedPtrField<std::string>& v, size_t lo, size_t hi) {
  if (static_cast<size_t>(v.size()) < lo || static_cast<size_t>(v.size()) > hi) return false;
  for (const std::string& s : v) {
    if (!Str(s, 4096)) return false;
  }
  return true;
}

std::optional<std::string> ArgumentViolation(const pb::ExecuteRequest& r) {
  switch (r.operation_case()) {
    case pb::ExecuteRequest::kCreate: {
      const pb::CreateArgs& a = r.create();
      if (!Uuid(a.sandbox_id())) return "create.sandbox_id";
      if (!Str(a.image(), 128)) return "create.image";
      if (!Strings(a.command(), 0, 64)) return "create.command";
      if (a.env().size() > 64) return "create.env (entries)";
      for (const auto& [k, v] : a.env()) {
        if (!EnvKey(k) || !Str(v, 4096)) return "create.env";
      }
      if (!In(a.cpu_millis(), 1, 256000)) return "create.cpu_millis";
      if (!In(a.memory_bytes(), 16 * kMiB, int64_t{1} << 40)) return "create.memory_bytes";
      return std::nullopt;
    }
    case pb::ExecuteRequest::kResume:
      return Uuid(r.resume().sandbox_id()) ? std::nullopt
                                            : std::optional<std::string>("resume.sandbox_id");
    case pb::ExecuteRequest::kKill:
    case pb::ExecuteRequest::kKillCompute:
    case pb::ExecuteRequest::kDeleteRetained:
    case pb::ExecuteRequest::kInspect: {
      const pb::SandboxArgs& a = r.has_kill()           ? r.kill()
                                 : r.has_kill_compute() ? r.kill_compute()
                                 : r.has_inspect()      ? r.inspect()
                                                        : r.delete_retained();
      return Uuid(a.sandbox_id()) ? std::nullopt : std::optional<std::string>("sandbox_id");
    }
    case pb::ExecuteRequest::kExec: {
      const pb::ExecArgs& a = r.exec();
      if (!Uuid(a.sandbox_id())) return "exec.sandbox_id";
      if (!Strings(a.argv(), 1, 64)) return "exec.argv";
      if (!a.stdin().empty() || !In(r.payload_bytes(), 0, 48 * kMiB)) return "exec.stdin";
      if (!In(a.output_limit_bytes(), 0, 33554432)) return "exec.output_limit_bytes";
      return std::nullopt;
    }
    case pb::ExecuteRequest::kWriteFile: {
      const pb::WriteFileArgs& a = r.write_file();
      if (!Uuid(a.sandbox_id())) return "write_file.sandbox_id";
      if (!SandboxPath(a.path())) return "write_file.path";
      if (!a.content().empty() || !In(r.payload_bytes(), 0, 48 * kMiB)) {
        return "write_file.content";
      }
      if (!In(a.mode(), 0, 0777)) return "write_file.mode";
      return std::nullopt;
    }
    case pb::ExecuteRequest::kReadFile: {
      const pb::ReadFileArgs& a = r.read_file();
      if (!Uuid(a.sandbox_id())) return "read_file.sandbox_id";
      if (!SandboxPath(a.path())) return "read_file.path";
      if (!In(a.max_bytes(), 0, 50331648)) return "read_file.max_bytes";
      return std::nullopt;
    }
    case pb::ExecuteRequest::OPERATION_NOT_SET: break;
  }
  return "operation";
}

bool HasPayload(const pb::ExecuteRequest& r) { return r.has_exec() || r.has_write_file(); }

}  // namespace

std::optional<std::string> SpecViolation(const pb::ExecuteRequest& r) {
  if (!Uuid(r.request_id())) return "request_id";
  if (r.generation() <= 0) return "generation";
  if (!In(r.budget_ms(), 1, 3600000)) return "budget_ms";
  if (r.operation_case() == pb::ExecuteRequest::OPERATION_NOT_SET) return "operation";
  if (AnyUnknownFields(r)) return "unknown fields";
  if (!HasPayload(r) && r.payload_bytes() != 0) return "payload_bytes";
  return ArgumentViolation(r);
}

bool HasWireForm(const pb::ExecuteRequest& r) {
  if (r.operation_case() == pb::ExecuteRequest::OPERATION_NOT_SET || AnyUnknownFields(r)) {
    return false;
  }
  if (!HasPayload(r)) return r.payload_bytes() == 0;
  const std::string& member = r.has_exec() ? r.exec().stdin() : r.write_file().content();
  return member.empty() && r.payload_bytes() >= 0 &&
         static_cast<uint64_t>(r.payload_bytes()) <= kMaxMaterialisedPayloadBytes;
}

pb::ExecuteRequest FromWireRequest(const wire::Request& w) {
  pb::ExecuteRequest r;
  r.set_request_id(w.id);
  r.set_generation(w.generation);
  r.set_budget_ms(w.timeout_ms);
  std::visit(
      [&](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, wire::CreateArgs>) {
          pb::CreateArgs* c = r.mutable_create();
          c->set_sandbox_id(a.sandbox_id);
          c->set_image(a.image);
          if (a.command) {
            for (const std::string& arg : *a.command) c->add_command(arg);
          }
          if (a.env) {
            for (const auto& [k, v] : *a.env) (*c->mutable_env())[k] = v;
          }
          c->set_cpu_millis(a.cpu_millis);
          c->set_memory_bytes(a.memory_bytes);
        } else if constexpr (std::is_same_v<T, wire::ResumeArgs>) {
          r.mutable_resume()->set_sandbox_id(a.sandbox_id);
          r.mutable_resume()->set_reconciliation_only(a.reconciliation_only);
        } else if constexpr (std::is_same_v<T, wire::SandboxArgs>) {
          pb::SandboxArgs* s = w.operation == wire::Operation::kKill ? r.mutable_kill()
                               : w.operation == wire::Operation::kKillCompute
                                   ? r.mutable_kill_compute()
                               : w.operation == wire::Operation::kDeleteRetained
                                   ? r.mutable_delete_retained()
                                   : r.mutable_inspect();
          s->set_sandbox_id(a.sandbox_id);
        } else if constexpr (std::is_same_v<T, wire::ExecArgs>) {
          pb::ExecArgs* e = r.mutable_exec();
          e->set_sandbox_id(a.sandbox_id);
          for (const std::string& arg : a.argv) e->add_argv(arg);
          e->set_output_limit_bytes(a.output_limit_bytes);
          r.set_payload_bytes(a.stdin_bytes ? static_cast<int64_t>(a.stdin_bytes->size()) : 0);
        } else if constexpr (std::is_same_v<T, wire::WriteFileArgs>) {
          pb::WriteFileArgs* f = r.mutable_write_file();
          f->set_sandbox_id(a.sandbox_id);
          f->set_path(a.path);
          f->set_mode(a.mode);
          r.set_payload_bytes(static_cast<int64_t>(a.content.size()));
        } else if constexpr (std::is_same_v<T, wire::ReadFileArgs>) {
          pb::ReadFileArgs* f = r.mutable_read_file();
          f->set_sandbox_id(a.sandbox_id);
          f->set_path(a.path);
          f->set_max_bytes(a.max_bytes);
        }
        // ObserveArgs: never reaches privhelper (REQUIRES).
      },
      w.args);
  return r;
}

std::string PatternPayload(size_t bytes) {
  std::string p(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<char>((i * 131 + 7) & 0xFF);
  return p;
}

wire::Request ToWireRequest(const pb::ExecuteRequest& r) {
  wire::Request w;
  w.id = r.request_id();
  w.connection_id = "0f0e0d0c-0b0a-4908-8706-050403020100";
  w.owner_epoch = 1;
  w.sequence = 1;
  w.generation = r.generation();
  w.timeout_ms = r.budget_ms();
  const size_t payload = static_cast<size_t>(r.payload_bytes());
  switch (r.operation_case()) {
    case pb::ExecuteRequest::kCreate: {
      const pb::CreateArgs& a = r.create();
      wire::CreateArgs c{a.sandbox_id(), a.image(), std::nullopt, std::nullopt, a.cpu_millis(),
                         a.memory_bytes()};
      if (a.command_size() > 0) c.command.emplace(a.command().begin(), a.command().end());
      if (!a.env().empty()) c.env.emplace(a.env().begin(), a.env().end());
      w.operation = wire::Operation::kCreate;
      w.args = std::move(c);
      break;
    }
    case pb::ExecuteRequest::kResume:
      w.operation = wire::Operation::kResume;
      w.args = wire::ResumeArgs{r.resume().sandbox_id(), r.resume().reconciliation_only()};
      break;
    case pb::ExecuteRequest::kKill:
      w.operation = wire::Operation::kKill;
      w.args = wire::SandboxArgs{r.kill().sandbox_id()};
      break;
    case pb::ExecuteRequest::kKillCompute:
      w.operation = wire::Operation::kKillCompute;
      w.args = wire::SandboxArgs{r.kill_compute().sandbox_id()};
      break;
    case pb::ExecuteRequest::kDeleteRetained:
      w.operation = wire::Operation::kDeleteRetained;
      w.args = wire::SandboxArgs{r.delete_retained().sandbox_id()};
      break;
    case pb::ExecuteRequest::kInspect:
      w.operation = wire::Operation::kInspect;
      w.args = wire::SandboxArgs{r.inspect().sandbox_id()};
      break;
    case pb::ExecuteRequest::kExec: {
      const pb::ExecArgs& a = r.exec();
      wire::ExecArgs e{a.sandbox_id(), {a.argv().begin(), a.argv().end()}, std::nullopt,
                       a.output_limit_bytes()};
      if (payload > 0) e.stdin_bytes = PatternPayload(payload);
      w.operation = wire::Operation::kExec;
      w.args = std::move(e);
      break;
    }
    case pb::ExecuteRequest::kWriteFile: {
      const pb::WriteFileArgs& a = r.write_file();
      w.operation = wire::Operation::kWriteFile;
      w.args = wire::WriteFileArgs{a.sandbox_id(), a.path(), PatternPayload(payload), a.mode()};
      break;
    }
    case pb::ExecuteRequest::kReadFile: {
      const pb::ReadFileArgs& a = r.read_file();
      w.operation = wire::Operation::kReadFile;
      w.args = wire::ReadFileArgs{a.sandbox_id(), a.path(), a.max_bytes()};
      break;
    }
    case pb::ExecuteRequest::OPERATION_NOT_SET: break;
  }
  w.operation_name = std::string(wire::OperationName(w.operation));
  return w;
}

}  // namespace sn::fuzz
