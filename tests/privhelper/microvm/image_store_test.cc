// The microVM provider's content-addressed image store: the identity is the hash of every
// byte, only filesystem images are taken, a stored image is whole or absent, and Resolve
// answers only the store's own 0444 file.
#include "privhelper/microvm/image_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/sha256.h"
#include "gtest/gtest.h"
#include "privhelper/store/prep_failure.h"

namespace sn::microvm {
namespace {

// The first 4 KiB of an ext4 image: zeros but the superblock magic 0xEF53 at 1080.
std::string Ext4Like(char fill) {
  std::string b(4096, fill);
  b[1080] = '\x53';
  b[1081] = '\xEF';
  return b;
}

std::string ErofsLike() {
  std::string b(4096, '\0');
  b[1024] = '\xE2';
  b[1025] = '\xE1';
  b[1026] = '\xF5';
  b[1027] = '\xE0';
  return b;
}

// A source over `bytes` that yields at most `piece` bytes a call.
privhelper::ImageImporter::Source SourceOf(const std::string& bytes, size_t piece = 1000) {
  auto at = std::make_shared<size_t>(0);
  return [bytes, piece, at](char* buf, size_t n) -> absl::StatusOr<size_t> {
    const size_t k = std::min({n, piece, bytes.size() - *at});
    std::copy_n(bytes.data() + *at, k, buf);
    *at += k;
    return k;
  };
}

class ImageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sn-images-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/images";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::vector<std::string> Names() {
    std::vector<std::string> out;
    if (!std::filesystem::exists(dir_)) return out;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      out.push_back(e.path().filename());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string root_, dir_;
};

TEST_F(ImageStoreTest, TheIdentityIsTheHashOfEveryByteAndOnlyFilesystemsAreTaken) {
  MicrovmImageStore store(dir_);
  const std::string image = Ext4Like('\0') + std::string(10000, 'x');
  absl::StatusOr<std::string> id = store.ArchiveIdentity(SourceOf(image), nullptr, image.size());
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "sha256:" + Sha256Hex(image));
  EXPECT_TRUE(store.ArchiveIdentity(SourceOf(ErofsLike()), nullptr, 4096).ok());

  // Not a filesystem image (a tar archive, say): configuration_invalid.
  const std::string tar(4096, 'a');
  absl::StatusOr<std::string> bad = store.ArchiveIdentity(SourceOf(tar), nullptr, tar.size());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(privhelper::store::PrepDiagnosticOf(bad.status()), Diagnostic::kConfigurationInvalid);
  // Fewer bytes than announced.
  bad = store.ArchiveIdentity(SourceOf(image), nullptr, image.size() + 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(privhelper::store::PrepDiagnosticOf(bad.status()), Diagnostic::kConfigurationInvalid);
  EXPECT_TRUE(Names().empty());
}

TEST_F(ImageStoreTest, ALoadedImageIsStoredReadOnlyUnderItsHashAndResolvedToItsIdentity) {
  MicrovmImageStore store(dir_);
  const std::string image = Ext4Like('\0') + std::string(3 << 20, 'y');
  const std::string id = "sha256:" + Sha256Hex(image);
  EXPECT_TRUE(absl::IsNotFound(store.Resolve(id).status()));
  ASSERT_TRUE(store.Load(SourceOf(image, 65536), image.size()).ok());
  EXPECT_EQ(Names(), std::vector<std::string>({"sha256-" + Sha256Hex(image) + ".img"}));
  absl::StatusOr<std::string> native = store.Resolve(id);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_EQ(*native, id);  // what the generation records; the file is PathOf's
  absl::StatusOr<std::string> path = store.PathOf(id);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir_ + "/sha256-" + Sha256Hex(image) + ".img");
  struct stat st;
  ASSERT_EQ(stat(path->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0444u);
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);  // qemu, as the VM's uid, reads the images
  std::ifstream in(*path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), image);
  // Loading it again changes nothing.
  ASSERT_TRUE(store.Load(SourceOf(image), image.size()).ok());
  EXPECT_EQ(Names().size(), 1u);
  // Not an identity at all.
  EXPECT_TRUE(absl::IsNotFound(store.Resolve("sha256:ABC").status()));
  EXPECT_TRUE(absl::IsNotFound(store.Resolve("busybox:latest").status()));
}

