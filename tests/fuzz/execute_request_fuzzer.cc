// Fuzz target for privhelper's second line of defence on Execute (privhelper/rpc/
// execute_check.h): the input is the bytes of an ExecuteRequest, the first message of the
// Execute stream, as a hostile agent would send it. Invariants, each aborting when broken:
//   1. CheckArguments refuses exactly the requests that break a rule of spec/wire.md §4-§5 or
//      of the stream's payload declaration, as an independent reading of the spec says
//      (tests/fuzz/execute_oracle.h); a refusal is REFUSAL_ARGUMENTS + ERROR_CODE_INVALID with
//      a reason.
//   2. What passed is what the helper sees: the accepted request re-serialised and parsed
//      again is equal and passes again.
//   3. The codec agrees: for every request with a wire form, the agent's codec accepts the
//      same arguments in a `request` frame iff CheckArguments does, and decodes them to the
//      same values.
//   4. Resolve (against a real generation store holding one registered generation): another
//      installation -> REFUSAL_INSTALLATION/unavailable; another generation ->
//      REFUSAL_GENERATION_NOT_HELD/unconfirmed; a create whose image the held specification
//      does not name -> REFUSAL_ARGUMENTS/invalid; otherwise success with privhelper's own
//      limits, and create's native image is the first identity the held specification lists
//      for that image name (no other operation gets one). Without a store or identity,
//      everything is refused.
// ASan/UBSan (bazel build --config=fuzz) catch memory errors, UB and leaks.
#include <ftw.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <map>
#include <string>

#include "common/sha256.h"
#include "common/wire/codec.h"
#include "common/wire/http_bodies.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "privhelper/rpc/execute_check.h"
#include "privhelper/store/durable.h"
#include "common/release/signing.h"
#include "common/release/verify.h"
#include "privhelper/importer.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/release_store.h"
#include "privhelper/store/state_dir.h"
#include "tests/fuzz/execute_fixture.h"
#include "tests/fuzz/execute_oracle.h"

namespace {

namespace pb = ::sn::privhelper::v1;
using sn::privhelper::Refusal;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "execute_request_fuzzer: invariant broken: %s\n", what);
  std::abort();
}
void Require(bool ok, const char* what) {
  if (!ok) Fail(what);
}

// The held generation: a real store in a private temporary state directory
// (/tmp/snfuzz.XXXXXX/state), registered once per process from the fixture's specification
// document.
// An image store that holds every image: an archive produces the first identity the
// specification gives its image (by the archive's bytes), and Resolve answers any identity.
class HoldsEverything final : public sn::privhelper::ImageImporter {
 public:
  explicit HoldsEverything(std::map<std::string, std::string> identity_of_bytes)
      : identity_of_bytes_(std::move(identity_of_bytes)) {}
  absl::StatusOr<std::string> ArchiveIdentity(const Source& source, const Skip&,
                                              uint64_t size) override {
    std::string bytes(size, '\0');
    for (size_t got = 0; got < size;) {
      absl::StatusOr<size_t> n = source(bytes.data() + got, size - got);
      if (!n.ok()) return n.status();
      if (*n == 0) return absl::DataLossError("short archive");
      got += *n;
    }
    auto it = identity_of_bytes_.find(bytes);
    if (it == identity_of_bytes_.end()) return absl::InvalidArgumentError("unknown archive");
    return it->second;
  }
  absl::Status Load(const Source&, uint64_t) override { return absl::OkStatus(); }
  absl::Status ForgetImages(const std::vector<std::string>&) override { return absl::OkStatus(); }
  absl::StatusOr<std::string> Resolve(const std::string& identity) override { return identity; }

 private:
  const std::map<std::string, std::string> identity_of_bytes_;
};

struct World {
  std::unique_ptr<sn::privhelper::store::ReleaseStore> releases;
  std::unique_ptr<sn::privhelper::store::GenerationStore> store;
  sn::wire::SpecificationDocument spec;
};

// Removes the temporary state directory. The store keeps what it holds in memory (Find never
// reads the disk), so the records go as soon as the generation is registered and no run, not
// even one libFuzzer ends with _Exit, leaves /tmp/snfuzz.* behind.
void RemoveTree(const std::string& path) {
  nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return remove(p); }, 8,
      FTW_DEPTH | FTW_PHYS);
}

