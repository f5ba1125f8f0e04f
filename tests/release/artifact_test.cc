// common/release/artifact.h: streaming size and digest checks as checksum failures.
#include "common/release/artifact.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "common/atomic_file.h"
#include "common/release/failure.h"
#include "gtest/gtest.h"
#include "tests/release/fixture.h"

namespace sn::release::testing {
namespace {

bool IsChecksum(const absl::Status& st) { return FailureClassOf(st) == FailureClass::kChecksum; }

const ArtifactBytes kImage{"image.tar", "image", std::string(200000, 'i') + "tail"};

TEST(ArtifactVerifierTest, BytesInAnyChunkingWithTheDeclaredSizeAndDigestPass) {
  for (size_t chunk : {1u, 7u, 65536u, 300000u}) {
    ArtifactVerifier v(Describe(kImage));
    for (size_t pos = 0; pos < kImage.bytes.size(); pos += chunk) {
      ASSERT_TRUE(v.Update(std::string_view(kImage.bytes).substr(pos, chunk)).ok());
    }
    EXPECT_EQ(v.bytes_seen(), static_cast<int64_t>(kImage.bytes.size()));
    EXPECT_TRUE(v.Finish().ok()) << chunk;
  }
}

TEST(ArtifactVerifierTest, OneByteMoreThanDeclaredFailsAtOnce) {
  ArtifactVerifier v(Describe(kImage));
  ASSERT_TRUE(v.Update(kImage.bytes).ok());
  EXPECT_TRUE(IsChecksum(v.Update("x")));
  EXPECT_TRUE(IsChecksum(v.Finish()));
}

TEST(ArtifactVerifierTest, ShortOrAlteredBytesFailAtFinish) {
  ArtifactVerifier short_v(Describe(kImage));
  ASSERT_TRUE(short_v.Update(std::string_view(kImage.bytes).substr(1)).ok());
  EXPECT_TRUE(IsChecksum(short_v.Finish()));
  std::string altered = kImage.bytes;
  altered[100] = 'X';
  ArtifactVerifier v(Describe(kImage));
  ASSERT_TRUE(v.Update(altered).ok());
  EXPECT_TRUE(IsChecksum(v.Finish()));
}

TEST(ArtifactVerifierTest, AnEmptyArtifactVerifies) {
  ArtifactVerifier v(Describe({"empty", "seccomp", ""}));
  EXPECT_TRUE(v.Finish().ok());
}

TEST(VerifyFileTest, FilesAreCheckedWithoutFollowingSymlinks) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/image.tar";
  ASSERT_TRUE(WriteFileAtomically(path, kImage.bytes, 0644).ok());
  EXPECT_TRUE(VerifyFile(path, Describe(kImage)).ok());
  ArtifactBytes other = kImage;
  other.bytes.back() = 'X';
  EXPECT_TRUE(IsChecksum(VerifyFile(path, Describe(other))));
  ASSERT_EQ(symlink(path.c_str(), (dir + "/link").c_str()), 0);
  absl::Status link = VerifyFile(dir + "/link", Describe(kImage));
  EXPECT_EQ(link.code(), absl::StatusCode::kFailedPrecondition) << link;
  EXPECT_FALSE(FailureClassOf(link).has_value());
  EXPECT_EQ(VerifyFile(dir + "/absent", Describe(kImage)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(VerifyFile(dir, Describe(kImage)).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace sn::release::testing
