// The store's operations as crash cases (crash_points.h), each with the invariants a restart
// must find. Shared by store_crash_test (the sweeps) and store_crash_findings_test.
#ifndef SANDBOX_NODE_TESTS_PRIVHELPER_STORE_STORE_CRASH_CASES_H_
#define SANDBOX_NODE_TESTS_PRIVHELPER_STORE_STORE_CRASH_CASES_H_

#include <memory>
#include <string>

#include "tests/fakes/crash_points.h"
#include "tests/privhelper/store/prep_crash_world.h"

namespace sn::privhelper::store {

using fs::CrashCase;

// durable.h, in the directory "recs": publish `fresh` as "r" over `old` ("" = none there).
// A restart removes stray temporaries, fsyncs the directory (the reader rule that makes what
// it reads durable) and reads the record: it is absent, `old`, or `fresh` — never anything
// else — and `fresh` whenever the publication returned OK; a write-once publication over an
// existing record never replaces it. Nothing but "r" is left in the directory.
CrashCase PublishOnceCase(const std::string& old, const std::string& fresh);
CrashCase PublishReplacingCase(const std::string& old, const std::string& fresh);

// installation.h: the first start creates the identity in the state directory as
// OpenStateDir hands it over (fsynced: LoadOrCreateInstallationId itself does not fsync what
// it reads from). A restart (LoadOrCreateInstallationId)
// starts, never refuses a torn identity left by the crash (none may be adopted), returns the
// identity the operation returned whenever it returned one, and leaves nothing but
// installation.json in the state directory (stray temporaries are removed at start).
// Adopted: the identity.
CrashCase InstallationCase();

// Preparation (generations.h, release_store.h), one stage per case. Every case starts from the
// durable state the stages before it left (made by the same calls, without faults); its
// operation is privhelper's start on that state, then the stage, as the server runs it.
enum class PrepStage {
  kStart,            // the first start: releases/, node/, node/generations/ created
  kStartClearsPlan,  // a start that finds a final configuration beside its plan
  kAdopt,            // ReleaseStore::Adopt of the signed release
  kBegin,            // Begin: specification record and plan
  kResume,           // Begin again after a restart (specification and plan recorded)
  kPutImage,         // WriteArtifact + Append (two chunks) + Commit of the image archive
  kPutImageOverlapped,  // the same with the image store given: import_started made durable
                        // first, the overlapped load started (a daemon that is down)
  kPutHelper,        // the same for the Runtime helper, the image stored before
  kFinish,           // Finish: plan with import_started, import, lease, identity, final, plan removed
  kWhole,            // Adopt, Begin, both artifacts, Finish in one process
};
const char* PrepStageName(PrepStage stage);

// The stage `stage` of kCaseGeneration's preparation; with `with_held`, kHeldGeneration was
// prepared (READY) before. The sweeps count from the end of the start (`started`), except for
// the two start stages, which sweep the start itself.
//
// A restart starts privhelper (it must start), checks every invariant of Inspect
// (prep_crash_world.h), then checks what the durable state before the operation guaranteed and
// what an OK result promised (the release adopted, the generation PREPARING, an artifact
// stored, the generation READY); then another specification of the generation is refused
// without a change whenever one is recorded; then the same preparation is retried (adopt,
// begin, the missing artifacts, finish, with a daemon that lost every image): it completes,
// READY with the final configuration of an uninterrupted preparation, or — only for a
// generation FAILED with a lease and no identity — is refused with ownership_refused and
// changes nothing. Adopted: "READY <sha256 of the final configuration>" or "FAILED
// ownership_refused", which a second power loss must not change.
CrashCase PreparationCase(std::shared_ptr<const PrepWorld> world, PrepStage stage,
                          bool with_held = false);

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_TESTS_PRIVHELPER_STORE_STORE_CRASH_CASES_H_
