// privhelper's own state (privhelper/store): the directory and record rules of durable.h, the
// installation identity, and the generation store, on the real filesystem. The attacks are
// what a local user or a confused operator can do to the state directory: symlinks, foreign
// owners, loose modes, extra links, a replaced record.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "common/sha256.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/installation.h"
#include "privhelper/store/posix_fs.h"
#include "tests/privhelper/test_util.h"

namespace sn::privhelper::store {
namespace {

using sn::testing::ShortTempDir;

constexpr char kInstallation[] = "0000aaaa-0000-4000-8000-0000000000aa";

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void Put(const std::string& path, const std::string& text, mode_t mode = 0600) {
  { std::ofstream(path) << text; }
  chmod(path.c_str(), mode);
}

std::string Spec(int64_t generation, const std::string& image = "busybox",
                 const std::string& provider = "docker") {
  wire::SpecificationDocument d;
  d.generation = generation;
  d.provider = provider;
  d.runtime_source = "rel-1";
  d.artifacts.push_back({"busybox.tar", "image", std::string(64, '1'), 0});
  d.images.push_back({image, "busybox.tar", {"sha256:" + std::string(64, 'a')}});
  return wire::EncodeSpecificationDocument(d);
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { state_path_ = tmp_.File("state"); }
  absl::StatusOr<Dir> State() { return fs_.OpenStateDir(state_path_, geteuid()); }

  ShortTempDir tmp_;
  std::string state_path_;
  PosixFs& fs_ = *PosixFs::Get();
};

TEST_F(StoreTest, StateDirIsCreatedPrivateAndReopened) {
  ASSERT_TRUE(State().ok());
  struct stat st {};
  ASSERT_EQ(lstat(state_path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_TRUE(State().ok());
}

TEST_F(StoreTest, SymlinkedStateDirIsRefused) {
  const std::string real = tmp_.File("real");
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(symlink(real.c_str(), state_path_.c_str()), 0);
  EXPECT_EQ(State().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, StateDirWithLooseModeIsRefusedNotRepaired) {
  ASSERT_EQ(mkdir(state_path_.c_str(), 0755), 0);
  chmod(state_path_.c_str(), 0755);
  absl::StatusOr<Dir> d = State();
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("0700"), std::string_view::npos) << d.status();
  struct stat st {};
  ASSERT_EQ(stat(state_path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);  // left as found
}

TEST_F(StoreTest, StateDirOfAnotherOwnerIsRefused) {
  SN_REQUIRE_ROOT();
  ASSERT_EQ(mkdir(state_path_.c_str(), 0700), 0);
  ASSERT_EQ(chown(state_path_.c_str(), 65534, 65534), 0);
  EXPECT_EQ(State().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, StateDirUnderAnAgentWritableAncestorIsRefused) {
  SN_REQUIRE_ROOT();
  const std::string parent = tmp_.File("writable");
  ASSERT_EQ(mkdir(parent.c_str(), 0777), 0);
  chmod(parent.c_str(), 0777);  // not sticky: anyone may rename our directory away
  absl::StatusOr<Dir> d = fs_.OpenStateDir(parent + "/state", geteuid());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition) << d.status();
  struct stat st {};
  EXPECT_NE(stat((parent + "/state").c_str(), &st), 0);  // nothing was created
}

TEST_F(StoreTest, InstallationIsCreatedOnceAndKept) {
  absl::StatusOr<Dir> state = State();
  ASSERT_TRUE(state.ok());
  absl::StatusOr<std::string> first = LoadOrCreateInstallationId(fs_, *state, geteuid());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)[14], '4');  // uuid v4
  struct stat st {};
  ASSERT_EQ(stat((state_path_ + "/installation.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  absl::StatusOr<std::string> again = LoadOrCreateInstallationId(fs_, *state, geteuid());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
}

TEST_F(StoreTest, PublishOnceNeverReplacesAnExistingRecord) {
  absl::StatusOr<Dir> state = State();
  ASSERT_TRUE(state.ok());
  ASSERT_TRUE(PublishOnce(fs_, *state, "r", "first").ok());
  EXPECT_EQ(PublishOnce(fs_, *state, "r", "second").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Slurp(state_path_ + "/r"), "first");
  // No temporary is left behind by the refused publication.
  absl::StatusOr<std::vector<std::string>> names = fs_.ListDir(*state);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 1u);
}

TEST_F(StoreTest, TornForeignLinkedOrSymlinkedIdentityIsRefusedAndKept) {
  absl::StatusOr<Dir> state = State();
  ASSERT_TRUE(state.ok());
  const std::string path = state_path_ + "/installation.json";
  Put(path, "{\"schema\":1,\"installation_");
  EXPECT_EQ(LoadOrCreateInstallationId(fs_, *state, geteuid()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Slurp(path), "{\"schema\":1,\"installation_");

  const std::string good = std::string("{\"schema\":1,\"installation_id\":\"") + kInstallation + "\"}";
  Put(path, good, 0644);  // readable by others
  EXPECT_FALSE(LoadOrCreateInstallationId(fs_, *state, geteuid()).ok());
  chmod(path.c_str(), 0600);
  EXPECT_TRUE(LoadOrCreateInstallationId(fs_, *state, geteuid()).ok());
  ASSERT_EQ(link(path.c_str(), tmp_.File("second-link").c_str()), 0);  // multiply linked
  EXPECT_FALSE(LoadOrCreateInstallationId(fs_, *state, geteuid()).ok());
  unlink(tmp_.File("second-link").c_str());
  unlink(path.c_str());
  Put(tmp_.File("elsewhere.json"), good);
  ASSERT_EQ(symlink(tmp_.File("elsewhere.json").c_str(), path.c_str()), 0);
  EXPECT_FALSE(LoadOrCreateInstallationId(fs_, *state, geteuid()).ok());  // never followed
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));  // and never replaced
}

TEST_F(StoreTest, UppercaseIdentityIsRefused) {
  absl::StatusOr<Dir> state = State();
  ASSERT_TRUE(state.ok());
  Put(state_path_ + "/installation.json",
      "{\"schema\":1,\"installation_id\":\"0000AAAA-0000-4000-8000-0000000000FF\"}");
  EXPECT_FALSE(LoadOrCreateInstallationId(fs_, *state, geteuid()).ok());
}

class GenerationStoreTest : public StoreTest {
 protected:
  std::unique_ptr<GenerationStore> Open() {
    absl::StatusOr<Dir> state = State();
    EXPECT_TRUE(state.ok()) << state.status();
    if (!state.ok()) return nullptr;
    absl::StatusOr<std::unique_ptr<GenerationStore>> s =
        GenerationStore::Open(fs_, *state, geteuid(), kInstallation, "docker");
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  absl::StatusOr<std::unique_ptr<GenerationStore>> OpenStatus() {
    absl::StatusOr<Dir> state = State();
    if (!state.ok()) return state.status();
    return GenerationStore::Open(fs_, *state, geteuid(), kInstallation, "docker");
  }
  std::string GenDir() const { return state_path_ + "/node/generations"; }
};

TEST_F(GenerationStoreTest, RegisteredGenerationIsHeldWithItsImagesAndSurvivesARestart) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->empty());
  const std::string spec = Spec(3);
  ASSERT_TRUE(store->Register(3, spec, Sha256Hex(spec)).ok());
  auto held = store->Find(3);
  ASSERT_NE(held, nullptr);
  ASSERT_NE(held->NativeImage("busybox"), nullptr);
  EXPECT_EQ(*held->NativeImage("busybox"), "sha256:" + std::string(64, 'a'));
  EXPECT_EQ(held->NativeImage("other"), nullptr);
  EXPECT_EQ(store->Find(4), nullptr);
  EXPECT_EQ(Slurp(GenDir() + "/3.specification"), spec);

  store.reset();
  auto reopened = Open();
  ASSERT_NE(reopened, nullptr);
  ASSERT_NE(reopened->Find(3), nullptr);
  EXPECT_EQ(reopened->Find(3)->specification_digest, Sha256Hex(spec));
}

TEST_F(GenerationStoreTest, RegisteringTheHeldGenerationAgainIsANoOpAnythingElseIsRefused) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const std::string spec = Spec(3);
  ASSERT_TRUE(store->Register(3, spec, Sha256Hex(spec)).ok());
  EXPECT_TRUE(store->Register(3, spec, Sha256Hex(spec)).ok());
  const std::string other = Spec(4);
  EXPECT_EQ(store->Register(4, other, Sha256Hex(other)).code(),
            absl::StatusCode::kFailedPrecondition);
  const std::string changed = Spec(3, "alpine");
  EXPECT_EQ(store->Register(3, changed, Sha256Hex(changed)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Slurp(GenDir() + "/3.specification"), spec);
}

TEST_F(GenerationStoreTest, BadDocumentsAreInvalidAndWriteNothing) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const std::string spec = Spec(3);
  EXPECT_EQ(store->Register(3, spec, Sha256Hex(spec + " ")).code(),
            absl::StatusCode::kInvalidArgument);  // digest mismatch
  EXPECT_EQ(store->Register(4, spec, Sha256Hex(spec)).code(),
            absl::StatusCode::kInvalidArgument);  // names another generation
  const std::string vm = Spec(3, "busybox", "microvm");
  EXPECT_EQ(store->Register(3, vm, Sha256Hex(vm)).code(),
            absl::StatusCode::kInvalidArgument);  // another provider
  const std::string junk = "{\"schema\":1}";
  EXPECT_EQ(store->Register(3, junk, Sha256Hex(junk)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Register(3, spec, "ABC").code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Dir> state = State();
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(store->empty());
  struct stat st {};
  EXPECT_NE(stat((GenDir() + "/3.specification").c_str(), &st), 0);
}

TEST_F(GenerationStoreTest, InterruptedRegistrationIsCompletedByTheSameBytesOnly) {
  const std::string spec = Spec(3);
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
  }
  // A crash after the specification was published and before the final configuration.
  Put(GenDir() + "/3.specification", spec);
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Find(3), nullptr);  // not held: no final configuration
  const std::string changed = Spec(3, "alpine");
  EXPECT_EQ(store->Register(3, changed, Sha256Hex(changed)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store->Register(3, spec, Sha256Hex(spec)).ok());
  EXPECT_NE(store->Find(3), nullptr);
}

TEST_F(GenerationStoreTest, TamperedRecordsRefuseTheStartAndAreKept) {
  const std::string spec = Spec(3);
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Register(3, spec, Sha256Hex(spec)).ok());
  }
  // The specification changed under privhelper: its digest no longer matches.
  const std::string changed = Spec(3, "alpine");
  const std::string spec_path = GenDir() + "/3.specification";
  unlink(spec_path.c_str());
  Put(spec_path, changed);
  EXPECT_EQ(OpenStatus().status().code(), absl::StatusCode::kFailedPrecondition);
  // A final configuration replaced by a symlink is never followed.
  unlink(spec_path.c_str());
  Put(spec_path, spec);
  const std::string final_path = GenDir() + "/3.json";
  const std::string saved = Slurp(final_path);
  Put(tmp_.File("outside.json"), saved);
  unlink(final_path.c_str());
  ASSERT_EQ(symlink(tmp_.File("outside.json").c_str(), final_path.c_str()), 0);
  EXPECT_EQ(OpenStatus().status().code(), absl::StatusCode::kFailedPrecondition);
  struct stat st {};
  EXPECT_EQ(lstat(final_path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  // A final configuration of another installation is refused too.
  unlink(final_path.c_str());
  std::string foreign = saved;
  foreign.replace(foreign.find(kInstallation), 36, "0000bbbb-0000-4000-8000-0000000000bb");
  Put(final_path, foreign);
  EXPECT_EQ(OpenStatus().status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace sn::privhelper::store
