#include "tests/privhelper/docker/image_archive.h"

#include <cstdio>
#include <cstring>
#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace sn::testing {
namespace {

void Entry(std::string& tar, const std::string& name, const std::string& content) {
  tar += TarHeader(name, '0', content.size());
  tar += content;
  tar.append((512 - content.size() % 512) % 512, '\0');
}

}  // namespace

std::string TarHeader(const std::string& name, char type, size_t size, const std::string& link) {
  char h[512];
  std::memset(h, 0, sizeof h);
  std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
  std::snprintf(h + 100, 8, "%07o", type == '5' ? 0755 : 0644);
  std::snprintf(h + 108, 8, "%07o", 0);
  std::snprintf(h + 116, 8, "%07o", 0);
  std::snprintf(h + 124, 12, "%011zo", size);
  std::snprintf(h + 136, 12, "%011o", 1700000000);
  h[156] = type;
  std::memcpy(h + 157, link.data(), std::min<size_t>(link.size(), 100));
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);
  h[155] = ' ';
  return std::string(h, sizeof h);
}

CraftedImage MakeImageArchive(size_t layer_bytes, size_t withheld) {
  std::random_device rd;
  std::mt19937_64 rng((uint64_t{rd()} << 32) | rd());
  std::string filler(layer_bytes, '\0');
  for (char& c : filler) c = static_cast<char>(rng());
  std::string layer;
  Entry(layer, "filler", filler);
  layer.append(1024, '\0');
  const std::string diff_id = Sha256Hex(layer);
  const std::string config = absl::StrCat(
      R"({"architecture":"amd64","os":"linux","config":{},"created":"2026-01-01T00:00:00Z",)",
      R"("history":[{"created":"2026-01-01T00:00:00Z","created_by":"overlapped load test"}],)",
      R"("rootfs":{"type":"layers","diff_ids":["sha256:)", diff_id, R"("]}})");
  CraftedImage out;
  out.image_id = "sha256:" + Sha256Hex(config);
  out.tag = absl::StrCat("sn-overlap-test/", Sha256Hex(filler.substr(0, 64)).substr(0, 16),
                         ":latest");
  const std::string manifest =
      absl::StrCat(R"([{"Config":")", Sha256Hex(config), R"(.json","RepoTags":[")", out.tag,
                   R"("],"Layers":[")", diff_id, R"(/layer.tar"]}])");
  std::string& tar = out.archive;
  tar += TarHeader(diff_id + "/", '5', 0);
  Entry(tar, diff_id + "/layer.tar", layer);
  Entry(tar, Sha256Hex(config) + ".json", config);
  Entry(tar, "manifest.json", manifest);
  out.entries_end = tar.size();
  tar.append(1024 + withheld, '\0');
  return out;
}

}  // namespace sn::testing
