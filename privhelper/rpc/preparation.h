// privhelper's preparation RPCs over its stores, apart from gRPC: the service in
// server.cc admits each call (permit table, one preparation at a time) and hands it here.
// Every answer is a typed PreparationResult: the §7 diagnostic of a failure (prep_failure.h;
// only transfer, checksum and provenance failures are runtime_download_failed) and the
// generation's state afterwards.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_PREPARATION_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_PREPARATION_H_

#include <functional>

#include "privhelper/importer.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/release_store.h"
#include "proto/privhelper.pb.h"

namespace sn::privhelper {

struct PreparationContext {
  store::GenerationStore* generations = nullptr;
  store::ReleaseStore* releases = nullptr;
  ImageImporter* importer = nullptr;
  // The provider's readiness probe (a repair ends READY only when it passes); OK or a
  // failure carrying the probe's diagnostic.
  std::function<absl::Status()> provider_ready;
};

v1::PreparationResult AdoptRelease(const PreparationContext& ctx, const v1::ReleaseMetadata& m);
v1::PreparationResult BeginPreparation(const PreparationContext& ctx,
                                       const v1::BeginPreparationRequest& r);
// `next` yields the stream's messages in order (false at its end): the header, then data
// chunks of at most kMaxPayloadChunkBytes. `cancelled` says, after the end, whether the stream
// ended without the client's half-close: nothing is then published and the bytes written are
// kept as the artifact's partial (ReleaseStore::Write), as after a `suspend` message (then OK).
v1::PreparationResult PutArtifact(const PreparationContext& ctx,
                                  const std::function<bool(v1::ArtifactUpload*)>& next,
                                  const std::function<bool()>& cancelled = nullptr);
v1::PreparationResult FinishPreparation(const PreparationContext& ctx,
                                        const v1::FinishPreparationRequest& r);

// The §7 diagnostic as its proto number (checked by tests/diagnostics against the fixture).
v1::Diagnostic DiagnosticToProto(Diagnostic d);

// Generations one answer reports at most (Probe, ListGenerations): their reports stay far
// below kMaxResponseMessageBytes.
inline constexpr int kMaxReportedGenerations = 4096;

v1::GenerationState ToProto(store::GenerationState s);
void ToProto(const store::GenerationStatus& s, v1::GenerationReport* out);
// The proto form of the store's statuses (Probe).
void AddGenerationReports(const store::GenerationStore& generations, v1::ProbeResponse* out);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_PREPARATION_H_
