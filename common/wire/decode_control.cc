// Decoders of the control frames and their nested objects (spec/wire.md §3).
#include <cstdint>
#include <string_view>

#include "common/wire/decoders.h"
#include "common/wire/limits.h"
#include "common/wire/validate.h"

namespace sn::wire::internal {
namespace {

using json::Reader;

absl::Status DecodeHost(Reader& r, const Path& p, HostMetrics* h) {
  static constexpr std::string_view kNames[] = {
      "cpu_cores",        "load_1m",          "memory_total_bytes", "memory_available_bytes",
      "disk_total_bytes", "disk_available_bytes", "sandboxes_active", "sandboxes_retained"};
  MemberTable t(p, kNames);
  int64_t* nonneg[] = {&h->memory_total_bytes, &h->memory_available_bytes, &h->disk_total_bytes,
                       &h->disk_available_bytes, &h->sandboxes_active, &h->sandboxes_retained};
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    if (i == 0) {
      ASSIGN_OR_RETURN(h->cpu_cores, ReadInt64InRange(v, mp, 1, INT64_MAX));
    } else if (i == 1) {
      ASSIGN_OR_RETURN(json::ValueType ty, v.Peek());
      if (ty == json::ValueType::kNull) return Invalid(mp, "null is not allowed");
      if (ty != json::ValueType::kNumber) return Invalid(mp, "not a number");
      ASSIGN_OR_RETURN(std::string_view text, v.Number());
      if (!IsLoadAverage(text)) {
        return Invalid(mp, "not a load average ((0|[1-9][0-9]{0,6})(.[0-9]{1,6})?)");
      }
      h->load_1m = std::string(text);
    } else {
      ASSIGN_OR_RETURN(*nonneg[i - 2], ReadInt64InRange(v, mp, 0, INT64_MAX));
    }
    return absl::OkStatus();
  }));
  return t.Require({0, 1, 2, 3, 4, 5, 6, 7});
}

absl::Status DecodeActiveOperation(Reader& r, const Path& p, ActiveOperation* a) {
  static constexpr std::string_view kNames[] = {"id", "operation", "state"};
  static constexpr std::string_view kStates[] = {"queued", "running"};
  MemberTable t(p, kNames);
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: { ASSIGN_OR_RETURN(a->id, ReadUuid(v, mp)); break; }
      case 1: { ASSIGN_OR_RETURN(a->operation, ReadCode(v, mp)); break; }
      default: {
        ASSIGN_OR_RETURN(int s, ReadEnum(v, mp, kStates));
        a->state = s == 0 ? ActiveState::kQueued : ActiveState::kRunning;
      }
    }
    return absl::OkStatus();
  }));
  return t.Require({0, 1, 2});
}

// `generation_managing`: the sender reports readiness per generation, so provider_ready must
// be absent; otherwise it is required.
absl::Status DecodeHealth(Reader& r, const Path& p, bool generation_managing, Health* h) {
  static constexpr std::string_view kNames[] = {"provider_ready", "diagnostic", "observed_at",
                                                "active_operations", "host"};
  MemberTable t(p, kNames);
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: { ASSIGN_OR_RETURN(h->provider_ready, ReadBool(v, mp)); break; }
      case 1: { ASSIGN_OR_RETURN(h->diagnostic, ReadCode(v, mp)); break; }
      case 2: { ASSIGN_OR_RETURN(h->observed_at, ReadTimestamp(v, mp)); break; }
      case 3:
        return ForEachElement(v, mp, 0, kMaxActiveOperations, [&](Reader& e, const Path& ep) {
          h->active_operations.emplace_back();
          return DecodeActiveOperation(e, ep, &h->active_operations.back());
        });
      default: return DecodeHost(v, mp, &h->host);
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({2, 3, 4}));
  if (generation_managing && t.Has(0)) {
    return Invalid(p, "provider_ready must be absent for a generation-managing node");
  }
  if (!generation_managing && !t.Has(0)) {
    return Invalid(p, "missing member 'provider_ready' (required without generation management)");
  }
  const bool want_diagnostic = h->provider_ready.has_value() && !*h->provider_ready;
  if (want_diagnostic && !t.Has(1)) return Invalid(p, "missing member 'diagnostic' (provider not ready)");
  if (!want_diagnostic && t.Has(1)) {
    return Invalid(p, "diagnostic is allowed only when provider_ready is false");
  }
  return absl::OkStatus();
}

absl::Status DecodeObservation(Reader& r, const Path& p, Observation* o) {
  static constexpr std::string_view kNames[] = {"generation", "specification_digest", "state",
                                                "diagnostic"};
  static constexpr std::string_view kStates[] = {"ready", "preparing", "failed"};
  MemberTable t(p, kNames);
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: { ASSIGN_OR_RETURN(o->generation, ReadPositive(v, mp)); break; }
      case 1: { ASSIGN_OR_RETURN(o->specification_digest, ReadDigest(v, mp)); break; }
      case 2: {
        ASSIGN_OR_RETURN(int s, ReadEnum(v, mp, kStates));
        o->state = static_cast<GenerationState>(s);
        break;
      }
      default: { ASSIGN_OR_RETURN(o->diagnostic, ReadCode(v, mp)); }
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({0, 1, 2}));
  if (o->state == GenerationState::kReady && o->diagnostic) {
    return Invalid(p, "diagnostic must be absent when state is \"ready\"");
  }
  return absl::OkStatus();
}

