// Decoders of the control frames and their nested objects (spec/wire.md §3).
#include <cstdint>
#include <string_view>

#include "common/wire/decoders.h"
#include "common/wire/limits.h"
#include "common/wire/validate.h"

namespace sn::wire::internal {
namespace {

using json::Reader;

// The members of each object, in the order of spec/wire.md §3 (the order only decides the order
// in which missing members are listed).
#define SN_HOST_MEMBERS(M)                                                                    \
  M(kCpuCores, "cpu_cores") M(kLoad1m, "load_1m") M(kMemoryTotalBytes, "memory_total_bytes")  \
  M(kMemoryAvailableBytes, "memory_available_bytes") M(kDiskTotalBytes, "disk_total_bytes")   \
  M(kDiskAvailableBytes, "disk_available_bytes") M(kSandboxesActive, "sandboxes_active")      \
  M(kSandboxesRetained, "sandboxes_retained")
SN_WIRE_MEMBERS(HostMember, SN_HOST_MEMBERS)

#define SN_ACTIVE_OPERATION_MEMBERS(M) M(kId, "id") M(kOperation, "operation") M(kState, "state")
SN_WIRE_MEMBERS(ActiveOperationMember, SN_ACTIVE_OPERATION_MEMBERS)

#define SN_HEALTH_MEMBERS(M)                                                          \
  M(kProviderReady, "provider_ready") M(kDiagnostic, "diagnostic")                    \
  M(kObservedAt, "observed_at") M(kActiveOperations, "active_operations") M(kHost, "host")
SN_WIRE_MEMBERS(HealthMember, SN_HEALTH_MEMBERS)

#define SN_OBSERVATION_MEMBERS(M)                                                        \
  M(kGeneration, "generation") M(kSpecificationDigest, "specification_digest")           \
  M(kState, "state") M(kDiagnostic, "diagnostic")
SN_WIRE_MEMBERS(ObservationMember, SN_OBSERVATION_MEMBERS)

#define SN_DEPLOYMENT_MEMBERS(M)                                                         \
  M(kGeneration, "generation") M(kSpecificationDigest, "specification_digest")           \
  M(kServingGeneration, "serving_generation")
SN_WIRE_MEMBERS(DeploymentMember, SN_DEPLOYMENT_MEMBERS)

// `keep` last: a retention request's entries accept the members before it only.
#define SN_RETENTION_ENTRY_MEMBERS(M)                                                    \
  M(kGeneration, "generation") M(kSpecificationDigest, "specification_digest")           \
  M(kKeep, "keep")
SN_WIRE_MEMBERS(RetentionEntryMember, SN_RETENTION_ENTRY_MEMBERS)

// The frames' members; codec.cc checks `type` and `version`, their decoders accept them.
#define SN_RETENTION_MEMBERS(M)                                                          \
  M(kType, "type") M(kVersion, "version") M(kId, "id") M(kSequence, "sequence")          \
  M(kConnectionId, "connection_id") M(kOwnerEpoch, "owner_epoch") M(kEntries, "entries")
SN_WIRE_MEMBERS(RetentionMember, SN_RETENTION_MEMBERS)

#define SN_HELLO_MEMBERS(M)                                                              \
  M(kType, "type") M(kVersion, "version") M(kNodeId, "node_id")                          \
  M(kInstallationId, "installation_id") M(kProvider, "provider")                         \
  M(kBackendFingerprint, "backend_fingerprint")                                          \
  M(kDeploymentGeneration, "deployment_generation")                                      \
  M(kSpecificationDigest, "specification_digest") M(kMaxActive, "max_active")            \
  M(kMaxRetained, "max_retained") M(kHealth, "health")                                   \
  M(kGenerationManagement, "generation_management") M(kGenerations, "generations")
SN_WIRE_MEMBERS(HelloMember, SN_HELLO_MEMBERS)

// welcome and heartbeat_ack.
#define SN_WELCOME_MEMBERS(M)                                                            \
  M(kType, "type") M(kVersion, "version") M(kConnectionId, "connection_id")              \
  M(kOwnerEpoch, "owner_epoch") M(kDeployment, "deployment")
SN_WIRE_MEMBERS(WelcomeMember, SN_WELCOME_MEMBERS)

#define SN_HEARTBEAT_MEMBERS(M)                                                          \
  M(kType, "type") M(kVersion, "version") M(kConnectionId, "connection_id")              \
  M(kOwnerEpoch, "owner_epoch") M(kHealth, "health") M(kGenerations, "generations")
SN_WIRE_MEMBERS(HeartbeatMember, SN_HEARTBEAT_MEMBERS)

absl::Status DecodeHost(Reader& r, const Path& p, HostMetrics* h) {
  using enum HostMember;
  Members<HostMember> t(p);
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](HostMember m, Reader& v, const Path& mp) -> absl::Status {
        int64_t* nonneg = nullptr;
        switch (m) {
          case kCpuCores: {
            ASSIGN_OR_RETURN(h->cpu_cores, ReadInt64InRange(v, mp, 1, INT64_MAX));
            return absl::OkStatus();
          }
          case kLoad1m: {
            ASSIGN_OR_RETURN(json::ValueType ty, v.Peek());
            if (ty == json::ValueType::kNull) return Invalid(mp, "null is not allowed");
            if (ty != json::ValueType::kNumber) return Invalid(mp, "not a number");
            ASSIGN_OR_RETURN(std::string_view text, v.Number());
            if (!IsLoadAverage(text)) {
              return Invalid(mp, "not a load average ((0|[1-9][0-9]{0,6})(.[0-9]{1,6})?)");
            }
            h->load_1m = std::string(text);
            return absl::OkStatus();
          }
          case kMemoryTotalBytes: nonneg = &h->memory_total_bytes; break;
          case kMemoryAvailableBytes: nonneg = &h->memory_available_bytes; break;
          case kDiskTotalBytes: nonneg = &h->disk_total_bytes; break;
          case kDiskAvailableBytes: nonneg = &h->disk_available_bytes; break;
          case kSandboxesActive: nonneg = &h->sandboxes_active; break;
          case kSandboxesRetained: nonneg = &h->sandboxes_retained; break;
        }
        ASSIGN_OR_RETURN(*nonneg, ReadInt64InRange(v, mp, 0, INT64_MAX));
        return absl::OkStatus();
      }));
  return t.Require({kCpuCores, kLoad1m, kMemoryTotalBytes, kMemoryAvailableBytes, kDiskTotalBytes,
                    kDiskAvailableBytes, kSandboxesActive, kSandboxesRetained});
}

