// The fixture of the store tests that run on the real filesystem (generations_test,
// collection_test): privhelper's release and generation stores in a temporary state directory,
// a signed release made with a test key, and a fake of the backend's image store (the real
// one: the dockerd tests). Every store file is real.
#ifndef SANDBOX_NODE_TESTS_PRIVHELPER_STORE_STORE_FIXTURE_H_
#define SANDBOX_NODE_TESTS_PRIVHELPER_STORE_STORE_FIXTURE_H_

#include <unistd.h>

#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/state_dir.h"
#include "privhelper/store/prep_failure.h"
#include "privhelper/store/release_store.h"
#include "tests/privhelper/test_util.h"
#include "tests/release/fixture.h"

namespace sn::privhelper::store {

using release::testing::ArtifactBytes;
using release::testing::Describe;
using release::testing::MakeRelease;
using release::testing::NewKey;
using release::testing::SignedRelease;
using sn::testing::ShortTempDir;

inline constexpr char kInstallation[] = "0000aaaa-0000-4000-8000-0000000000aa";
inline const std::string kImageId = "sha256:" + std::string(64, 'a');

// The backend's image store: an archive "loads" the identities written in it.
class FakeImporter final : public ImageImporter {
 public:
  absl::Status Load(const Source& source, uint64_t size) override {
    ++loads;
    std::string bytes(size, '\0');
    uint64_t got = 0;
    while (got < size) {
      absl::StatusOr<size_t> n = source(bytes.data() + got, size - got);
      if (!n.ok()) return n.status();
      if (*n == 0) return absl::DataLossError("short archive");
      got += *n;
    }
    if (fail_load) return absl::UnavailableError("daemon gone");
    held.insert(bytes.substr(0, kImageId.size()));
    return absl::OkStatus();
  }
  // The identity is the archive's first kImageId.size() bytes.
  absl::StatusOr<std::string> ArchiveIdentity(const Source& source, const Skip&,
                                              uint64_t size) override {
    ++derivations;
    std::string head(std::min<uint64_t>(size, kImageId.size()), '\0');
    size_t got = 0;
    while (got < head.size()) {
      absl::StatusOr<size_t> n = source(head.data() + got, head.size() - got);
      if (!n.ok()) return n.status();
      if (*n == 0) break;
      got += *n;
    }
    if (got < kImageId.size() || head.rfind("sha256:", 0) != 0) {
      return absl::InvalidArgumentError("not an image archive");
    }
    return head;
  }
  absl::StatusOr<std::string> Resolve(const std::string& identity) override {
    if (held.count(identity)) return identity;
    return absl::NotFoundError("none");
  }
  absl::Status ForgetImages(const std::vector<std::string>& native_images) override {
    ++forgets;
    forgotten.insert(forgotten.end(), native_images.begin(), native_images.end());
    return fail_forget ? absl::UnavailableError("daemon gone") : absl::OkStatus();
  }
  int loads = 0;
  int derivations = 0;
  int forgets = 0;
  bool fail_forget = false;
  std::vector<std::string> forgotten;
  bool fail_load = false;
  std::set<std::string> held;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_path_ = tmp_.File("state");
    image_ = ArtifactBytes{"busybox.tar", "image", kImageId + " image archive bytes"};
    helper_ = ArtifactBytes{"helper", "helper", "#!/bin/false\n"};
    Reopen();
  }

  void Reopen() {
    generations_.reset();
    releases_.reset();
    state_ = std::make_unique<Dir>();
    absl::StatusOr<Dir> st = OpenStateDir(fs_, state_path_, geteuid());
    ASSERT_TRUE(st.ok()) << st.status();
    *state_ = std::move(*st);
    absl::StatusOr<std::unique_ptr<ReleaseStore>> r =
        ReleaseStore::Open(fs_, *state_, state_path_, geteuid(), key_.public_key());
    ASSERT_TRUE(r.ok()) << r.status();
    releases_ = std::move(*r);
    absl::StatusOr<std::unique_ptr<GenerationStore>> g =
        GenerationStore::Open(fs_, *state_, geteuid(), kInstallation, "docker", releases_.get());
    ASSERT_TRUE(g.ok()) << g.status();
    generations_ = std::move(*g);
  }

  SignedRelease Release(const std::vector<ArtifactBytes>& artifacts, const std::string& source = "rel-1") {
    return MakeRelease(key_, source, artifacts);
  }

  std::string Spec(int64_t g, const std::vector<ArtifactBytes>& artifacts,
                   const std::string& source = "rel-1") {
    wire::SpecificationDocument d;
    d.generation = g;
    d.provider = "docker";
    d.runtime_source = source;
    for (const ArtifactBytes& a : artifacts) d.artifacts.push_back(Describe(a));
    d.images.push_back({"busybox", "busybox.tar", identities_});
    return wire::EncodeSpecificationDocument(d);
  }

  absl::Status Adopt(const SignedRelease& r, const std::string& source = "rel-1") {
    return releases_->Adopt(source, r.manifest_bytes, r.signature_file, r.sums).status();
  }

  absl::Status Put(int64_t g, const ArtifactBytes& a, const std::string& bytes) {
    absl::StatusOr<std::unique_ptr<ReleaseStore::Writer>> w = generations_->WriteArtifact(g, a.name);
    if (!w.ok()) return w.status();
    if (absl::Status s = (*w)->Append(bytes); !s.ok()) return s;
    return (*w)->Commit();
  }

  // A whole preparation of generation `g` from `artifacts`.
  absl::Status Prepare(int64_t g, const std::vector<ArtifactBytes>& artifacts,
                       const std::string& source = "rel-1") {
    if (absl::Status s = Adopt(Release(artifacts, source), source); !s.ok()) return s;
    const std::string spec = Spec(g, artifacts, source);
    absl::StatusOr<std::vector<std::string>> missing =
        generations_->Begin(g, spec, Sha256Hex(spec));
    if (!missing.ok()) return missing.status();
    for (const ArtifactBytes& a : artifacts) {
      for (const std::string& m : *missing) {
        if (m == a.name) {
          if (absl::Status s = Put(g, a, a.bytes); !s.ok()) return s;
        }
      }
    }
    return generations_->Finish(g, importer_);
  }

  std::string Gen(const std::string& name) const { return state_path_ + "/node/generations/" + name; }
  Diagnostic DiagnosticOf(const absl::Status& s) const { return PrepDiagnosticOf(s); }
  GenerationStatus StatusOf(int64_t g) const {
    for (const GenerationStatus& s : generations_->Statuses()) {
      if (s.generation == g) return s;
    }
    return GenerationStatus{};
  }

  ShortTempDir tmp_;
  std::string state_path_;
  PosixFs& fs_ = *PosixFs::Get();
  release::PrivateKey key_ = NewKey();
  std::unique_ptr<Dir> state_;
  std::unique_ptr<ReleaseStore> releases_;
  std::unique_ptr<GenerationStore> generations_;
  FakeImporter importer_;
  ArtifactBytes image_, helper_;
  std::vector<std::string> identities_ = {kImageId};  // what Spec() accepts for "busybox"
};

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_TESTS_PRIVHELPER_STORE_STORE_FIXTURE_H_
