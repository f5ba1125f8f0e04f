// The two records of a generation's collection (requirements "Preparation and collection
// records"; docs/formats.md), in <state_dir>/node/generations/:
//   <g>.collecting  the collection journal, durable before the first deletion: installation,
//                   generation, digest, source, whether its import may have started, the
//                   release files it removes with their checksums, and native_done (the
//                   backend's native cleanup finished; rewritten true before any release file
//                   is removed, so a retry never runs an already removed helper)
//   <g>.dropped     the digest-bound dropped marker, durable after the file cleanup and
//                   before the journal is removed; write-once
// Both are private records (durable.h). A dropped generation is never prepared, adopted or
// used again.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_COLLECTION_RECORDS_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_COLLECTION_RECORDS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "privhelper/store/plan.h"

namespace sn::privhelper::store {

struct CollectionJournal {
  std::string installation_id;
  int64_t generation = 0;
  std::string specification_digest;
  std::string source;  // "" when the records name no release (then no files)
  bool import_started = false;
  std::vector<PlannedArtifact> files;  // the release files this collection removes
  bool native_done = false;
  bool operator==(const CollectionJournal&) const = default;
};

struct DroppedMarker {
  std::string installation_id;
  int64_t generation = 0;
  std::string specification_digest;
  bool operator==(const DroppedMarker&) const = default;
};

std::string CollectionJournalName(int64_t generation);  // "<g>.collecting"
std::string DroppedMarkerName(int64_t generation);      // "<g>.dropped"

std::string EncodeCollectionJournal(const CollectionJournal& j);
// FailedPrecondition for a torn, foreign or malformed record (the message says which:
// common/json/record.h).
absl::StatusOr<CollectionJournal> DecodeCollectionJournal(std::string_view text);

std::string EncodeDroppedMarker(const DroppedMarker& m);
// Likewise.
absl::StatusOr<DroppedMarker> DecodeDroppedMarker(std::string_view text);

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_COLLECTION_RECORDS_H_
