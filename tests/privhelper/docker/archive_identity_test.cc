// The config identity a `docker save` archive produces, derived from its bytes: a crafted
// archive's known image ID, the layouts the daemon reads (PAX and GNU long names, "./" names,
// implicit directories), and every archive whose reading by the daemon could differ from ours,
// refused.
#include "privhelper/docker/archive_identity.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/privhelper/docker/image_archive.h"

namespace sn::docker {
namespace {

using sn::testing::TarHeader;

std::string Header(const std::string& name, char type, size_t size,
                   const std::string& link = "") {
  return TarHeader(name, type, size, link);
}

std::string Padded(const std::string& content) {
  return content + std::string((512 - content.size() % 512) % 512, '\0');
}

std::string File(const std::string& name, const std::string& content) {
  return Header(name, '0', content.size()) + Padded(content);
}

std::string Pax(const std::string& key, const std::string& value) {
  std::string body = absl::StrCat(" ", key, "=", value, "\n");
  size_t len = body.size() + 1;
  while (std::to_string(len).size() + body.size() != len) ++len;
  std::string record = absl::StrCat(len, body);
  return Header("PaxHeaders/x", 'x', record.size()) + Padded(record);
}

std::string End() { return std::string(1024, '\0'); }

const std::string kConfig = R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers"}})";
std::string ConfigId() { return "sha256:" + Sha256Hex(kConfig); }

std::string Manifest(const std::string& config_path) {
  return absl::StrCat(R"([{"Config":")", config_path, R"(","RepoTags":null,"Layers":[]}])");
}

absl::StatusOr<std::string> Derive(const std::string& archive, uint64_t* skipped = nullptr) {
  size_t pos = 0;
  ArchiveSource src;
  src.read = [&](char* buf, size_t n) -> absl::StatusOr<size_t> {
    size_t k = std::min(n, archive.size() - pos);
    std::memcpy(buf, archive.data() + pos, k);
    pos += k;
    return k;
  };
  if (skipped != nullptr) {
    src.skip = [&](uint64_t n) -> absl::Status {
      if (n > archive.size() - pos) return absl::InvalidArgumentError("skip past the end");
      pos += n;
      *skipped += n;
      return absl::OkStatus();
    };
  }
  return ArchiveConfigIdentity(src);
}

TEST(ArchiveIdentityTest, ACraftedArchiveYieldsItsImageId) {
  sn::testing::CraftedImage image = sn::testing::MakeImageArchive(4096, 0);
  absl::StatusOr<std::string> id = Derive(image.archive);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, image.image_id);
}

TEST(ArchiveIdentityTest, ALayerOverTheConfigBoundIsSkippedNotRead) {
  std::string big(kMaxConfigBytes + 1, 'x');
  std::string archive = File("layer/layer.tar", big) + File("c.json", kConfig) +
                        File("manifest.json", Manifest("c.json")) + End();
  uint64_t skipped = 0;
  absl::StatusOr<std::string> id = Derive(archive, &skipped);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, ConfigId());
  EXPECT_GE(skipped, big.size());
}

TEST(ArchiveIdentityTest, NamesAreReadAsTheDaemonReadsThem) {
  // "./" prefixes, a PAX path and a GNU long name, implicit directories.
  const std::string long_dir(120, 'd');
  std::string long_name = long_dir + "/c.json";
  std::string gnu = Header("././@LongLink", 'L', long_name.size() + 1) +
                    Padded(long_name + std::string(1, '\0'));
  std::string archive = gnu + Header("ignored", '0', kConfig.size()) + Padded(kConfig) +
                        File("./manifest.json", Manifest(long_name)) + End();
  absl::StatusOr<std::string> id = Derive(archive);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, ConfigId());

  std::string pax = Pax("path", "blobs/sha256/" + Sha256Hex(kConfig)) +
                    Header("short", '0', kConfig.size()) + Padded(kConfig) +
                    File("manifest.json", Manifest("./blobs/sha256/" + Sha256Hex(kConfig))) +
                    End();
  id = Derive(pax);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, ConfigId());
}

