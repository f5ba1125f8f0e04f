#include "privhelper/store/installation.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace sn::privhelper {
namespace {

std::string TempDir() {
  std::string t = "/tmp/inst-XXXXXX";
  return mkdtemp(t.data());
}

TEST(Installation, FirstStartCreatesAPrivateIdentityThatLaterStartsKeep) {
  std::string dir = TempDir();
  auto first = LoadOrCreateInstallationId(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->size(), 36u);
  EXPECT_EQ((*first)[14], '4');  // uuid v4
  struct stat st;
  ASSERT_EQ(stat((dir + "/installation.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = LoadOrCreateInstallationId(dir);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
}

TEST(Installation, TornIdentityIsRefusedAndKeptForInspection) {
  std::string dir = TempDir();
  std::string path = dir + "/installation.json";
  { std::ofstream(path) << "{\"schema\":1,\"installation_"; }
  chmod(path.c_str(), 0600);
  auto id = LoadOrCreateInstallationId(dir);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  std::ifstream in(path);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "{\"schema\":1,\"installation_");
}

TEST(Installation, ForeignOrUnsafeIdentityFilesAreRefused) {
  std::string dir = TempDir();
  std::string path = dir + "/installation.json";
  std::string good = "{\"schema\":1,\"installation_id\":\"0000aaaa-0000-4000-8000-0000000000ff\"}";
  { std::ofstream(path) << good; }
  chmod(path.c_str(), 0644);  // readable by others: unsafe permissions
  EXPECT_EQ(LoadOrCreateInstallationId(dir).status().code(),
            absl::StatusCode::kFailedPrecondition);
  chmod(path.c_str(), 0600);
  EXPECT_TRUE(LoadOrCreateInstallationId(dir).ok());
  ASSERT_EQ(link(path.c_str(), (dir + "/second-link").c_str()), 0);  // multiply linked
  EXPECT_FALSE(LoadOrCreateInstallationId(dir).ok());
  unlink((dir + "/second-link").c_str());
  std::string dir2 = TempDir();
  ASSERT_EQ(symlink(path.c_str(), (dir2 + "/installation.json").c_str()), 0);
  EXPECT_FALSE(LoadOrCreateInstallationId(dir2).ok());  // a symlink is never followed
}

TEST(Installation, NonCanonicalIdentifierIsRefused) {
  std::string dir = TempDir();
  std::string path = dir + "/installation.json";
  { std::ofstream(path) << "{\"schema\":1,\"installation_id\":\"0000AAAA-0000-4000-8000-0000000000FF\"}"; }
  chmod(path.c_str(), 0600);
  EXPECT_FALSE(LoadOrCreateInstallationId(dir).ok());
}

}  // namespace
}  // namespace sn::privhelper