absl::Status DecodeObservations(Reader& r, const Path& p, std::vector<Observation>* out) {
  return ForEachElement(r, p, 0, kMaxGenerationObservations, [&](Reader& e, const Path& ep) {
    out->emplace_back();
    return DecodeObservation(e, ep, &out->back());
  });
}

absl::Status DecodeDeployment(Reader& r, const Path& p, Deployment* d) {
  static constexpr std::string_view kNames[] = {"generation", "specification_digest",
                                                "serving_generation"};
  MemberTable t(p, kNames);
  RETURN_IF_ERROR(ForEachMember(r, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 0: { ASSIGN_OR_RETURN(d->generation, ReadPositive(v, mp)); break; }
      case 1: { ASSIGN_OR_RETURN(d->specification_digest, ReadDigest(v, mp)); break; }
      default: {
        ASSIGN_OR_RETURN(json::ValueType ty, v.Peek());
        if (ty == json::ValueType::kNull) {
          RETURN_IF_ERROR(v.Null());
          d->serving_generation.reset();
        } else {
          ASSIGN_OR_RETURN(d->serving_generation, ReadPositive(v, mp));
        }
      }
    }
    return absl::OkStatus();
  }));
  return t.Require({0, 1, 2});
}

absl::Status DecodeRetentionEntries(Reader& r, const Path& p, bool ack,
                                    std::vector<RetentionEntry>* out) {
  RETURN_IF_ERROR(ForEachElement(
      r, p, kMinRetentionEntries, kMaxRetentionEntries, [&](Reader& e, const Path& ep) {
        static constexpr std::string_view kNames[] = {"generation", "specification_digest",
                                                      "keep"};
        // `keep` is an unknown member in a retention request.
        MemberTable t(ep, absl::Span<const std::string_view>(kNames, ack ? 3 : 2));
        RetentionEntry entry;
        RETURN_IF_ERROR(ForEachMember(e, ep, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
          switch (i) {
            case 0: { ASSIGN_OR_RETURN(entry.generation, ReadPositive(v, mp)); break; }
            case 1: { ASSIGN_OR_RETURN(entry.specification_digest, ReadDigest(v, mp)); break; }
            default: { ASSIGN_OR_RETURN(entry.keep, ReadBool(v, mp)); }
          }
          return absl::OkStatus();
        }));
        RETURN_IF_ERROR(ack ? t.Require({0, 1, 2}) : t.Require({0, 1}));
        out->push_back(std::move(entry));
        return absl::OkStatus();
      }));
  if (!ack) {
    for (size_t i = 0; i < out->size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if ((*out)[i].generation == (*out)[j].generation &&
            (*out)[i].specification_digest == (*out)[j].specification_digest) {
          return Invalid(p, "entries are not unique pairs");
        }
      }
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<T> DecodeRetentionLike(const std::vector<RawMember>& m, std::string_view type,
                                      bool ack) {
  static constexpr std::string_view kNames[] = {"type",          "version",     "id", "sequence",
                                                "connection_id", "owner_epoch", "entries"};
  const Path p = Root(type);
  MemberTable t(p, kNames);
  T out;
  RETURN_IF_ERROR(ForEachRawMember(m, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 2: { ASSIGN_OR_RETURN(out.id, ReadUuid(v, mp)); break; }
      case 3: { ASSIGN_OR_RETURN(out.sequence, ReadPositive(v, mp)); break; }
      case 4: { ASSIGN_OR_RETURN(out.connection_id, ReadUuid(v, mp)); break; }
      case 5: { ASSIGN_OR_RETURN(out.owner_epoch, ReadPositive(v, mp)); break; }
      case 6: return DecodeRetentionEntries(v, mp, ack, &out.entries);
      default: break;
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({2, 3, 4, 5, 6}));
  return out;
}

}  // namespace

absl::StatusOr<Hello> DecodeHello(const std::vector<RawMember>& m) {
  static constexpr std::string_view kNames[] = {
      "type",       "version",      "node_id",      "installation_id",
      "provider",   "backend_fingerprint", "deployment_generation", "specification_digest",
      "max_active", "max_retained", "health",       "generation_management",
      "generations"};
  const Path p = Root("hello");
  MemberTable t(p, kNames);
  Hello h;
  // generation_management decides what health must hold; it may come after health.
  RETURN_IF_ERROR(ForEachRawMember(m, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 2: { ASSIGN_OR_RETURN(h.node_id, ReadUuid(v, mp)); break; }
      case 3: { ASSIGN_OR_RETURN(h.installation_id, ReadUuid(v, mp)); break; }
      case 4: { ASSIGN_OR_RETURN(h.provider, ReadCode(v, mp)); break; }
      case 5: { ASSIGN_OR_RETURN(h.backend_fingerprint,
                         ReadBoundedString(v, mp, kMaxBackendFingerprintBytes)); break; }
      case 6: { ASSIGN_OR_RETURN(h.deployment_generation, ReadPositive(v, mp)); break; }
      case 7: { ASSIGN_OR_RETURN(h.specification_digest, ReadDigest(v, mp)); break; }
      case 8: { ASSIGN_OR_RETURN(h.max_active, ReadInt64InRange(v, mp, kMinMaxActive, kMaxMaxActive)); break; }
      case 9: { ASSIGN_OR_RETURN(h.max_retained, ReadInt64InRange(v, mp, kMinMaxRetained, kMaxMaxRetained)); break; }
      case 10: break;  // decoded below, once generation_management is known
      case 11: RETURN_IF_ERROR(ReadTrue(v, mp)); h.generation_management = true; break;
      case 12: return DecodeObservations(v, mp, &h.generations);
      default: break;
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({2, 3, 4, 5, 6, 7, 8, 9, 10}));
  if (t.Has(11) != t.Has(12)) {
    return Invalid(p, "generations must be present exactly when generation_management is");
  }
  for (const RawMember& rm : m) {
    if (rm.name != "health") continue;
    Reader v(rm.raw, 1);
    const Path hp = p.Member("health");
    RETURN_IF_ERROR(DecodeHealth(v, hp, h.generation_management, &h.health));
  }
  return h;
}

absl::StatusOr<Welcome> DecodeWelcome(const std::vector<RawMember>& m) {
  static constexpr std::string_view kNames[] = {"type", "version", "connection_id", "owner_epoch",
                                                "deployment"};
  const Path p = Root("welcome");
  MemberTable t(p, kNames);
  Welcome w;
  RETURN_IF_ERROR(ForEachRawMember(m, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 2: { ASSIGN_OR_RETURN(w.connection_id, ReadUuid(v, mp)); break; }
      case 3: { ASSIGN_OR_RETURN(w.owner_epoch, ReadPositive(v, mp)); break; }
      case 4: w.deployment.emplace(); return DecodeDeployment(v, mp, &*w.deployment);
      default: break;
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({2, 3}));
  return w;
}

absl::StatusOr<Heartbeat> DecodeHeartbeat(const std::vector<RawMember>& m) {
  static constexpr std::string_view kNames[] = {"type",   "version",    "connection_id",
                                                "owner_epoch", "health", "generations"};
  const Path p = Root("heartbeat");
  MemberTable t(p, kNames);
  Heartbeat hb;
  RETURN_IF_ERROR(ForEachRawMember(m, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 2: { ASSIGN_OR_RETURN(hb.connection_id, ReadUuid(v, mp)); break; }
      case 3: { ASSIGN_OR_RETURN(hb.owner_epoch, ReadPositive(v, mp)); break; }
      case 5: hb.generations.emplace(); return DecodeObservations(v, mp, &*hb.generations);
      default: break;
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({2, 3, 4}));
  for (const RawMember& rm : m) {
    if (rm.name != "health") continue;
    Reader v(rm.raw, 1);
    const Path hp = p.Member("health");
    RETURN_IF_ERROR(DecodeHealth(v, hp, hb.generations.has_value(), &hb.health));
  }
  return hb;
}

absl::StatusOr<HeartbeatAck> DecodeHeartbeatAck(const std::vector<RawMember>& m) {
  static constexpr std::string_view kNames[] = {"type", "version", "connection_id", "owner_epoch",
                                                "deployment"};
  const Path p = Root("heartbeat_ack");
  MemberTable t(p, kNames);
  HeartbeatAck a;
  RETURN_IF_ERROR(ForEachRawMember(m, p, t, [&](int i, Reader& v, const Path& mp) -> absl::Status {
    switch (i) {
      case 2: { ASSIGN_OR_RETURN(a.connection_id, ReadUuid(v, mp)); break; }
      case 3: { ASSIGN_OR_RETURN(a.owner_epoch, ReadPositive(v, mp)); break; }
      case 4: a.deployment.emplace(); return DecodeDeployment(v, mp, &*a.deployment);
      default: break;
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(t.Require({2, 3}));
  return a;
}

absl::StatusOr<Retention> DecodeRetention(const std::vector<RawMember>& m) {
  return DecodeRetentionLike<Retention>(m, "retention", /*ack=*/false);
}

absl::StatusOr<RetentionAck> DecodeRetentionAck(const std::vector<RawMember>& m) {
  return DecodeRetentionLike<RetentionAck>(m, "retention_ack", /*ack=*/true);
}

}  // namespace sn::wire::internal