TEST(ArchiveIdentityTest, APaxSizeDecidesWhereTheNextHeaderIs) {
  // The header says 0 bytes; the PAX record says the real size, as the daemon's reader honours.
  std::string archive = Pax("size", std::to_string(kConfig.size())) +
                        Header("c.json", '0', 0) + Padded(kConfig) +
                        File("manifest.json", Manifest("c.json")) + End();
  absl::StatusOr<std::string> id = Derive(archive);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, ConfigId());
}

struct Refusal {
  const char* what;
  std::string archive;
};

TEST(ArchiveIdentityTest, ArchivesTheDaemonCouldReadOtherwiseAreRefused) {
  const std::string other = R"({"os":"linux","other":true})";
  std::string config = File("c.json", kConfig);
  std::vector<Refusal> cases = {
      {"no manifest", config + End()},
      {"two images",
       config + File("d.json", other) +
           File("manifest.json",
                R"([{"Config":"c.json","Layers":[]},{"Config":"d.json","Layers":[]}])") +
           End()},
      {"no image", config + File("manifest.json", "[]") + End()},
      {"Config twice",
       config + File("d.json", other) +
           File("manifest.json", R"([{"Config":"c.json","Config":"d.json"}])") + End()},
      {"a duplicate inside a skipped member",
       config + File("manifest.json", R"([{"Config":"c.json","X":{"a":1,"a":2}}])") + End()},
      {"Config not a string", config + File("manifest.json", R"([{"Config":1}])") + End()},
      {"no Config", config + File("manifest.json", R"([{"Layers":[]}])") + End()},
      {"manifest not JSON", config + File("manifest.json", "[{") + End()},
      {"config missing", File("manifest.json", Manifest("c.json")) + End()},
      {"config a symlink",
       config + Header("l.json", '2', 0, "c.json") + File("manifest.json", Manifest("l.json")) +
           End()},
      {"config a hard link",
       config + Header("l.json", '1', 0, "c.json") + File("manifest.json", Manifest("l.json")) +
           End()},
      {"config through a linked directory",
       Header("real/", '5', 0) + File("real/c.json", kConfig) + Header("dir", '2', 0, "real") +
           File("manifest.json", Manifest("dir/c.json")) + End()},
      {"a name twice", config + File("./c.json", other) +
                           File("manifest.json", Manifest("c.json")) + End()},
      {"manifest twice", config + File("manifest.json", Manifest("c.json")) +
                             File("manifest.json", Manifest("c.json")) + End()},
      {"a name with ..",
       File("../c.json", kConfig) + File("manifest.json", Manifest("c.json")) + End()},
      {"an absolute name",
       File("/c.json", kConfig) + File("manifest.json", Manifest("c.json")) + End()},
      {"a config path with ..",
       config + File("manifest.json", Manifest("x/../c.json")) + End()},
      {"truncated", (config + File("manifest.json", Manifest("c.json"))).substr(0, 700)},
      {"config over 8 MiB",
       File("c.json", std::string(kMaxConfigBytes + 1, '{')) +
           File("manifest.json", Manifest("c.json")) + End()},
  };
  std::string bad_sum = config;
  bad_sum[10] ^= 1;  // a name byte changed, the checksum kept
  cases.push_back({"bad checksum", bad_sum + File("manifest.json", Manifest("c.json")) + End()});
  for (const Refusal& c : cases) {
    absl::StatusOr<std::string> id = Derive(c.archive);
    EXPECT_FALSE(id.ok()) << c.what << ": derived " << id.value_or("");
    if (!id.ok()) {
      EXPECT_TRUE(absl::IsInvalidArgument(id.status())) << c.what << ": " << id.status();
    }
  }
}

TEST(ArchiveIdentityTest, TheEntryBoundHolds) {
  std::string archive;
  for (size_t i = 0; i <= kMaxArchiveEntries; ++i) {
    archive += Header(absl::StrCat("d", i, "/"), '5', 0);
  }
  archive += File("c.json", kConfig) + File("manifest.json", Manifest("c.json")) + End();
  absl::StatusOr<std::string> id = Derive(archive);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("10000 entries"), std::string::npos) << id.status();
}

}  // namespace
}  // namespace sn::docker