absl::Status DecodeActiveOperation(Reader& r, const Path& p, ActiveOperation* a) {
  using enum ActiveOperationMember;
  static constexpr std::string_view kStates[] = {"queued", "running"};
  Members<ActiveOperationMember> t(p);
  RETURN_IF_ERROR(ForEachMember(
      r, p, t, [&](ActiveOperationMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kId: {
            ASSIGN_OR_RETURN(a->id, ReadUuid(v, mp));
            break;
          }
          case kOperation: {
            ASSIGN_OR_RETURN(a->operation, ReadCode(v, mp));
            break;
          }
          case kState: {
            ASSIGN_OR_RETURN(int s, ReadEnum(v, mp, kStates));
            a->state = s == 0 ? ActiveState::kQueued : ActiveState::kRunning;
            break;
          }
        }
        return absl::OkStatus();
      }));
  return t.Require({kId, kOperation, kState});
}

// `generation_managing`: the sender reports readiness per generation, so provider_ready must
// be absent; otherwise it is required.
absl::Status DecodeHealth(Reader& r, const Path& p, bool generation_managing, Health* h) {
  using enum HealthMember;
  Members<HealthMember> t(p);
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](HealthMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kProviderReady: {
            ASSIGN_OR_RETURN(h->provider_ready, ReadBool(v, mp));
            break;
          }
          case kDiagnostic: {
            ASSIGN_OR_RETURN(h->diagnostic, ReadCode(v, mp));
            break;
          }
          case kObservedAt: {
            ASSIGN_OR_RETURN(h->observed_at, ReadTimestamp(v, mp));
            break;
          }
          case kActiveOperations:
            return ForEachElement(v, mp, 0, kMaxActiveOperations, [&](Reader& e, const Path& ep) {
              h->active_operations.emplace_back();
              return DecodeActiveOperation(e, ep, &h->active_operations.back());
            });
          case kHost: return DecodeHost(v, mp, &h->host);
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kObservedAt, kActiveOperations, kHost}));
  if (generation_managing && t.Has(kProviderReady)) {
    return Invalid(p, "provider_ready must be absent for a generation-managing node");
  }
  if (!generation_managing && !t.Has(kProviderReady)) {
    return Invalid(p, "missing member 'provider_ready' (required without generation management)");
  }
  const bool want_diagnostic = h->provider_ready.has_value() && !*h->provider_ready;
  if (want_diagnostic && !t.Has(kDiagnostic)) {
    return Invalid(p, "missing member 'diagnostic' (provider not ready)");
  }
  if (!want_diagnostic && t.Has(kDiagnostic)) {
    return Invalid(p, "diagnostic is allowed only when provider_ready is false");
  }
  return absl::OkStatus();
}