World* MakeWorld() {
  char tmpl[] = "/tmp/snfuzz.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Fail("mkdtemp");
  auto* w = new World;
  sn::privhelper::store::PosixFs& fs = *sn::privhelper::store::PosixFs::Get();
  // The state directory's parent is our private 0700 directory, not /tmp itself: privhelper
  // trusts a state directory only below a directory no one else may write.
  auto state = sn::privhelper::store::OpenStateDir(fs, std::string(tmpl) + "/state", geteuid());
  if (!state.ok()) Fail("open the state directory");
  // The held generation is prepared as privhelper prepares one: a signed release adopted with
  // privhelper's key, the plan, the verified artifacts, an image store holding every identity.
  namespace st = sn::privhelper::store;
  auto key = sn::release::PrivateKey::Generate();
  if (!key.ok()) Fail("generate a release key");
  sn::wire::ReleaseManifest manifest;
  manifest.source = "rel-1";
  manifest.published_at = "2026-11-29T12:00:00Z";
  w->spec = sn::fuzz::HeldSpecification();
  manifest.artifacts = w->spec.artifacts;
  const std::string manifest_bytes = sn::wire::EncodeReleaseManifest(manifest);
  auto signature = key->Sign(manifest_bytes);
  if (!signature.ok()) Fail("sign the manifest");
  auto releases = st::ReleaseStore::Open(fs, *state, std::string(tmpl) + "/state", geteuid(),
                                            key->public_key());
  if (!releases.ok()) Fail("open the release store");
  w->releases = std::move(*releases);
  if (!w->releases
           ->Adopt("rel-1", manifest_bytes, sn::release::FormatSignatureFile(*signature),
                   sn::release::FormatSha256Sums(manifest))
           .ok()) {
    Fail("adopt the release");
  }
  auto store = st::GenerationStore::Open(fs, *state, geteuid(),
                                            std::string(sn::fuzz::kInstallationId), "docker",
                                            w->releases.get());
  if (!store.ok()) Fail("open the generation store");
  w->store = std::move(*store);
  const std::string doc = sn::wire::EncodeSpecificationDocument(w->spec);
  if (!w->store->Begin(sn::fuzz::kHeldGeneration, doc, sn::Sha256Hex(doc)).ok()) {
    Fail("begin the held generation");
  }
  for (const sn::fuzz::HeldArtifact& a : sn::fuzz::HeldArtifacts()) {
    auto writer = w->store->WriteArtifact(sn::fuzz::kHeldGeneration, a.name);
    if (!writer.ok() || !(*writer)->Append(a.bytes).ok() || !(*writer)->Commit().ok()) {
      Fail("store an artifact");
    }
  }
  std::map<std::string, std::string> identity_of_bytes;
  for (const sn::wire::SpecImage& image : w->spec.images) {
    for (const sn::fuzz::HeldArtifact& a : sn::fuzz::HeldArtifacts()) {
      if (a.name == image.artifact) identity_of_bytes[a.bytes] = image.identities.front();
    }
  }
  HoldsEverything importer(std::move(identity_of_bytes));
  if (!w->store->Finish(sn::fuzz::kHeldGeneration, importer).ok()) Fail("finish the preparation");
  RemoveTree(tmpl);
  return w;
}

World& TheWorld() {
  static World* w = [] {
    google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 is logged per parse otherwise
    return MakeWorld();
  }();
  return *w;
}

void CheckRefusalShape(const Refusal& r) {
  if (!r.refused()) {
    Require(r.code == pb::ERROR_CODE_NONE, "an acceptance carries an error code");
    return;
  }
  Require(!r.reason.empty(), "a refusal without a reason");
}

// 3: the codec on the same arguments.
void CheckAgainstCodec(const pb::ExecuteRequest& r, bool privhelper_accepts) {
  if (!sn::fuzz::HasWireForm(r)) {
    return;
  }
  const sn::wire::Request w = sn::fuzz::ToWireRequest(r);
  absl::StatusOr<sn::wire::Frame> f =
      sn::wire::Decode(sn::wire::Encode(sn::wire::Frame(w)), sn::wire::Role::kNode);
  const sn::wire::Request* got = f.ok() ? std::get_if<sn::wire::Request>(&*f) : nullptr;
  const bool codec_accepts = got != nullptr && !got->request_error.has_value();
  if (codec_accepts != privhelper_accepts) {
    Fail(privhelper_accepts ? "CheckArguments accepts what the codec refuses"
                            : "the codec accepts what CheckArguments refuses");
  }
  if (codec_accepts) {
    Require(got->operation == w.operation && got->args == w.args &&
                got->generation == w.generation && got->timeout_ms == w.timeout_ms,
            "the codec decodes other arguments than it was given");
  }
}

