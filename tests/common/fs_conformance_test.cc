// The same calls against PosixFs (a real directory) and FaultFs: both must give the same
// answers, so what the crash-point tests prove on FaultFs holds for the store on PosixFs.
// Runs as any user in the Bazel sandbox.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "common/fs/posix_fs.h"
#include "tests/fakes/fault_fs.h"

namespace sn::fs {
namespace {

using absl::StatusCode;

// One implementation under test, with the test's own hand on its root directory.
class Impl {
 public:
  virtual ~Impl() = default;
  virtual Fs& fs() = 0;
  virtual Dir Root() = 0;
  virtual void Symlink(const std::string& name, const std::string& target) = 0;
  virtual void HardLink(const std::string& existing, const std::string& name) = 0;
  virtual void Socket(const std::string& name) = 0;
};

class PosixImpl final : public Impl {
 public:
  PosixImpl() {
    const char* base = getenv("TEST_TMPDIR");
    std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/fsconf-XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~PosixImpl() override {
    const std::string cmd = "rm -rf '" + path_ + "'";
    (void)system(cmd.c_str());
  }
  Fs& fs() override { return *PosixFs::Get(); }
  Dir Root() override {
    return Dir(PosixFs::Get(), open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  void Symlink(const std::string& name, const std::string& target) override {
    ASSERT_EQ(symlink(target.c_str(), (path_ + "/" + name).c_str()), 0);
  }
  void HardLink(const std::string& existing, const std::string& name) override {
    ASSERT_EQ(link((path_ + "/" + existing).c_str(), (path_ + "/" + name).c_str()), 0);
  }
  void Socket(const std::string& name) override {
    ASSERT_EQ(mknod((path_ + "/" + name).c_str(), S_IFSOCK | 0755, 0), 0);
  }

 private:
  std::string path_;
};

class FaultImpl final : public Impl {
 public:
  FaultImpl() : fs_(Options()) {}
  Fs& fs() override { return fs_; }
  Dir Root() override { return *fs_.Root(); }
  void Symlink(const std::string& name, const std::string& target) override {
    ASSERT_TRUE(fs_.Symlink(name, target).ok());
  }
  void HardLink(const std::string& existing, const std::string& name) override {
    ASSERT_TRUE(fs_.Link(existing, name).ok());
  }
  void Socket(const std::string& name) override { ASSERT_TRUE(fs_.MakeSocket(name).ok()); }

 private:
  static FaultFs::Options Options() {
    FaultFs::Options o;
    o.uid = geteuid();  // what PosixFs shows for what this process creates
    o.gid = getegid();
    return o;
  }
  FaultFs fs_;
};

class FsConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    old_umask_ = umask(022);  // FaultFs's default
    if (GetParam() == "posix") {
      impl_ = std::make_unique<PosixImpl>();
    } else {
      impl_ = std::make_unique<FaultImpl>();
    }
    root_ = impl_->Root();
    ASSERT_TRUE(root_.valid());
  }
  void TearDown() override { umask(old_umask_); }

  void Create(const std::string& name, const std::string& bytes, uint32_t mode = 0600) {
    absl::StatusOr<std::unique_ptr<WritableFile>> f = fs().CreateExclusiveAt(root_, name, mode);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE((*f)->Append(bytes).ok());
    ASSERT_TRUE((*f)->Sync().ok());
    ASSERT_TRUE((*f)->Close().ok());
  }
  StatusCode Read(const std::string& name, size_t max = 4096) {
    return fs().ReadFileAt(root_, name, max, nullptr).status().code();
  }
  std::vector<std::string> List() {
    std::vector<std::string> names = *fs().ListDir(root_);
    std::sort(names.begin(), names.end());
    return names;
  }
  Fs& fs() { return impl_->fs(); }

  mode_t old_umask_ = 0;
  std::unique_ptr<Impl> impl_;
  Dir root_;
};

TEST_P(FsConformanceTest, ExclusiveCreateSetsTheExactModeAndRefusesAnExistingName) {
  Create("f", "abc", 0640);
  FileInfo i = *fs().StatAt(root_, "f");
  EXPECT_EQ(i.type, FileType::kRegular);
  EXPECT_EQ(i.mode, 0640u);
  EXPECT_EQ(i.nlink, 1u);
  EXPECT_EQ(i.size, 3u);
  EXPECT_EQ(i.uid, geteuid());
  EXPECT_EQ(fs().CreateExclusiveAt(root_, "f", 0600).status().code(), StatusCode::kAlreadyExists);
  impl_->Symlink("l", "f");
  EXPECT_EQ(fs().CreateExclusiveAt(root_, "l", 0600).status().code(), StatusCode::kAlreadyExists);
}

TEST_P(FsConformanceTest, MakeDirAppliesTheUmaskAndRefusesAnExistingName) {
  ASSERT_TRUE(fs().MakeDirAt(root_, "d", 0777).ok());
  EXPECT_EQ(fs().StatAt(root_, "d")->mode, 0755u);
  EXPECT_EQ(fs().StatAt(root_, "d")->type, FileType::kDirectory);
  EXPECT_EQ(fs().MakeDirAt(root_, "d", 0700).code(), StatusCode::kAlreadyExists);
  Create("f", "");
  EXPECT_EQ(fs().MakeDirAt(root_, "f", 0700).code(), StatusCode::kAlreadyExists);
  absl::StatusOr<Dir> d = fs().OpenDirAt(root_, "d");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(fs().StatDir(*d)->ino, fs().StatAt(root_, "d")->ino);
  EXPECT_EQ(fs().StatDir(*d)->dev, fs().StatAt(root_, "f")->dev);
}

TEST_P(FsConformanceTest, OpenDirRefusesSymlinksFilesAndMissingNames) {
  ASSERT_TRUE(fs().MakeDirAt(root_, "d", 0700).ok());
  Create("f", "");
  impl_->Symlink("ld", "d");
  EXPECT_EQ(fs().OpenDirAt(root_, "ld").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs().OpenDirAt(root_, "f").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs().OpenDirAt(root_, "none").status().code(), StatusCode::kNotFound);
}

TEST_P(FsConformanceTest, StatDescribesTheEntryItselfWithLinksAndInodes) {
  Create("a", "1");
  Create("b", "2");
  impl_->HardLink("a", "a2");
  impl_->Symlink("l", "a");
  EXPECT_EQ(fs().StatAt(root_, "a")->nlink, 2u);
  EXPECT_EQ(fs().StatAt(root_, "a2")->ino, fs().StatAt(root_, "a")->ino);
  EXPECT_NE(fs().StatAt(root_, "b")->ino, fs().StatAt(root_, "a")->ino);
  EXPECT_EQ(fs().StatAt(root_, "l")->type, FileType::kSymlink);
  EXPECT_EQ(fs().StatAt(root_, "none").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(List(), (std::vector<std::string>{"a", "a2", "b", "l"}));
}

TEST_P(FsConformanceTest, ReadRefusesSymlinksDirectoriesSocketsAndLargerFiles) {
  Create("f", "12345");
  ASSERT_TRUE(fs().MakeDirAt(root_, "d", 0700).ok());
  impl_->Symlink("l", "f");
  impl_->Socket("s");
  FileInfo info;
  EXPECT_EQ(*fs().ReadFileAt(root_, "f", 5, &info), "12345");
  EXPECT_EQ(info.size, 5u);
  EXPECT_EQ(Read("f", 4), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Read("l"), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Read("d"), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Read("s"), StatusCode::kInternal);  // ENXIO
  EXPECT_EQ(Read("none"), StatusCode::kNotFound);
}

TEST_P(FsConformanceTest, RenameMovesReplacesOrRefusesLikeRenameat2) {
  Create("a", "A");
  Create("b", "B");
  ASSERT_TRUE(fs().MakeDirAt(root_, "d", 0700).ok());
  ASSERT_TRUE(fs().MakeDirAt(root_, "e", 0700).ok());
  const uint64_t a = fs().StatAt(root_, "a")->ino;
  EXPECT_EQ(fs().RenameAt(root_, "none", "x", false).code(), StatusCode::kNotFound);
  EXPECT_EQ(fs().RenameAt(root_, "a", "b", true).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(*fs().ReadFileAt(root_, "b", 10, nullptr), "B");
  EXPECT_EQ(fs().RenameAt(root_, "a", "d", false).code(), StatusCode::kInternal);  // EISDIR
  EXPECT_EQ(fs().RenameAt(root_, "d", "a", false).code(), StatusCode::kInternal);  // ENOTDIR
  ASSERT_TRUE(fs().RenameAt(root_, "a", "b", false).ok());
  EXPECT_EQ(fs().StatAt(root_, "b")->ino, a);
  EXPECT_EQ(*fs().ReadFileAt(root_, "b", 10, nullptr), "A");
  EXPECT_EQ(fs().StatAt(root_, "a").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(fs().RenameAt(root_, "b", "c", true).ok());
  ASSERT_TRUE(fs().RenameAt(root_, "d", "e", false).ok());  // onto an empty directory
  EXPECT_EQ(List(), (std::vector<std::string>{"c", "e"}));
}

TEST_P(FsConformanceTest, RenameBetweenTwoLinksOfOneFileChangesNothing) {
  Create("a", "A");
  impl_->HardLink("a", "b");
  ASSERT_TRUE(fs().RenameAt(root_, "a", "b", false).ok());
  EXPECT_EQ(List(), (std::vector<std::string>{"a", "b"}));
}

TEST_P(FsConformanceTest, UnlinkRemovesFilesAndSymlinksButNotDirectories) {
  Create("f", "");
  impl_->Symlink("l", "f");
  ASSERT_TRUE(fs().MakeDirAt(root_, "d", 0700).ok());
  EXPECT_TRUE(fs().UnlinkAt(root_, "l").ok());
  EXPECT_TRUE(fs().StatAt(root_, "f").ok());  // the link, not its target
  EXPECT_TRUE(fs().UnlinkAt(root_, "f").ok());
  EXPECT_EQ(fs().UnlinkAt(root_, "f").code(), StatusCode::kNotFound);
  EXPECT_EQ(fs().UnlinkAt(root_, "d").code(), StatusCode::kInternal);  // EISDIR
  EXPECT_EQ(List(), (std::vector<std::string>{"d"}));
}

TEST_P(FsConformanceTest, FlockBetweenOpenFilesSharedCoexistExclusiveExcludes) {
  Create("lease", "");
  ASSERT_TRUE(fs().MakeDirAt(root_, "d", 0700).ok());
  impl_->Symlink("l", "lease");
  absl::StatusOr<std::unique_ptr<FileLock>> s1 = fs().LockAt(root_, "lease", LockMode::kShared);
  absl::StatusOr<std::unique_ptr<FileLock>> s2 = fs().LockAt(root_, "lease", LockMode::kShared);
  ASSERT_TRUE(s1.ok() && s2.ok());
  EXPECT_EQ((*s1)->info().ino, fs().StatAt(root_, "lease")->ino);
  EXPECT_EQ(fs().LockAt(root_, "lease", LockMode::kExclusive).status().code(),
            StatusCode::kUnavailable);
  s1->reset();
  s2->reset();
  absl::StatusOr<std::unique_ptr<FileLock>> x = fs().LockAt(root_, "lease", LockMode::kExclusive);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(fs().LockAt(root_, "lease", LockMode::kShared).status().code(),
            StatusCode::kUnavailable);
  x->reset();
  EXPECT_TRUE(fs().LockAt(root_, "lease", LockMode::kShared).ok());
  EXPECT_EQ(fs().LockAt(root_, "l", LockMode::kShared).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs().LockAt(root_, "d", LockMode::kShared).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs().LockAt(root_, "none", LockMode::kShared).status().code(),
            StatusCode::kNotFound);
}

TEST_P(FsConformanceTest, EveryNameIsOneComponent) {
  for (const char* bad : {"", ".", "..", "a/b", "/a"}) {
    EXPECT_EQ(fs().StatAt(root_, bad).status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(fs().CreateExclusiveAt(root_, bad, 0600).status().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(fs().MakeDirAt(root_, bad, 0700).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(fs().RenameAt(root_, bad, "x", false).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(fs().UnlinkAt(root_, bad).code(), StatusCode::kInvalidArgument);
  }
}

TEST_P(FsConformanceTest, ListingAndSyncOfANewDirectory) {
  ASSERT_TRUE(fs().MakeDirAt(root_, "d", 0700).ok());
  absl::StatusOr<Dir> d = fs().OpenDirAt(root_, "d");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(fs().ListDir(*d)->empty());
  EXPECT_TRUE(fs().SyncDir(*d).ok());
  EXPECT_TRUE(fs().SyncDir(root_).ok());
}

std::string ReadAll(ReadableFile& f, size_t chunk) {
  std::string out;
  std::string buf(chunk, '\0');
  for (;;) {
    absl::StatusOr<size_t> n = f.Read(buf.data(), buf.size());
    if (!n.ok()) {
      ADD_FAILURE() << n.status();
      return out;
    }
    if (*n == 0) return out;
    out.append(buf.data(), *n);
  }
}

TEST_P(FsConformanceTest, OpenReadAtStreamsTheFileAsItIsNowAndDescribesIt) {
  absl::StatusOr<std::unique_ptr<WritableFile>> w = fs().CreateExclusiveAt(root_, "f", 0400);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append("12345").ok());
  absl::StatusOr<std::unique_ptr<ReadableFile>> r = fs().OpenReadAt(root_, "f");
  ASSERT_TRUE(r.ok()) << r.status();
  const FileInfo named = *fs().StatAt(root_, "f");
  EXPECT_EQ((*r)->info().type, FileType::kRegular);
  EXPECT_EQ((*r)->info().ino, named.ino);
  EXPECT_EQ((*r)->info().dev, named.dev);
  EXPECT_EQ((*r)->info().birth_ns, named.birth_ns);
  EXPECT_EQ((*r)->info().mode, 0400u);
  EXPECT_EQ((*r)->info().nlink, 1u);
  EXPECT_EQ((*r)->info().size, 5u);
  char buf[2];
  ASSERT_EQ(*(*r)->Read(buf, 2), 2u);
  EXPECT_EQ(std::string(buf, 2), "12");
  ASSERT_TRUE((*w)->Append("678").ok());
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_EQ(ReadAll(**r, 3), "345678");
  EXPECT_EQ(*(*r)->Read(buf, 2), 0u);
  // Unlinked while open: still readable from the start through a new descriptor's twin.
  absl::StatusOr<std::unique_ptr<ReadableFile>> r2 = fs().OpenReadAt(root_, "f");
  ASSERT_TRUE(r2.ok());
  ASSERT_TRUE(fs().UnlinkAt(root_, "f").ok());
  EXPECT_EQ(ReadAll(**r2, 4), "12345678");
}

TEST_P(FsConformanceTest, OpenReadAtRefusesSymlinksDirectoriesSocketsAndMissingNames) {
  Create("f", "x");
  ASSERT_TRUE(fs().MakeDirAt(root_, "d", 0700).ok());
  impl_->Symlink("l", "f");
  impl_->Socket("s");
  EXPECT_EQ(fs().OpenReadAt(root_, "l").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs().OpenReadAt(root_, "d").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs().OpenReadAt(root_, "s").status().code(), StatusCode::kInternal);  // ENXIO
  EXPECT_EQ(fs().OpenReadAt(root_, "none").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fs().OpenReadAt(root_, "a/b").status().code(), StatusCode::kInvalidArgument);
}

// Birth time (statx): one value per file whichever way it is looked at, kept across a
// rename, never earlier for a file created later. (Two files created within one tick of the
// kernel's coarse clock share it on ext4, so "later" is not "greater" on PosixFs.)
TEST_P(FsConformanceTest, BirthTimeIsOneValuePerFileKeptAcrossRenames) {
  Create("a", "A");
  const FileInfo a = *fs().StatAt(root_, "a");
  if (a.birth_ns == 0 && GetParam() == "posix") {
    GTEST_SKIP() << "this filesystem records no birth time";
  }
  EXPECT_GT(a.birth_ns, int64_t{1'500'000'000} * 1'000'000'000);  // a time since 2017
  absl::StatusOr<std::unique_ptr<ReadableFile>> r = fs().OpenReadAt(root_, "a");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->info().birth_ns, a.birth_ns);
  absl::StatusOr<std::unique_ptr<FileLock>> l = fs().LockAt(root_, "a", LockMode::kShared);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ((*l)->info().birth_ns, a.birth_ns);
  FileInfo read_info;
  ASSERT_TRUE(fs().ReadFileAt(root_, "a", 16, &read_info).ok());
  EXPECT_EQ(read_info.birth_ns, a.birth_ns);
  ASSERT_TRUE(fs().RenameAt(root_, "a", "b", true).ok());
  EXPECT_EQ(fs().StatAt(root_, "b")->birth_ns, a.birth_ns);
  EXPECT_EQ(fs().StatAt(root_, "b")->ino, a.ino);
  Create("c", "C");
  EXPECT_GE(fs().StatAt(root_, "c")->birth_ns, a.birth_ns);
  ASSERT_TRUE(fs().MakeDirAt(root_, "d", 0700).ok());
  EXPECT_GE(fs().StatAt(root_, "d")->birth_ns, a.birth_ns);
}

INSTANTIATE_TEST_SUITE_P(PosixAndFault, FsConformanceTest, ::testing::Values("posix", "fault"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace sn::fs