TEST_F(ImageStoreTest, AFailedLoadLeavesNoImageAndNoTemporaryFile) {
  MicrovmImageStore store(dir_);
  const std::string image = Ext4Like('\0') + std::string(5000, 'z');
  // The stream ends early.
  EXPECT_FALSE(store.Load(SourceOf(image), image.size() + 10).ok());
  // The stream fails.
  auto failing = [](char*, size_t) -> absl::StatusOr<size_t> {
    return absl::UnavailableError("the release's file went away");
  };
  EXPECT_FALSE(store.Load(failing, 100).ok());
  // Not a filesystem.
  const std::string junk(8192, 'j');
  EXPECT_FALSE(store.Load(SourceOf(junk), junk.size()).ok());
  EXPECT_TRUE(Names().empty());
}

TEST_F(ImageStoreTest, RecoverRemovesWhatAnInterruptedLoadLeftAndNothingElse) {
  MicrovmImageStore store(dir_);
  const std::string image = Ext4Like('\1');
  ASSERT_TRUE(store.Load(SourceOf(image), image.size()).ok());
  std::ofstream(dir_ + "/.load-0011223344556677") << "half an image";
  ASSERT_TRUE(store.Recover().ok());
  EXPECT_EQ(Names(), std::vector<std::string>({"sha256-" + Sha256Hex(image) + ".img"}));
  MicrovmImageStore fresh(root_ + "/never-made");
  EXPECT_TRUE(fresh.Recover().ok());
}

TEST_F(ImageStoreTest, ResolveRefusesAFileThatIsNotTheStoresOwn) {
  MicrovmImageStore store(dir_);
  const std::string image = Ext4Like('\2');
  const std::string id = "sha256:" + Sha256Hex(image);
  ASSERT_TRUE(store.Load(SourceOf(image), image.size()).ok());
  const std::string path = dir_ + "/" + MicrovmImageStore::FileName(id);

  // Writable again: refused, ownership_refused.
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  absl::StatusOr<std::string> r = store.Resolve(id);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(privhelper::store::PrepDiagnosticOf(r.status()), Diagnostic::kOwnershipRefused);
  ASSERT_EQ(chmod(path.c_str(), 0444), 0);
  ASSERT_TRUE(store.Resolve(id).ok());

  // A second link to it (from where another could change it): refused.
  ASSERT_EQ(link(path.c_str(), (root_ + "/other").c_str()), 0);
  EXPECT_FALSE(store.Resolve(id).ok());
  ASSERT_EQ(unlink((root_ + "/other").c_str()), 0);

  // A symlink in its place: refused, not followed.
  const std::string target = root_ + "/elsewhere.img";
  std::filesystem::rename(path, target);
  ASSERT_EQ(symlink(target.c_str(), path.c_str()), 0);
  r = store.Resolve(id);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(privhelper::store::PrepDiagnosticOf(r.status()), Diagnostic::kOwnershipRefused);
}

TEST_F(ImageStoreTest, ForgetRemovesExactlyTheNamedImages) {
  MicrovmImageStore store(dir_);
  const std::string a = Ext4Like('a'), b = Ext4Like('b');
  ASSERT_TRUE(store.Load(SourceOf(a), a.size()).ok());
  ASSERT_TRUE(store.Load(SourceOf(b), b.size()).ok());
  const std::string ida = "sha256:" + Sha256Hex(a), idb = "sha256:" + Sha256Hex(b);
  absl::StatusOr<std::string> pathb = store.Resolve(idb);
  ASSERT_TRUE(pathb.ok());
  // By identity and by the path Resolve answered; one not held is skipped.
  ASSERT_TRUE(store.ForgetImages({ida}).ok());
  EXPECT_EQ(Names(), std::vector<std::string>({MicrovmImageStore::FileName(idb)}));
  ASSERT_TRUE(store.ForgetImages({*pathb, ida}).ok());
  EXPECT_TRUE(Names().empty());
  // Anything else is refused and removes nothing.
  ASSERT_TRUE(store.Load(SourceOf(a), a.size()).ok());
  EXPECT_FALSE(store.ForgetImages({dir_ + "/../images/x"}).ok());
  EXPECT_FALSE(store.ForgetImages({"/etc/passwd"}).ok());
  EXPECT_EQ(Names().size(), 1u);
}

}  // namespace
}  // namespace sn::microvm
