// The world the preparation crash cases (store_crash_cases.h) run in: one release signed with
// a real Ed25519 key, the specifications prepared from it, privhelper's start on a FaultFs, the
// preparation steps as privhelper's server drives them (rpc/preparation.cc), a backend image
// store, and the invariants every restart must find (Inspect). Test-only; single-threaded.
#ifndef SANDBOX_NODE_TESTS_PRIVHELPER_STORE_PREP_CRASH_WORLD_H_
#define SANDBOX_NODE_TESTS_PRIVHELPER_STORE_PREP_CRASH_WORLD_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/release/ed25519.h"
#include "privhelper/importer.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/plan.h"
#include "privhelper/store/release_store.h"
#include "tests/fakes/fault_fs.h"
#include "tests/release/fixture.h"

namespace sn::privhelper::store {

using fs::FaultFs;

inline constexpr uint32_t kOwner = 0;  // privhelper's uid (FaultFs creates as uid 0)
inline constexpr char kCaseInstallation[] = "0000aaaa-0000-4000-8000-0000000000aa";
inline constexpr char kCaseProvider[] = "docker";
inline constexpr char kCaseSource[] = "rel-1";
inline constexpr int64_t kCaseGeneration = 3;  // the generation every case prepares
inline constexpr int64_t kHeldGeneration = 2;  // READY beforehand, in the cases that say so

// The backend's image store (the Docker daemon, another process: what it holds is not
// privhelper's state). It knows the exact bytes of each image archive: loading them makes it
// hold that image's identity; any other bytes (a torn or foreign archive) are refused, as a
// daemon refuses a broken tar, and change nothing.
class ArchiveImporter final : public ImageImporter {
 public:
  // archive bytes -> the identity (config digest) the image has.
  explicit ArchiveImporter(std::map<std::string, std::string> archives)
      : archives_(std::move(archives)) {}
  absl::StatusOr<std::string> ArchiveIdentity(const Source& source, const Skip& skip,
                                              uint64_t size) override;
  absl::Status Load(const Source& source, uint64_t size) override;
  absl::StatusOr<std::string> Resolve(const std::string& identity) override;
  absl::Status ForgetImages(const std::vector<std::string>&) override { return absl::OkStatus(); }
  int loads() const { return loads_; }

 private:
  const std::map<std::string, std::string> archives_;
  std::set<std::string> held_;
  int loads_ = 0;
};

// A generation the cases prepare, and what its records must hold.
struct CaseGeneration {
  int64_t generation = 0;
  std::string specification;  // the document exactly as Core serves it
  std::string digest;
  Plan plan;                 // its plan (import_started aside), built here from the document
  std::string final_record;  // its <g>.json as an uninterrupted preparation publishes it
};

struct PrepWorld {
  explicit PrepWorld(release::PublicKey k) : key(std::move(k)) {}
  release::PublicKey key;  // privhelper's release key
  std::vector<release::testing::ArtifactBytes> artifacts;  // the image archive, the helper
  release::testing::SignedRelease release;                 // kCaseSource, signed by `key`
  std::string image_identity;
  CaseGeneration target;  // kCaseGeneration
  CaseGeneration held;    // kHeldGeneration
  // kCaseGeneration with other bytes (another image name), valid against the same release.
  std::string other_specification;
  std::string other_digest;

  std::unique_ptr<ArchiveImporter> NewImporter() const;  // a daemon that holds nothing
};

// A new key, the release signed with it, the specifications, and their final records from an
// uninterrupted preparation on a scratch FaultFs.
std::shared_ptr<const PrepWorld> MakePrepWorld();

// privhelper started on a FaultFs, as main.cc starts it: the installation identity, the
// release store, the generation store (which classifies what it finds).
struct Privhelper {
  Dir root;
  std::string installation_id;
  std::unique_ptr<ReleaseStore> releases;
  std::unique_ptr<GenerationStore> generations;  // destroyed first (it uses `releases`)
};
absl::StatusOr<std::unique_ptr<Privhelper>> StartPrivhelper(FaultFs& fs, const PrepWorld& w);
// The state directory as privhelper/store/state_dir.h's OpenStateDir hands it over: opened, and fsynced before
// anything is read from it (the store's readers rely on that for the state directory itself).
absl::StatusOr<Dir> OpenStateDir(FaultFs& fs);
// installation.json for kCaseInstallation, durable (what an earlier start left).
absl::Status WriteInstallation(FaultFs& fs);

// The preparation steps, each as one RPC of the agent's. PutArtifact streams in two chunks.
absl::Status AdoptRelease(Privhelper& p, const PrepWorld& w);
absl::StatusOr<std::vector<std::string>> BeginPreparation(Privhelper& p, const CaseGeneration& g);
// With `overlap`, the image archive's load overlaps the stream (GenerationStore::WriteArtifact).
absl::Status PutArtifact(Privhelper& p, int64_t generation,
                         const release::testing::ArtifactBytes& a,
                         ImageImporter* overlap = nullptr);
absl::Status FinishPreparation(Privhelper& p, int64_t generation, ImageImporter& importer);
// The agent's whole preparation of `g`: adopt, begin, the missing artifacts, finish.
absl::Status Prepare(Privhelper& p, const PrepWorld& w, const CaseGeneration& g,
                     ImageImporter& importer);

// What a start found of kCaseGeneration (after Inspect checked it).
struct Observed {
  enum class State { kAbsent, kPreparing, kReady, kFailed };
  State state = State::kAbsent;
  bool specification_recorded = false;
  bool release_adopted = false;         // all its metadata recorded (Load verifies it)
  std::set<std::string> stored;         // artifacts stored complete and verified
  std::string final_record;             // <g>.json when READY
  std::string records;                  // RecordDigests when the start was over
};
const char* StateName(Observed::State s);
// The name and SHA-256 of every record in node/generations/ and releases/<source>/, one a line.
std::string RecordDigests(FaultFs& fs);

// Checks, right after a start, every invariant of the state directory:
//  - nothing but the known records anywhere; no temporaries (a start removes them);
//  - the release's metadata files each absent or exactly the adopted bytes, and it loads iff
//    all three are there; every artifact absent or complete, verified and private;
//  - kCaseGeneration's specification record absent or exactly its document;
//  - kCaseGeneration READY: its final configuration byte for byte the uninterrupted one, its
//    specification, lease and identity (binding installation, generation, digest and the
//    lease's device, inode and birth time), no plan, every artifact stored, its lease locks;
//    PREPARING: a plan that matches its specification, no final configuration, a lease only
//    with an identity that binds it; FAILED: only ownership_refused, for a lease whose
//    identity is missing, with the plan and the lease kept; absent: no plan, final, lease or
//    identity;
//  - with `expect_held`, kHeldGeneration READY with exactly its records.
// An error names the broken invariant.
absl::StatusOr<Observed> Inspect(FaultFs& fs, Privhelper& p, const PrepWorld& w,
                                 bool expect_held);

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_TESTS_PRIVHELPER_STORE_PREP_CRASH_WORLD_H_
