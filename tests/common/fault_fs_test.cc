// FaultFs itself: what survives a simulated power loss, what the injected faults do, and the
// lock semantics. These prove it is not a stand-in that accepts anything: each test names a
// loss or a refusal a real filesystem would produce. (Call-by-call agreement with PosixFs is
// fs_conformance_test.cc.)
#include "tests/fakes/fault_fs.h"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

#include "gtest/gtest.h"

namespace sn::fs {
namespace {

using UnsyncedData = FaultFs::UnsyncedData;

// Creates `name` in `dir` with `bytes`; syncs the file when `sync`.
void Write(FaultFs& fs, const Dir& dir, const std::string& name, const std::string& bytes,
           bool sync) {
  absl::StatusOr<std::unique_ptr<WritableFile>> f = fs.CreateExclusiveAt(dir, name, 0600);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE((*f)->Append(bytes).ok());
  if (sync) {
    ASSERT_TRUE((*f)->Sync().ok());
  }
  ASSERT_TRUE((*f)->Close().ok());
}

bool Has(FaultFs& fs, const std::string& path) { return fs.Contents(path).ok(); }

TEST(FaultFsTest, UnsyncedCreateVanishesAtPowerLoss) {
  FaultFs fs;
  Dir root = *fs.Root();
  Write(fs, root, "a", "bytes", /*sync=*/true);  // the data is durable, the name is not
  EXPECT_EQ(*fs.Contents("a"), "bytes");
  fs.Crash();
  EXPECT_FALSE(Has(fs, "a"));
}

TEST(FaultFsTest, CreateFollowedBySyncDirSurvivesWithItsSyncedBytes) {
  FaultFs fs;
  Dir root = *fs.Root();
  Write(fs, root, "a", "bytes", /*sync=*/true);
  ASSERT_TRUE(fs.SyncDir(root).ok());
  fs.Crash();
  EXPECT_EQ(*fs.Contents("a"), "bytes");
}

TEST(FaultFsTest, DurableNameWithUnsyncedDataIsEmptyAfterPowerLoss) {
  FaultFs fs;
  Dir root = *fs.Root();
  Write(fs, root, "a", "bytes", /*sync=*/false);
  ASSERT_TRUE(fs.SyncDir(root).ok());
  fs.Crash();
  EXPECT_EQ(*fs.Contents("a"), "");  // ext4 without auto_da_alloc: the zero-length file
}

TEST(FaultFsTest, UnsyncedTailIsLostTornOrKeptAsAsked) {
  for (UnsyncedData d : {UnsyncedData::kLost, UnsyncedData::kTorn, UnsyncedData::kKept}) {
    FaultFs fs;
    Dir root = *fs.Root();
    absl::StatusOr<std::unique_ptr<WritableFile>> f = fs.CreateExclusiveAt(root, "a", 0600);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append("1234").ok());
    ASSERT_TRUE((*f)->Sync().ok());
    ASSERT_TRUE((*f)->Append("5678").ok());
    ASSERT_TRUE(fs.SyncDir(root).ok());
    fs.Crash({0, d});
    const std::string want = d == UnsyncedData::kLost ? "1234"
                             : d == UnsyncedData::kTorn ? "123456"
                                                        : "12345678";
    EXPECT_EQ(*fs.Contents("a"), want);
  }
}

TEST(FaultFsTest, SyncedFileInADirectoryWhoseCreationWasNotSyncedVanishes) {
  FaultFs fs;
  Dir root = *fs.Root();
  ASSERT_TRUE(fs.MakeDirAt(root, "d", 0700).ok());
  Dir d = *fs.OpenDirAt(root, "d");
  Write(fs, d, "a", "bytes", /*sync=*/true);
  ASSERT_TRUE(fs.SyncDir(d).ok());  // "a" is durable in d, but d is not durable in root
  fs.Crash();
  EXPECT_FALSE(fs.Names("d").ok());
  EXPECT_TRUE(fs.Names("").value().empty());
}

TEST(FaultFsTest, RenameWithoutSyncDirIsUndoneAndWithItSurvives) {
  for (bool sync : {false, true}) {
    FaultFs fs;
    ASSERT_TRUE(fs.WriteFile("old", "old").ok());
    Dir root = *fs.Root();
    Write(fs, root, "tmp", "new", /*sync=*/true);
    ASSERT_TRUE(fs.RenameAt(root, "tmp", "old", /*no_replace=*/false).ok());
    EXPECT_EQ(*fs.Contents("old"), "new");
    if (sync) {
      ASSERT_TRUE(fs.SyncDir(root).ok());
    }
    fs.Crash();
    EXPECT_EQ(*fs.Contents("old"), sync ? "new" : "old");
    EXPECT_FALSE(Has(fs, "tmp"));
  }
}

TEST(FaultFsTest, UnsyncedUnlinkIsUndoneWithTheDurableContents) {
  FaultFs fs;
  ASSERT_TRUE(fs.WriteFile("a", "kept").ok());
  Dir root = *fs.Root();
  ASSERT_TRUE(fs.UnlinkAt(root, "a").ok());
  EXPECT_FALSE(Has(fs, "a"));
  fs.Crash();
  EXPECT_EQ(*fs.Contents("a"), "kept");
}

TEST(FaultFsTest, PersistedPrefixOfPendingOperationsIsAppliedInOrder) {
  // create x; rename x -> y; create z. Persisting 2 of 3 gives y without z, never z alone.
  FaultFs fs;
  Dir root = *fs.Root();
  Write(fs, root, "x", "1", true);
  ASSERT_TRUE(fs.RenameAt(root, "x", "y", true).ok());
  Write(fs, root, "z", "2", true);
  ASSERT_EQ(fs.PendingDirOps(), 3u);
  FaultFs::Image image = fs.Snapshot();
  const std::vector<std::vector<std::string>> want = {{}, {"x"}, {"y"}, {"y", "z"}};
  for (size_t m = 0; m <= 3; ++m) {
    FaultFs copy(FaultFs::Options(), image);
    copy.Crash({m, UnsyncedData::kLost});
    EXPECT_EQ(*copy.Names(""), want[m]) << m;
  }
}

TEST(FaultFsTest, RenameNoReplaceRefusesAndChangesNothing) {
  FaultFs fs;
  ASSERT_TRUE(fs.WriteFile("a", "A").ok());
  ASSERT_TRUE(fs.WriteFile("b", "B").ok());
  Dir root = *fs.Root();
  EXPECT_EQ(fs.RenameAt(root, "a", "b", /*no_replace=*/true).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(*fs.Contents("a"), "A");
  EXPECT_EQ(*fs.Contents("b"), "B");
  EXPECT_EQ(fs.PendingDirOps(), 0u);
}

TEST(FaultFsTest, ReplacingRenameDropsTheOldInodeAndKeepsTheMovedOne) {
  FaultFs fs;
  ASSERT_TRUE(fs.WriteFile("a", "A").ok());
  ASSERT_TRUE(fs.WriteFile("b", "B").ok());
  Dir root = *fs.Root();
  const uint64_t a = fs.StatAt(root, "a")->ino;
  const uint64_t b = fs.StatAt(root, "b")->ino;
  EXPECT_NE(a, b);
  ASSERT_TRUE(fs.RenameAt(root, "a", "b", false).ok());
  EXPECT_EQ(fs.StatAt(root, "b")->ino, a);
  EXPECT_EQ(fs.StatAt(root, "b")->nlink, 1u);
  EXPECT_EQ(fs.StatAt(root, "a").status().code(), absl::StatusCode::kNotFound);
}

TEST(FaultFsTest, ExclusiveCreateRefusesAnyExistingEntryIncludingASymlink) {
  FaultFs fs;
  ASSERT_TRUE(fs.WriteFile("f", "x").ok());
  ASSERT_TRUE(fs.Symlink("l", "f").ok());
  Dir root = *fs.Root();
  EXPECT_EQ(fs.CreateExclusiveAt(root, "f", 0600).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(fs.CreateExclusiveAt(root, "l", 0600).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(fs.MakeDirAt(root, "f", 0700).code(), absl::StatusCode::kAlreadyExists);
}

TEST(FaultFsTest, NothingFollowsASymlink) {
  FaultFs fs;
  ASSERT_TRUE(fs.MakeDirs("d").ok());
  ASSERT_TRUE(fs.WriteFile("f", "x").ok());
  ASSERT_TRUE(fs.Symlink("ld", "d").ok());
  ASSERT_TRUE(fs.Symlink("lf", "f").ok());
  Dir root = *fs.Root();
  EXPECT_EQ(fs.StatAt(root, "lf")->type, FileType::kSymlink);
  EXPECT_EQ(fs.OpenDirAt(root, "ld").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs.ReadFileAt(root, "lf", 10, nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs.LockAt(root, "lf", LockMode::kShared).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(FaultFsTest, ModesOwnersLinksAndInodesAreWhatAStatShows) {
  FaultFs::Options o;
  o.uid = 0;
  o.umask = 022;
  FaultFs fs(o);
  Dir root = *fs.Root();
  ASSERT_TRUE(fs.MakeDirAt(root, "d", 0777).ok());
  EXPECT_EQ(fs.StatAt(root, "d")->mode, 0755u);  // mkdir applies the umask
  absl::StatusOr<std::unique_ptr<WritableFile>> f = fs.CreateExclusiveAt(root, "f", 0640);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("abc").ok());
  FileInfo i = *fs.StatAt(root, "f");
  EXPECT_EQ(i.mode, 0640u);  // created with the mode asked, exactly
  EXPECT_EQ(i.uid, 0u);
  EXPECT_EQ(i.nlink, 1u);
  EXPECT_EQ(i.size, 3u);
  EXPECT_EQ(i.dev, o.dev);
  ASSERT_TRUE(fs.Link("f", "g").ok());
  EXPECT_EQ(fs.StatAt(root, "f")->nlink, 2u);
  EXPECT_EQ(fs.StatAt(root, "g")->ino, i.ino);
  ASSERT_TRUE(fs.SetOwner("f", 1000, 1000).ok());
  FileInfo read_info;
  ASSERT_TRUE(fs.ReadFileAt(root, "g", 10, &read_info).ok());
  EXPECT_EQ(read_info.uid, 1000u);  // one inode, two names
  EXPECT_EQ(fs.StatDir(root)->nlink, 3u);  // ".", its own name, and d's ".."
}

TEST(FaultFsTest, ReadRefusesLargerFilesDirectoriesAndSockets) {
  FaultFs fs;
  ASSERT_TRUE(fs.WriteFile("f", "12345").ok());
  ASSERT_TRUE(fs.MakeDirs("d").ok());
  ASSERT_TRUE(fs.MakeSocket("s").ok());
  Dir root = *fs.Root();
  EXPECT_EQ(fs.ReadFileAt(root, "f", 4, nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*fs.ReadFileAt(root, "f", 5, nullptr), "12345");
  EXPECT_EQ(fs.ReadFileAt(root, "d", 4096, nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(fs.ReadFileAt(root, "s", 4096, nullptr).ok());
  EXPECT_EQ(fs.ReadFileAt(root, "none", 4096, nullptr).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(fs.UnlinkAt(root, "d").code(), absl::StatusCode::kInternal);  // EISDIR
  EXPECT_EQ(fs.StatAt(root, "a/b").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fs.StatAt(root, "..").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FaultFsTest, SharedLocksCoexistAndExcludeAnExclusiveOne) {
  FaultFs fs;
  ASSERT_TRUE(fs.WriteFile("lease", "").ok());
  Dir root = *fs.Root();
  absl::StatusOr<std::unique_ptr<FileLock>> s1 = fs.LockAt(root, "lease", LockMode::kShared);
  absl::StatusOr<std::unique_ptr<FileLock>> s2 = fs.LockAt(root, "lease", LockMode::kShared);
  ASSERT_TRUE(s1.ok());
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(fs.LockAt(root, "lease", LockMode::kExclusive).status().code(),
            absl::StatusCode::kUnavailable);
  s1->reset();
  EXPECT_EQ(fs.LockAt(root, "lease", LockMode::kExclusive).status().code(),
            absl::StatusCode::kUnavailable);  // s2 still holds it
  s2->reset();
  absl::StatusOr<std::unique_ptr<FileLock>> x = fs.LockAt(root, "lease", LockMode::kExclusive);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ((*x)->info().ino, fs.StatAt(root, "lease")->ino);
  EXPECT_EQ(fs.LockAt(root, "lease", LockMode::kShared).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(fs.LockAt(root, "lease", LockMode::kExclusive).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(FaultFsTest, LocksDieWithTheProcessAndStaleHolderReleasesNothing) {
  FaultFs fs;
  ASSERT_TRUE(fs.WriteFile("lease", "").ok());
  Dir root = *fs.Root();
  absl::StatusOr<std::unique_ptr<FileLock>> x = fs.LockAt(root, "lease", LockMode::kExclusive);
  ASSERT_TRUE(x.ok());
  fs.KillProcess();
  Dir again = *fs.Root();
  absl::StatusOr<std::unique_ptr<FileLock>> y = fs.LockAt(again, "lease", LockMode::kExclusive);
  ASSERT_TRUE(y.ok());
  x->reset();  // the dead process's holder must not release the new one
  EXPECT_EQ(fs.LockAt(again, "lease", LockMode::kShared).status().code(),
            absl::StatusCode::kUnavailable);
  // Handles of the dead process fail.
  EXPECT_FALSE(fs.StatAt(root, "lease").ok());
}

TEST(FaultFsTest, FailStepFailsExactlyThatCallAndChangesNothing) {
  FaultFs fs;
  Dir root = *fs.Root();
  fs.FailStep(2, absl::InternalError("EIO"));
  ASSERT_TRUE(fs.MakeDirAt(root, "a", 0700).ok());                        // step 1
  EXPECT_EQ(fs.MakeDirAt(root, "b", 0700).code(), absl::StatusCode::kInternal);  // step 2
  ASSERT_TRUE(fs.MakeDirAt(root, "c", 0700).ok());                        // step 3
  EXPECT_EQ(*fs.Names(""), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(fs.steps(), 3);
  EXPECT_EQ(fs.faults_injected(), 1);
}

TEST(FaultFsTest, CrashAtStepStopsThatCallAndEveryLaterOneUntilRestart) {
  FaultFs fs;
  Dir root = *fs.Root();
  fs.CrashAtStep(2);
  ASSERT_TRUE(fs.MakeDirAt(root, "a", 0700).ok());
  EXPECT_EQ(fs.MakeDirAt(root, "b", 0700).code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(fs.crashed());
  EXPECT_EQ(fs.StatAt(root, "a").status().code(), absl::StatusCode::kAborted);  // reads too
  EXPECT_EQ(fs.ListDir(root).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(fs.Root().status().code(), absl::StatusCode::kAborted);
  fs.KillProcess();
  EXPECT_EQ(*fs.Names(""), (std::vector<std::string>{"a"}));  // b never happened
  EXPECT_TRUE(fs.Root().ok());
}

TEST(FaultFsTest, FailedSyncLosesTheDataEvenWhenALaterSyncSucceeds) {
  FaultFs fs;
  Dir root = *fs.Root();
  absl::StatusOr<std::unique_ptr<WritableFile>> f = fs.CreateExclusiveAt(root, "a", 0600);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(fs.SyncDir(root).ok());
  ASSERT_TRUE((*f)->Append("data").ok());
  fs.FailSyncs(absl::InternalError("EIO"));
  EXPECT_FALSE((*f)->Sync().ok());
  fs.FailSyncs(absl::OkStatus());
  EXPECT_TRUE((*f)->Sync().ok());  // Linux reports the error once
  EXPECT_EQ(*fs.Contents("a"), "data");
  fs.Crash({0, UnsyncedData::kKept});
  EXPECT_EQ(*fs.Contents("a"), "");
}

TEST(FaultFsTest, FailedSyncDirLeavesTheEntriesPending) {
  FaultFs fs;
  Dir root = *fs.Root();
  Write(fs, root, "a", "x", true);
  fs.FailSyncs(absl::InternalError("EIO"));
  EXPECT_FALSE(fs.SyncDir(root).ok());
  EXPECT_EQ(fs.PendingDirOps(), 1u);
  fs.Crash();
  EXPECT_FALSE(Has(fs, "a"));
}

TEST(FaultFsTest, ByteBudgetStoresWhatFitsThenReportsNoSpace) {
  FaultFs fs;
  ASSERT_TRUE(fs.WriteFile("old", "1234").ok());
  Dir root = *fs.Root();
  fs.SetByteBudget(10);
  absl::StatusOr<std::unique_ptr<WritableFile>> f = fs.CreateExclusiveAt(root, "a", 0600);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->Append("abcdefghij").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(*fs.Contents("a"), "abcdef");  // 4 bytes were already used
  EXPECT_EQ((*f)->Append("x").code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(fs.UnlinkAt(root, "old").ok());
  EXPECT_TRUE((*f)->Append("x").ok());  // unlinking freed space
}

TEST(FaultFsTest, OpenUnlinkedFileKeepsUsingSpaceUntilClosed) {
  FaultFs fs;
  Dir root = *fs.Root();
  absl::StatusOr<std::unique_ptr<WritableFile>> f = fs.CreateExclusiveAt(root, "a", 0600);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("12345").ok());
  ASSERT_TRUE(fs.UnlinkAt(root, "a").ok());
  EXPECT_EQ(fs.BytesUsed(), 5u);
  ASSERT_TRUE((*f)->Close().ok());
  EXPECT_EQ(fs.BytesUsed(), 0u);
}

TEST(FaultFsTest, FilesAndHandlesFromBeforeACrashAreDead) {
  FaultFs fs;
  Dir root = *fs.Root();
  absl::StatusOr<std::unique_ptr<WritableFile>> f = fs.CreateExclusiveAt(root, "a", 0600);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(fs.SyncDir(root).ok());
  fs.Crash();
  EXPECT_FALSE((*f)->Append("late").ok());
  EXPECT_FALSE(fs.ListDir(root).ok());
  EXPECT_EQ(*fs.Contents("a"), "");
}

// Reads `f` to the end in pieces of `chunk` bytes.
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

TEST(FaultFsTest, OpenReadAtStreamsTheFileAsItIsNowAndHasNoDescriptor) {
  FaultFs fs;
  Dir root = *fs.Root();
  absl::StatusOr<std::unique_ptr<WritableFile>> w = fs.CreateExclusiveAt(root, "a", 0400);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append("12345").ok());
  absl::StatusOr<std::unique_ptr<ReadableFile>> r = fs.OpenReadAt(root, "a");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->fd(), -1);
  EXPECT_EQ((*r)->info().ino, fs.StatAt(root, "a")->ino);
  EXPECT_EQ((*r)->info().mode, 0400u);
  EXPECT_EQ((*r)->info().size, 5u);  // what the descriptor described when it was opened
  char buf[2];
  ASSERT_EQ(*(*r)->Read(buf, 2), 2u);
  EXPECT_EQ(std::string(buf, 2), "12");
  ASSERT_TRUE((*w)->Append("678").ok());  // a read sees what was written since
  EXPECT_EQ(ReadAll(**r, 3), "345678");
  EXPECT_EQ(*(*r)->Read(buf, 2), 0u);
  EXPECT_EQ(fs.steps(), 3);  // the create and the two appends: reads are not steps
}

TEST(FaultFsTest, ReaderKeepsAnUnlinkedFileAndItsSpaceUntilDestroyed) {
  FaultFs fs;
  ASSERT_TRUE(fs.WriteFile("a", "bytes").ok());
  Dir root = *fs.Root();
  const uint64_t ino = fs.StatAt(root, "a")->ino;
  absl::StatusOr<std::unique_ptr<ReadableFile>> r = fs.OpenReadAt(root, "a");
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(fs.UnlinkAt(root, "a").ok());
  ASSERT_TRUE(fs.SyncDir(root).ok());
  EXPECT_EQ(fs.BytesUsed(), 5u);
  ASSERT_TRUE(fs.WriteFile("b", "").ok());
  EXPECT_NE(fs.StatAt(root, "b")->ino, ino) << "the number of an open file was reused";
  EXPECT_EQ(ReadAll(**r, 64), "bytes");
  r->reset();
  EXPECT_EQ(fs.BytesUsed(), 0u);
}

TEST(FaultFsTest, ReadersFromBeforeACrashAreDeadAndOpenReadRefusesWhatReadRefuses) {
  FaultFs fs;
  ASSERT_TRUE(fs.WriteFile("a", "bytes").ok());
  ASSERT_TRUE(fs.MakeDirs("d").ok());
  ASSERT_TRUE(fs.Symlink("l", "a").ok());
  ASSERT_TRUE(fs.MakeSocket("s").ok());
  Dir root = *fs.Root();
  EXPECT_EQ(fs.OpenReadAt(root, "l").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs.OpenReadAt(root, "d").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(fs.OpenReadAt(root, "s").ok());
  EXPECT_EQ(fs.OpenReadAt(root, "none").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<std::unique_ptr<ReadableFile>> r = fs.OpenReadAt(root, "a");
  ASSERT_TRUE(r.ok());
  fs.CrashAtStep(1);
  EXPECT_FALSE(fs.MakeDirAt(root, "x", 0700).ok());
  char buf[8];
  EXPECT_EQ((*r)->Read(buf, sizeof buf).status().code(), absl::StatusCode::kAborted);
  fs.Crash();
  EXPECT_FALSE((*r)->Read(buf, sizeof buf).ok());  // a descriptor of the dead process
}

TEST(FaultFsTest, FreedInodeNumberIsReusedWithANewBirthTime) {
  FaultFs fs;
  Dir root = *fs.Root();
  Write(fs, root, "lease", "", /*sync=*/true);
  ASSERT_TRUE(fs.SyncDir(root).ok());
  const FileInfo old = *fs.StatAt(root, "lease");
  EXPECT_GT(old.birth_ns, 0);
  ASSERT_TRUE(fs.UnlinkAt(root, "lease").ok());
  ASSERT_TRUE(fs.SyncDir(root).ok());  // now nothing can bring it back
  Write(fs, root, "lease", "", /*sync=*/true);
  const FileInfo fresh = *fs.StatAt(root, "lease");
  EXPECT_EQ(fresh.ino, old.ino);  // the kernel reuses the number...
  EXPECT_EQ(fresh.dev, old.dev);
  EXPECT_GT(fresh.birth_ns, old.birth_ns);  // ...but the birth time tells them apart
}

TEST(FaultFsTest, UnlinkNotYetDurableKeepsTheNumberForThePowerLossThatUndoesIt) {
  FaultFs fs;
  ASSERT_TRUE(fs.WriteFile("a", "A").ok());
  Dir root = *fs.Root();
  const FileInfo a = *fs.StatAt(root, "a");
  ASSERT_TRUE(fs.UnlinkAt(root, "a").ok());  // pending: a power loss brings "a" back
  Write(fs, root, "b", "B", /*sync=*/true);
  EXPECT_NE(fs.StatAt(root, "b")->ino, a.ino);
  fs.Crash();
  Dir again = *fs.Root();
  const FileInfo back = *fs.StatAt(again, "a");
  EXPECT_EQ(back.ino, a.ino);
  EXPECT_EQ(back.birth_ns, a.birth_ns);
  EXPECT_EQ(*fs.Contents("a"), "A");
}

TEST(FaultFsTest, AFileAPowerLossTookFreesItsNumberForTheNextFile) {
  FaultFs fs;
  Dir root = *fs.Root();
  Write(fs, root, "lease", "", /*sync=*/true);  // its name never became durable
  const FileInfo lost = *fs.StatAt(root, "lease");
  fs.Crash();
  Dir again = *fs.Root();
  EXPECT_EQ(fs.StatAt(again, "lease").status().code(), absl::StatusCode::kNotFound);
  Write(fs, again, "lease", "", /*sync=*/true);
  const FileInfo fresh = *fs.StatAt(again, "lease");
  EXPECT_EQ(fresh.ino, lost.ino);
  EXPECT_NE(fresh.birth_ns, lost.birth_ns);
}

TEST(FaultFsTest, SnapshotIsAnIndependentCopy) {
  FaultFs fs;
  ASSERT_TRUE(fs.WriteFile("a", "1").ok());
  FaultFs copy(FaultFs::Options(), fs.Snapshot());
  ASSERT_TRUE(copy.Remove("a").ok());
  EXPECT_TRUE(Has(fs, "a"));
  EXPECT_FALSE(Has(copy, "a"));
}

TEST(FaultFsTest, ConcurrentWritersEachGetTheirOwnFiles) {
  FaultFs fs;
  Dir root = *fs.Root();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&fs, &root, t] {
      for (int i = 0; i < 50; ++i) {
        const std::string name = absl::StrCat("t", t, "-", i);
        absl::StatusOr<std::unique_ptr<WritableFile>> f = fs.CreateExclusiveAt(root, name, 0600);
        if (!f.ok() || !(*f)->Append(name).ok() || !(*f)->Sync().ok() || !(*f)->Close().ok()) {
          ADD_FAILURE() << name;
        }
        (void)fs.LockAt(root, name, LockMode::kShared);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(fs.SyncDir(root).ok());
  fs.Crash();
  EXPECT_EQ(fs.Names("")->size(), 200u);
  EXPECT_EQ(*fs.Contents("t3-49"), "t3-49");
  EXPECT_EQ(fs.steps(), 0);  // a new process
}

}  // namespace
}  // namespace sn::fs