// 4: Resolve against the held generation.
void CheckResolve(const pb::ExecuteRequest& r, World& world) {
  const sn::privhelper::ResolveContext ctx{sn::fuzz::kInstallationId, world.store.get(),
                                           sn::fuzz::kMaxActive, sn::fuzz::kMaxRetained};
  sn::privhelper::ResolvedCall out;
  const Refusal got = sn::privhelper::Resolve(r, ctx, &out);
  CheckRefusalShape(got);
  if (r.installation_id() != sn::fuzz::kInstallationId) {
    Require(got.kind == pb::REFUSAL_INSTALLATION && got.code == pb::ERROR_CODE_UNAVAILABLE,
            "another installation is not refused as such");
    return;
  }
  if (r.generation() != sn::fuzz::kHeldGeneration) {
    Require(got.kind == pb::REFUSAL_GENERATION_NOT_HELD && got.code == pb::ERROR_CODE_UNCONFIRMED,
            "an unheld generation is not refused as such");
    return;
  }
  const sn::wire::SpecImage* named = nullptr;
  if (r.has_create()) {
    for (const sn::wire::SpecImage& i : world.spec.images) {
      if (i.name == r.create().image()) named = &i;
    }
    if (named == nullptr) {
      Require(got.kind == pb::REFUSAL_ARGUMENTS && got.code == pb::ERROR_CODE_INVALID,
              "a create of an image the specification does not name is not refused");
      return;
    }
  }
  Require(!got.refused(), "a request for the held generation is refused");
  Require(out.max_active == sn::fuzz::kMaxActive && out.max_retained == sn::fuzz::kMaxRetained,
          "resolved limits are not privhelper's own");
  if (named != nullptr) {
    Require(out.native_image == named->identities.front(),
            "create resolves to a native image the specification does not give that name");
  } else {
    Require(out.native_image.empty(), "a native image for an operation other than create");
  }

  // Without the state privhelper owns, nothing resolves.
  sn::privhelper::ResolvedCall unused;
  const sn::privhelper::ResolveContext no_store{sn::fuzz::kInstallationId, nullptr, 1, 0};
  Require(sn::privhelper::Resolve(r, no_store, &unused).kind == pb::REFUSAL_GENERATION_NOT_HELD,
          "resolved without a generation store");
  const sn::privhelper::ResolveContext no_identity{"", world.store.get(), 1, 0};
  Require(sn::privhelper::Resolve(r, no_identity, &unused).kind == pb::REFUSAL_INSTALLATION,
          "resolved without an installation identity");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& world = TheWorld();
  pb::ExecuteRequest r;
  if (!r.ParseFromArray(data, static_cast<int>(size))) return 0;

  // 1: CheckArguments against the independent reading of the spec.
  const Refusal checked = sn::privhelper::CheckArguments(r);
  CheckRefusalShape(checked);
  const std::optional<std::string> violation = sn::fuzz::SpecViolation(r);
  if (checked.refused()) {
    Require(checked.kind == pb::REFUSAL_ARGUMENTS && checked.code == pb::ERROR_CODE_INVALID,
            "an argument refusal that is not REFUSAL_ARGUMENTS/invalid");
    Require(violation.has_value(), "CheckArguments refuses a request the spec allows");
  } else {
    Require(!violation.has_value(), "CheckArguments accepts a request that breaks the spec");
    // 2: what the helper sees is what was checked.
    std::string bytes;
    Require(r.SerializeToString(&bytes), "an accepted request does not serialise");
    pb::ExecuteRequest again;
    Require(again.ParseFromString(bytes), "an accepted request does not parse again");
    Require(google::protobuf::util::MessageDifferencer::Equals(r, again),
            "an accepted request changes when re-serialised");
    Require(!sn::privhelper::CheckArguments(again).refused(),
            "an accepted request is refused after re-serialisation");
  }

  CheckAgainstCodec(r, !checked.refused());
  // privhelper resolves only what passed CheckArguments (server.cc); Resolve reads only the
  // installation, the generation and create's image, so it is exercised on every input.
  CheckResolve(r, world);
  return 0;
}