absl::Status DecodeObservation(Reader& r, const Path& p, Observation* o) {
  using enum ObservationMember;
  static constexpr std::string_view kStates[] = {"ready", "preparing", "failed"};
  Members<ObservationMember> t(p);
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](ObservationMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kGeneration: {
            ASSIGN_OR_RETURN(o->generation, ReadPositive(v, mp));
            break;
          }
          case kSpecificationDigest: {
            ASSIGN_OR_RETURN(o->specification_digest, ReadDigest(v, mp));
            break;
          }
          case kState: {
            ASSIGN_OR_RETURN(int s, ReadEnum(v, mp, kStates));
            o->state = static_cast<GenerationState>(s);
            break;
          }
          case kDiagnostic: {
            ASSIGN_OR_RETURN(o->diagnostic, ReadCode(v, mp));
            break;
          }
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kGeneration, kSpecificationDigest, kState}));
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
  using enum DeploymentMember;
  Members<DeploymentMember> t(p);
  RETURN_IF_ERROR(
      ForEachMember(r, p, t, [&](DeploymentMember m, Reader& v, const Path& mp) -> absl::Status {
        switch (m) {
          case kGeneration: {
            ASSIGN_OR_RETURN(d->generation, ReadPositive(v, mp));
            break;
          }
          case kSpecificationDigest: {
            ASSIGN_OR_RETURN(d->specification_digest, ReadDigest(v, mp));
            break;
          }
          case kServingGeneration: {
            ASSIGN_OR_RETURN(json::ValueType ty, v.Peek());
            if (ty == json::ValueType::kNull) {
              RETURN_IF_ERROR(v.Null());
              d->serving_generation.reset();
            } else {
              ASSIGN_OR_RETURN(d->serving_generation, ReadPositive(v, mp));
            }
            break;
          }
        }
        return absl::OkStatus();
      }));
  return t.Require({kGeneration, kSpecificationDigest, kServingGeneration});
}

