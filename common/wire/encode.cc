// Encoders of every frame (spec/wire.md §3-§5): compact JSON, `type` and `version` first, then
// the members in table order. REQUIRES (everywhere): values valid as Decode would accept.
#include <variant>

#include "common/json/base64.h"
#include "common/json/writer.h"
#include "common/wire/codec.h"

namespace sn::wire {
namespace {

using json::Writer;

constexpr std::string_view kSandboxStates[] = {"running", "retained", "absent"};

void Header(Writer& w, FrameType t) {
  w.BeginObject();
  w.Key("type");
  w.String(FrameTypeName(t));
  w.Key("version");
  w.Int(kProtocolVersion);
}

void WriteHost(Writer& w, const HostMetrics& h) {
  w.BeginObject();
  w.Key("cpu_cores"); w.Int(h.cpu_cores);
  w.Key("load_1m"); w.Raw(h.load_1m);
  w.Key("memory_total_bytes"); w.Int(h.memory_total_bytes);
  w.Key("memory_available_bytes"); w.Int(h.memory_available_bytes);
  w.Key("disk_total_bytes"); w.Int(h.disk_total_bytes);
  w.Key("disk_available_bytes"); w.Int(h.disk_available_bytes);
  w.Key("sandboxes_active"); w.Int(h.sandboxes_active);
  w.Key("sandboxes_retained"); w.Int(h.sandboxes_retained);
  w.EndObject();
}

void WriteHealth(Writer& w, const Health& h) {
  w.BeginObject();
  if (h.provider_ready) { w.Key("provider_ready"); w.Bool(*h.provider_ready); }
  if (h.diagnostic) { w.Key("diagnostic"); w.String(*h.diagnostic); }
  w.Key("observed_at"); w.String(h.observed_at);
  w.Key("active_operations");
  w.BeginArray();
  for (const ActiveOperation& a : h.active_operations) {
    w.BeginObject();
    w.Key("id"); w.String(a.id);
    w.Key("operation"); w.String(a.operation);
    w.Key("state"); w.String(a.state == ActiveState::kQueued ? "queued" : "running");
    w.EndObject();
  }
  w.EndArray();
  w.Key("host"); WriteHost(w, h.host);
  w.EndObject();
}

void WriteObservations(Writer& w, const std::vector<Observation>& gens) {
  w.BeginArray();
  for (const Observation& o : gens) {
    w.BeginObject();
    w.Key("generation"); w.Int(o.generation);
    w.Key("specification_digest"); w.String(o.specification_digest);
    w.Key("state"); w.String(GenerationStateName(o.state));
    if (o.diagnostic) { w.Key("diagnostic"); w.String(*o.diagnostic); }
    w.EndObject();
  }
  w.EndArray();
}

void WriteDeployment(Writer& w, const Deployment& d) {
  w.BeginObject();
  w.Key("generation"); w.Int(d.generation);
  w.Key("specification_digest"); w.String(d.specification_digest);
  w.Key("serving_generation");
  if (d.serving_generation) w.Int(*d.serving_generation); else w.Null();
  w.EndObject();
}

void WriteRetention(Writer& w, FrameType t, const std::string& id, int64_t sequence,
                    const std::string& connection_id, int64_t owner_epoch,
                    const std::vector<RetentionEntry>& entries, bool ack) {
  Header(w, t);
  w.Key("id"); w.String(id);
  w.Key("sequence"); w.Int(sequence);
  w.Key("connection_id"); w.String(connection_id);
  w.Key("owner_epoch"); w.Int(owner_epoch);
  w.Key("entries");
  w.BeginArray();
  for (const RetentionEntry& e : entries) {
    w.BeginObject();
    w.Key("generation"); w.Int(e.generation);
    w.Key("specification_digest"); w.String(e.specification_digest);
    if (ack) { w.Key("keep"); w.Bool(e.keep.value_or(true)); }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void WriteStrings(Writer& w, const std::vector<std::string>& v) {
  w.BeginArray();
  for (const std::string& s : v) w.String(s);
  w.EndArray();
}

void WriteArguments(Writer& w, const Arguments& args) {
  w.BeginObject();
  std::visit(
      [&](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, CreateArgs>) {
          w.Key("sandbox_id"); w.String(a.sandbox_id);
          w.Key("image"); w.String(a.image);
          if (a.command) { w.Key("command"); WriteStrings(w, *a.command); }
          if (a.env) {
            w.Key("env");
            w.BeginObject();
            for (const auto& [k, v] : *a.env) { w.Key(k); w.String(v); }
            w.EndObject();
          }
          w.Key("cpu_millis"); w.Int(a.cpu_millis);
          w.Key("memory_bytes"); w.Int(a.memory_bytes);
        } else if constexpr (std::is_same_v<T, ResumeArgs>) {
          w.Key("sandbox_id"); w.String(a.sandbox_id);
          w.Key("reconciliation_only"); w.Bool(a.reconciliation_only);
        } else if constexpr (std::is_same_v<T, SandboxArgs>) {
          w.Key("sandbox_id"); w.String(a.sandbox_id);
        } else if constexpr (std::is_same_v<T, ExecArgs>) {
          w.Key("sandbox_id"); w.String(a.sandbox_id);
          w.Key("argv"); WriteStrings(w, a.argv);
          if (a.stdin_bytes) { w.Key("stdin"); w.Base64String(*a.stdin_bytes); }
          w.Key("output_limit_bytes"); w.Int(a.output_limit_bytes);
        } else if constexpr (std::is_same_v<T, WriteFileArgs>) {
          w.Key("sandbox_id"); w.String(a.sandbox_id);
          w.Key("path"); w.String(a.path);
          w.Key("content"); w.Base64String(a.content);
          w.Key("mode"); w.Int(a.mode);
        } else if constexpr (std::is_same_v<T, ReadFileArgs>) {
          w.Key("sandbox_id"); w.String(a.sandbox_id);
          w.Key("path"); w.String(a.path);
          w.Key("max_bytes"); w.Int(a.max_bytes);
        } else {
          static_assert(std::is_same_v<T, ObserveArgs>);
          w.Key("operation_id"); w.String(a.operation_id);
        }
      },
      args);
  w.EndObject();
}

void WriteRecorded(Writer& w, const RecordedResponse& r, bool with_frame_members,
                   std::string_view connection_id);

template <typename T>
void WriteResultBody(Writer& w, const T& a) {
  w.BeginObject();
  if constexpr (std::is_same_v<T, CreateResult>) {
    w.Key("sandbox_id"); w.String(a.sandbox_id);
    w.Key("native_id"); w.String(a.native_id);
    w.Key("state"); w.String("running");
  } else if constexpr (std::is_same_v<T, ResumeResult>) {
    w.Key("sandbox_id"); w.String(a.sandbox_id);
    w.Key("native_id"); w.String(a.native_id);
    w.Key("state"); w.String(kSandboxStates[static_cast<int>(a.state)]);
  } else if constexpr (std::is_same_v<T, InspectResult>) {
    w.Key("sandbox_id"); w.String(a.sandbox_id);
    w.Key("state"); w.String(kSandboxStates[static_cast<int>(a.state)]);
    if (a.native_id) { w.Key("native_id"); w.String(*a.native_id); }
  } else if constexpr (std::is_same_v<T, ExecResult>) {
    w.Key("exit_code"); w.Int(a.exit_code);
    w.Key("stdout"); w.Base64String(a.stdout_bytes);
    w.Key("stderr"); w.Base64String(a.stderr_bytes);
    w.Key("truncated"); w.Bool(a.truncated);
  } else if constexpr (std::is_same_v<T, WriteFileResult>) {
    w.Key("size"); w.Int(a.size);
  } else if constexpr (std::is_same_v<T, ReadFileResult>) {
    w.Key("content"); w.Base64String(a.content);
    w.Key("size"); w.Int(a.size);
    w.Key("truncated"); w.Bool(a.truncated);
  } else {
    static_assert(std::is_same_v<T, ObserveResult>);
    static constexpr std::string_view kStates[] = {"queued", "running", "completed", "unknown"};
    w.Key("operation_id"); w.String(a.operation_id);
    if (a.operation) { w.Key("operation"); w.String(*a.operation); }
    w.Key("state"); w.String(kStates[static_cast<int>(a.state)]);
    if (a.response) { w.Key("response"); WriteRecorded(w, *a.response, false, {}); }
  }
  w.EndObject();
}

void WriteOutcome(Writer& w, const std::optional<std::string>& error_code,
                  const std::optional<CreateSettled>& settled,
                  const std::optional<Unsupported>& unsupported) {
  if (error_code) { w.Key("error_code"); w.String(*error_code); }
  if (settled) {
    w.Key("info");
    w.BeginObject();
    w.Key("create_settled");
    w.BeginObject();
    w.Key("request_id"); w.String(settled->request_id);
    w.Key("sandbox_id"); w.String(settled->sandbox_id);
    w.Key("native_id"); w.String(settled->native_id);
    w.Key("generation"); w.Int(settled->generation);
    w.Key("specification_digest"); w.String(settled->specification_digest);
    w.EndObject();
    w.EndObject();
  }
  if (unsupported) {
    w.Key("unsupported");
    w.BeginObject();
    w.Key("operation"); w.String(unsupported->operation);
    w.Key("reason"); w.String(unsupported->reason);
    w.EndObject();
  }
}

void WriteRecorded(Writer& w, const RecordedResponse& r, bool, std::string_view) {
  w.BeginObject();
  w.Key("id"); w.String(r.id);
  if (r.result) {
    w.Key("result");
    std::visit([&](const auto& v) { WriteResultBody(w, v); }, *r.result);
  }
  WriteOutcome(w, r.error_code, r.create_settled, r.unsupported);
  w.EndObject();
}

size_t PayloadHint(const Frame& f) {
  if (const Request* r = std::get_if<Request>(&f)) {
    if (const WriteFileArgs* a = std::get_if<WriteFileArgs>(&r->args)) {
      return json::Base64EncodedSize(a->content.size());
    }
    if (const ExecArgs* a = std::get_if<ExecArgs>(&r->args)) {
      return a->stdin_bytes ? json::Base64EncodedSize(a->stdin_bytes->size()) : 0;
    }
  }
  if (const Response* r = std::get_if<Response>(&f)) {
    if (r->raw_result) return r->raw_result->size();
    if (r->result) {
      if (const ReadFileResult* x = std::get_if<ReadFileResult>(&*r->result)) {
        return json::Base64EncodedSize(x->content.size());
      }
      if (const ExecResult* x = std::get_if<ExecResult>(&*r->result)) {
        return json::Base64EncodedSize(x->stdout_bytes.size()) +
               json::Base64EncodedSize(x->stderr_bytes.size());
      }
    }
  }
  return 0;
}

}  // namespace

std::string Encode(const Frame& frame) {
  Writer w;
  w.Reserve(1024 + PayloadHint(frame));
  std::visit(
      [&](const auto& f) {
        using T = std::decay_t<decltype(f)>;
        if constexpr (std::is_same_v<T, Hello>) {
          Header(w, FrameType::kHello);
          w.Key("node_id"); w.String(f.node_id);
          w.Key("installation_id"); w.String(f.installation_id);
          w.Key("provider"); w.String(f.provider);
          w.Key("backend_fingerprint"); w.String(f.backend_fingerprint);
          w.Key("deployment_generation"); w.Int(f.deployment_generation);
          w.Key("specification_digest"); w.String(f.specification_digest);
          w.Key("max_active"); w.Int(f.max_active);
          w.Key("max_retained"); w.Int(f.max_retained);
          w.Key("health"); WriteHealth(w, f.health);
          if (f.generation_management) {
            w.Key("generation_management"); w.Bool(true);
            w.Key("generations"); WriteObservations(w, f.generations);
          }
          w.EndObject();
        } else if constexpr (std::is_same_v<T, Welcome> || std::is_same_v<T, HeartbeatAck>) {
          Header(w, std::is_same_v<T, Welcome> ? FrameType::kWelcome : FrameType::kHeartbeatAck);
          w.Key("connection_id"); w.String(f.connection_id);
          w.Key("owner_epoch"); w.Int(f.owner_epoch);
          if (f.deployment) { w.Key("deployment"); WriteDeployment(w, *f.deployment); }
          w.EndObject();
        } else if constexpr (std::is_same_v<T, Heartbeat>) {
          Header(w, FrameType::kHeartbeat);
          w.Key("connection_id"); w.String(f.connection_id);
          w.Key("owner_epoch"); w.Int(f.owner_epoch);
          w.Key("health"); WriteHealth(w, f.health);
          if (f.generations) { w.Key("generations"); WriteObservations(w, *f.generations); }
          w.EndObject();
        } else if constexpr (std::is_same_v<T, Retention>) {
          WriteRetention(w, FrameType::kRetention, f.id, f.sequence, f.connection_id,
                         f.owner_epoch, f.entries, false);
        } else if constexpr (std::is_same_v<T, RetentionAck>) {
          WriteRetention(w, FrameType::kRetentionAck, f.id, f.sequence, f.connection_id,
                         f.owner_epoch, f.entries, true);
        } else if constexpr (std::is_same_v<T, Request>) {
          Header(w, FrameType::kRequest);
          w.Key("id"); w.String(f.id);
          w.Key("connection_id"); w.String(f.connection_id);
          w.Key("owner_epoch"); w.Int(f.owner_epoch);
          w.Key("sequence"); w.Int(f.sequence);
          w.Key("generation"); w.Int(f.generation);
          w.Key("operation");
          w.String(f.operation_name.empty() ? OperationName(f.operation) : f.operation_name);
          w.Key("timeout_ms"); w.Int(f.timeout_ms);
          w.Key("arguments"); WriteArguments(w, f.args);
          w.EndObject();
        } else {
          static_assert(std::is_same_v<T, Response>);
          Header(w, FrameType::kResponse);
          w.Key("id"); w.String(f.id);
          w.Key("connection_id"); w.String(f.connection_id);
          if (f.result) {
            w.Key("result");
            std::visit([&](const auto& v) { WriteResultBody(w, v); }, *f.result);
          } else if (f.raw_result) {
            w.Key("result"); w.Raw(*f.raw_result);
          }
          WriteOutcome(w, f.error_code, f.create_settled, f.unsupported);
          w.EndObject();
        }
      },
      frame);
  return w.Take();
}

std::string EncodeRecordedResponse(const RecordedResponse& r) {
  Writer w;
  WriteRecorded(w, r, false, {});
  return w.Take();
}

}  // namespace sn::wire
