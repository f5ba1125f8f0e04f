// Collection (issue 10; generations.h "Collection", docs/formats.md) as crash cases
// (crash_points.h), on the world of the preparation cases (prep_crash_world.h) with a release of
// three artifacts: generation 2 (kept: READY, retained) uses the image archive; generation 3
// (collected) uses the image archive, the Runtime helper and a seccomp profile, so the archive
// is shared and the other two are generation 3's own. Every case starts privhelper on a state
// the setup left (made by the same calls, without faults), calls `started`, and collects
// generation 3 as CollectGeneration does (nothing references it; the native cleanup is counted,
// and Docker's keeps every image). When the collection fails and the process is still alive,
// the case checks generation 3 in that process (a journal on disk makes it unusable) and
// collects once more in the same process, as the agent's next grant would.
//
// A restart (privhelper's next start, after a kill -9 or a modelled power loss, and again after
// a further power loss) checks:
//  - nothing but the known records anywhere, no temporaries;
//  - every record of both generations (specification, plan, final configuration, lease,
//    identity) still byte for byte what the setup left, and both leases the same files
//    (device, inode, birth time): never removed or replaced;
//  - generation 2 READY, held, its lease locks, its files verified; every release file absent
//    or exactly its bytes, the shared archive present;
//  - generation 3: with a dropped marker (it binds installation, generation and digest) DROPPED,
//    its journal cleared and all its own files gone; else with a journal (bound the same way,
//    listing exactly its own files the setup stored, with their checksums) COLLECTING, and no
//    file gone before native_done was durable; else as the setup left it, and no file gone;
//    COLLECTING and DROPPED are never held, never locked shared, run no helper, and refuse
//    BeginPreparation and FinishPreparation without a change; what the operation (or a retry in
//    its process, or a first restart's retry) promised by returning OK is DROPPED;
//  - then CollectGeneration again: the native cleanup runs again only if native_done was not
//    durable; it finishes DROPPED with the marker and exactly the files an uninterrupted
//    collection leaves — or, for kImportStartedMissing, refuses (ownership_refused) each time
//    and changes nothing.
// kStartClearsJournal sweeps the start itself (its operation is the start, then the collection;
// a start that leaves generation 3 FAILED because it could not clear the journal reports an
// error).
// Adopted: "DROPPED <surviving release files>" or "REFUSED ownership_refused".
#ifndef SANDBOX_NODE_TESTS_PRIVHELPER_STORE_COLLECT_CRASH_CASES_H_
#define SANDBOX_NODE_TESTS_PRIVHELPER_STORE_COLLECT_CRASH_CASES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "tests/fakes/crash_points.h"
#include "tests/privhelper/store/prep_crash_world.h"

namespace sn::privhelper::store {

using fs::CrashCase;

inline constexpr int64_t kKeptGeneration = 2;
inline constexpr int64_t kCollectedGeneration = 3;

enum class CollectStage {
  kReady,                 // 3 READY beside 2 READY
  kPlanNotImported,       // 3 PREPARING (import_started false), its helper stored, not its profile
  kImportStartedMissing,  // 3 PREPARING (import_started true), its profile missing: refused
  kResumed,               // 3's journal durable (the native cleanup failed), then a restart
  kResumedNativeDone,     // 3's journal with native_done durable, its helper removed, a restart
  kStartClearsJournal,    // 3's marker durable beside its journal: the start clears the journal
};
const char* CollectStageName(CollectStage stage);

struct CollectWorld {
  explicit CollectWorld(release::PublicKey key) : prep(std::move(key)) {}
  PrepWorld prep;            // key, the release of three artifacts, the image identity
  CaseGeneration kept;       // 2
  CaseGeneration collected;  // 3
};
std::shared_ptr<const CollectWorld> MakeCollectWorld();

// The collection of generation 3 from the state of `stage`. With `fail_step`, that step of the
// collection fails (EIO) and the retry in the same process runs on: a sweep of this case
// crashes the retry too (after a failed fsync the volatile state differs from the durable one,
// and the retry must not act on what is not durable).
CrashCase CollectionCase(std::shared_ptr<const CollectWorld> world, CollectStage stage,
                         int64_t fail_step = 0);
// What every restart of that case must adopt (and an uninterrupted run's restart adopts).
std::string ExpectedCollectionOutcome(const CollectWorld& world, CollectStage stage);

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_TESTS_PRIVHELPER_STORE_COLLECT_CRASH_CASES_H_