absl::Status DecodeRetentionEntries(Reader& r, const Path& p, bool ack,
                                    std::vector<RetentionEntry>* out) {
  RETURN_IF_ERROR(ForEachElement(
      r, p, kMinRetentionEntries, kMaxRetentionEntries, [&](Reader& e, const Path& ep) {
        using enum RetentionEntryMember;
        // `keep` is an unknown member in a retention request.
        Members<RetentionEntryMember> t(ep, ack ? kKeep : kSpecificationDigest);
        RetentionEntry entry;
        RETURN_IF_ERROR(ForEachMember(
            e, ep, t, [&](RetentionEntryMember m, Reader& v, const Path& mp) -> absl::Status {
              switch (m) {
                case kGeneration: {
                  ASSIGN_OR_RETURN(entry.generation, ReadPositive(v, mp));
                  break;
                }
                case kSpecificationDigest: {
                  ASSIGN_OR_RETURN(entry.specification_digest, ReadDigest(v, mp));
                  break;
                }
                case kKeep: {
                  ASSIGN_OR_RETURN(entry.keep, ReadBool(v, mp));
                  break;
                }
              }
              return absl::OkStatus();
            }));
        RETURN_IF_ERROR(ack ? t.Require({kGeneration, kSpecificationDigest, kKeep})
                            : t.Require({kGeneration, kSpecificationDigest}));
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
  using enum RetentionMember;
  const Path p = Root(type);
  Members<RetentionMember> t(p);
  T out;
  RETURN_IF_ERROR(
      ForEachRawMember(m, p, t, [&](RetentionMember rm, Reader& v, const Path& mp) -> absl::Status {
        switch (rm) {
          case kType:
          case kVersion: break;
          case kId: {
            ASSIGN_OR_RETURN(out.id, ReadUuid(v, mp));
            break;
          }
          case kSequence: {
            ASSIGN_OR_RETURN(out.sequence, ReadPositive(v, mp));
            break;
          }
          case kConnectionId: {
            ASSIGN_OR_RETURN(out.connection_id, ReadUuid(v, mp));
            break;
          }
          case kOwnerEpoch: {
            ASSIGN_OR_RETURN(out.owner_epoch, ReadPositive(v, mp));
            break;
          }
          case kEntries: return DecodeRetentionEntries(v, mp, ack, &out.entries);
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kId, kSequence, kConnectionId, kOwnerEpoch, kEntries}));
  return out;
}

}  // namespace

absl::StatusOr<Hello> DecodeHello(const std::vector<RawMember>& m) {
  using enum HelloMember;
  const Path p = Root("hello");
  Members<HelloMember> t(p);
  Hello h;
  // generation_management decides what health must hold; it may come after health.
  RETURN_IF_ERROR(
      ForEachRawMember(m, p, t, [&](HelloMember hm, Reader& v, const Path& mp) -> absl::Status {
        switch (hm) {
          case kType:
          case kVersion: break;
          case kNodeId: {
            ASSIGN_OR_RETURN(h.node_id, ReadUuid(v, mp));
            break;
          }
          case kInstallationId: {
            ASSIGN_OR_RETURN(h.installation_id, ReadUuid(v, mp));
            break;
          }
          case kProvider: {
            ASSIGN_OR_RETURN(h.provider, ReadCode(v, mp));
            break;
          }
          case kBackendFingerprint: {
            ASSIGN_OR_RETURN(h.backend_fingerprint,
                             ReadBoundedString(v, mp, kMaxBackendFingerprintBytes));
            break;
          }
          case kDeploymentGeneration: {
            ASSIGN_OR_RETURN(h.deployment_generation, ReadPositive(v, mp));
            break;
          }
          case kSpecificationDigest: {
            ASSIGN_OR_RETURN(h.specification_digest, ReadDigest(v, mp));
            break;
          }
          case kMaxActive: {
            ASSIGN_OR_RETURN(h.max_active, ReadInt64InRange(v, mp, kMinMaxActive, kMaxMaxActive));
            break;
          }
          case kMaxRetained: {
            ASSIGN_OR_RETURN(h.max_retained,
                             ReadInt64InRange(v, mp, kMinMaxRetained, kMaxMaxRetained));
            break;
          }
          case kHealth: break;  // decoded below, once generation_management is known
          case kGenerationManagement:
            RETURN_IF_ERROR(ReadTrue(v, mp));
            h.generation_management = true;
            break;
          case kGenerations: return DecodeObservations(v, mp, &h.generations);
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kNodeId, kInstallationId, kProvider, kBackendFingerprint,
                             kDeploymentGeneration, kSpecificationDigest, kMaxActive,
                             kMaxRetained, kHealth}));
  if (t.Has(kGenerationManagement) != t.Has(kGenerations)) {
    return Invalid(p, "generations must be present exactly when generation_management is");
  }
  for (const RawMember& rm : m) {
    if (rm.name != t.name(kHealth)) continue;
    Reader v(rm.raw, 1);
    const Path hp = p.Member(t.name(kHealth));
    RETURN_IF_ERROR(DecodeHealth(v, hp, h.generation_management, &h.health));
  }
  return h;
}

namespace {

// welcome and heartbeat_ack carry the same members (spec §3): the connection's identity and,
// for a generation-managing node, the deployment.
template <typename T>
absl::StatusOr<T> DecodeWelcomeLike(const std::vector<RawMember>& m, std::string_view type) {
  using enum WelcomeMember;
  const Path p = Root(type);
  Members<WelcomeMember> t(p);
  T w;
  RETURN_IF_ERROR(
      ForEachRawMember(m, p, t, [&](WelcomeMember wm, Reader& v, const Path& mp) -> absl::Status {
        switch (wm) {
          case kType:
          case kVersion: break;
          case kConnectionId: {
            ASSIGN_OR_RETURN(w.connection_id, ReadUuid(v, mp));
            break;
          }
          case kOwnerEpoch: {
            ASSIGN_OR_RETURN(w.owner_epoch, ReadPositive(v, mp));
            break;
          }
          case kDeployment: w.deployment.emplace(); return DecodeDeployment(v, mp, &*w.deployment);
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kConnectionId, kOwnerEpoch}));
  return w;
}

}  // namespace

absl::StatusOr<Welcome> DecodeWelcome(const std::vector<RawMember>& m) {
  return DecodeWelcomeLike<Welcome>(m, "welcome");
}

absl::StatusOr<Heartbeat> DecodeHeartbeat(const std::vector<RawMember>& m) {
  using enum HeartbeatMember;
  const Path p = Root("heartbeat");
  Members<HeartbeatMember> t(p);
  Heartbeat hb;
  // generations decides what health must hold; it may come after health.
  RETURN_IF_ERROR(
      ForEachRawMember(m, p, t, [&](HeartbeatMember hm, Reader& v, const Path& mp) -> absl::Status {
        switch (hm) {
          case kType:
          case kVersion: break;
          case kConnectionId: {
            ASSIGN_OR_RETURN(hb.connection_id, ReadUuid(v, mp));
            break;
          }
          case kOwnerEpoch: {
            ASSIGN_OR_RETURN(hb.owner_epoch, ReadPositive(v, mp));
            break;
          }
          case kHealth: break;  // decoded below, once generations is known
          case kGenerations:
            hb.generations.emplace();
            return DecodeObservations(v, mp, &*hb.generations);
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(t.Require({kConnectionId, kOwnerEpoch, kHealth}));
  for (const RawMember& rm : m) {
    if (rm.name != t.name(kHealth)) continue;
    Reader v(rm.raw, 1);
    const Path hp = p.Member(t.name(kHealth));
    RETURN_IF_ERROR(DecodeHealth(v, hp, hb.generations.has_value(), &hb.health));
  }
  return hb;
}

absl::StatusOr<HeartbeatAck> DecodeHeartbeatAck(const std::vector<RawMember>& m) {
  return DecodeWelcomeLike<HeartbeatAck>(m, "heartbeat_ack");
}

absl::StatusOr<Retention> DecodeRetention(const std::vector<RawMember>& m) {
  return DecodeRetentionLike<Retention>(m, "retention", /*ack=*/false);
}

absl::StatusOr<RetentionAck> DecodeRetentionAck(const std::vector<RawMember>& m) {
  return DecodeRetentionLike<RetentionAck>(m, "retention_ack", /*ack=*/true);
}

}  // namespace sn::wire::internal
