// One preparation attempt of one generation, start to end, as blocking steps (the
// preparation worker runs it off the event loop; `agent enroll` runs it in place):
//   1. GET the configuration route for exactly this generation (credentialed); the bytes must
//      hash to the digest Core announced and decode as this generation's specification for
//      the node's provider (else configuration_invalid).
//   2. GET /releases/<spec.runtime.source>/manifest.json, manifest.json.sig and SHA256SUMS and
//      verify them with the node's release key (common/release/verify.h: provenance);
//      the specification must agree with the verified manifest (configuration_invalid). From
//      here on every download is pinned to that manifest: artifacts are fetched from the
//      specification's source by name and checked against the manifest's size and SHA-256,
//      whatever /releases/current says meanwhile (it is never read).
//   3. Store the verified specification locally (context.store_specification).
//   4. privhelper: AdoptRelease (it verifies the metadata again with its own key), then
//      BeginPreparation, which lists the artifacts its store lacks.
//   5. For each of them: stream GET /releases/<source>/<name> straight into PutArtifact
//      (never whole in memory), counting the bytes: a body that exceeds the declared size is
//      refused before the excess is sent, a short one is a checksum failure; a refusal or a
//      cancellation aborts the stream, so privhelper never sees a clean end of it. The SHA-256
//      of the whole file is privhelper's check alone (it answers runtime_download_failed for
//      other bytes and publishes nothing; docs/protocol.md 17d).
//   6. FinishPreparation: privhelper imports, resolves and publishes the generation.
// Failure classes stay typed end to end (docs/protocol.md, node-side decisions): only
// transfer, checksum and provenance failures (release::FailureClassOf) become
// runtime_download_failed; privhelper's answers keep their own code; a cancelled token is
// preparation_cancelled; nothing parses text. The first failure ends the attempt.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_PREPARE_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_PREPARE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "agent/connection/cancel_token.h"
#include "agent/generations/prepare_seams.h"
#include "agent/generations/types.h"
#include "common/release/ed25519.h"

namespace sn::agent {

struct PreparationContext {
  CoreDownloads* core = nullptr;
  PrivhelperPreparation* privhelper = nullptr;
  const release::PublicKey* release_key = nullptr;  // the agent's configured key
  std::string provider;                             // the node's provider
  // Persists the verified specification (generations/<G>.spec.json) before privhelper sees
  // it; a failure ends the attempt as provider_unavailable. May be empty.
  std::function<absl::Status(int64_t generation, const std::string& bytes)>
      store_specification;
};

// Progress is reported from the calling thread: at each phase and while artifacts stream.
using ProgressFn = std::function<void(const PreparationProgress&)>;

PreparationOutcome RunPreparation(const PreparationContext& context, const GenerationRef& ref,
                                  CancelToken* cancel, const ProgressFn& progress);

// The route of generation `g`'s specification: /api/v1/sandbox-node/configuration?generation=g.
std::string ConfigurationTarget(int64_t generation);
// /releases/<source>/<name>.
std::string ReleaseTarget(const std::string& source, std::string_view name);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_PREPARE_H_
