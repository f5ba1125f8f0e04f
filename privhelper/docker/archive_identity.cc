#include "privhelper/docker/archive_identity.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/absl_view.h"
#include "common/json/reader.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace sn::docker {
namespace {

constexpr size_t kBlock = 512;
constexpr uint64_t kMaxExtensionBytes = uint64_t{64} << 10;
constexpr size_t kChunk = 64 << 10;

absl::Status Bad(std::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat("image archive: ", AV(rule)));
}

// Exactly `n` bytes, or the archive is truncated.
absl::Status ReadFull(const ArchiveSource& src, char* buf, size_t n) {
  while (n > 0) {
    ASSIGN_OR_RETURN(size_t got, src.read(buf, n));
    if (got == 0) return Bad("truncated");
    buf += got;
    n -= got;
  }
  return absl::OkStatus();
}

// The next header block; false at a clean end of the stream (no end-of-archive blocks).
absl::StatusOr<bool> ReadBlock(const ArchiveSource& src, char* block) {
  size_t have = 0;
  while (have < kBlock) {
    ASSIGN_OR_RETURN(size_t got, src.read(block + have, kBlock - have));
    if (got == 0) {
      if (have == 0) return false;
      return Bad("truncated header");
    }
    have += got;
  }
  return true;
}

absl::Status SkipBytes(const ArchiveSource& src, uint64_t n) {
  if (n == 0) return absl::OkStatus();
  if (src.skip) return src.skip(n);
  std::vector<char> buf(static_cast<size_t>(std::min<uint64_t>(n, kChunk)));
  while (n > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(n, buf.size()));
    RETURN_IF_ERROR(ReadFull(src, buf.data(), want));
    n -= want;
  }
  return absl::OkStatus();
}

uint64_t Padding(uint64_t size) { return (kBlock - size % kBlock) % kBlock; }

// A numeric header field: octal digits between optional leading spaces/NULs and a space/NUL
// terminator. nullopt for anything else, base-256 included (only for sizes over 8 GiB).
std::optional<uint64_t> Octal(const char* p, size_t n) {
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\0')) ++i;
  uint64_t v = 0;
  bool digits = false;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (v > (UINT64_MAX >> 3)) return std::nullopt;
    v = (v << 3) | static_cast<uint64_t>(p[i] - '0');
    digits = true;
  }
  for (; i < n; ++i) {
    if (p[i] != ' ' && p[i] != '\0') return std::nullopt;
  }
  if (!digits) return std::nullopt;
  return v;
}

bool ChecksumOk(const char* h) {
  std::optional<uint64_t> stored = Octal(h + 148, 8);
  if (!stored) return false;
  uint64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
  }
  return sum == *stored;
}

std::string Field(const char* p, size_t n) { return std::string(p, strnlen(p, n)); }

// The name without "." and empty components; ".." or a leading '/' refuses.
absl::StatusOr<std::string> CleanName(std::string_view raw) {
  if (!raw.empty() && raw.front() == '/') return Bad("an absolute entry name");
  std::string out;
  for (absl::string_view part : absl::StrSplit(AV(raw), '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") return Bad("an entry name with '..'");
    if (!out.empty()) out += '/';
    out.append(part.data(), part.size());
  }
  return out;
}

// The "path" and "size" records of a PAX extended header; other keys are ignored.
absl::Status ParsePax(std::string_view data, std::optional<std::string>* path,
                      std::optional<uint64_t>* size) {
  while (!data.empty()) {
    size_t space = data.find(' ');
    if (space == std::string_view::npos || space == 0 || space > 19) return Bad("a PAX record");
    uint64_t len = 0;
    for (char c : data.substr(0, space)) {
      if (c < '0' || c > '9') return Bad("a PAX record");
      len = len * 10 + static_cast<uint64_t>(c - '0');
    }
    if (len <= space + 1 || len > data.size() || data[len - 1] != '\n') return Bad("a PAX record");
    std::string_view record = data.substr(space + 1, len - space - 2);
    data.remove_prefix(len);
    size_t eq = record.find('=');
    if (eq == std::string_view::npos) return Bad("a PAX record");
    std::string_view key = record.substr(0, eq);
    std::string_view value = record.substr(eq + 1);
    if (key == "path") {
      *path = std::string(value);
    } else if (key == "size") {
      uint64_t v = 0;
      if (value.empty() || value.size() > 19) return Bad("a PAX size");
      for (char c : value) {
        if (c < '0' || c > '9') return Bad("a PAX size");
        v = v * 10 + static_cast<uint64_t>(c - '0');
      }
      *size = v;
    }
  }
  return absl::OkStatus();
}

struct Seen {
  char type = 0;
  std::optional<std::string> digest;  // regular files within the config bound
};

bool IsRegular(char type) { return type == '0' || type == '\0'; }

// The config path manifest.json names, with exactly one image and each member once.
absl::StatusOr<std::string> ConfigPath(std::string_view manifest) {
  json::Reader r(manifest, 0, 8);
  RETURN_IF_ERROR(r.BeginArray());
  ASSIGN_OR_RETURN(bool any, r.NextElement());
  if (!any) return Bad("manifest.json names no image");
  RETURN_IF_ERROR(r.BeginObject());
  absl::flat_hash_set<std::string> names;
  std::optional<std::string> config;
  std::string_view name;
  for (;;) {
    ASSIGN_OR_RETURN(bool more, r.NextMember(&name));
    if (!more) break;
    if (!names.insert(std::string(name)).second) return Bad("manifest.json repeats a member");
    if (name == "Config") {
      ASSIGN_OR_RETURN(std::string_view v, r.String());
      config = std::string(v);
    } else {
      RETURN_IF_ERROR(r.Skip());
    }
  }
  ASSIGN_OR_RETURN(bool second, r.NextElement());
  if (second) return Bad("manifest.json names more than one image");
  RETURN_IF_ERROR(r.Finish());
  if (!config) return Bad("manifest.json names no config");
  return *config;
}

// Extension headers ('x' pax, 'L' GNU long name) describe the entry that follows them; what
// they said is held here until that entry's header.
struct PendingExtensions {
  std::optional<std::string> pax_path;
  std::optional<uint64_t> pax_size;
  std::optional<std::string> long_name;
};

// True when the header at `h` was an extension or a global header (its data consumed);
// false for an entry header, left to the caller.
absl::StatusOr<bool> ConsumeExtension(const ArchiveSource& source, char type,
                                      uint64_t header_size, PendingExtensions* pending) {
  if (type == 'x' || type == 'L') {
    if (header_size > kMaxExtensionBytes) return Bad("an extension record over 64 KiB");
    std::string data(static_cast<size_t>(header_size), '\0');
    RETURN_IF_ERROR(ReadFull(source, data.data(), data.size()));
    RETURN_IF_ERROR(SkipBytes(source, Padding(header_size)));
    if (type == 'x') {
      RETURN_IF_ERROR(ParsePax(data, &pending->pax_path, &pending->pax_size));
    } else {
      pending->long_name = std::string(data.c_str());
    }
    return true;
  }
  if (type == 'g' || type == 'K') {
    RETURN_IF_ERROR(SkipBytes(source, header_size + Padding(header_size)));
    return true;
  }
  return false;
}

// The entry's name as written (pax path, GNU long name or the ustar fields), clearing what
// the extensions said.
std::string TakeRawName(const char* h, PendingExtensions* pending) {
  std::string raw;
  if (pending->pax_path) {
    raw = *pending->pax_path;
  } else if (pending->long_name) {
    raw = *pending->long_name;
  } else {
    raw = Field(h, 100);
    const bool posix = std::memcmp(h + 257, "ustar\0", 6) == 0;
    std::string prefix = posix ? Field(h + 345, 155) : "";
    if (!prefix.empty()) raw = prefix + "/" + raw;
  }
  *pending = PendingExtensions{};
  return raw;
}

// Reads a named entry's data: manifest.json kept (bounded), a regular file up to the config
// bound hashed, anything else skipped; then the padding.
absl::Status ReadEntryData(const ArchiveSource& source, const std::string& name, char type,
                           uint64_t size, Seen* seen, std::optional<std::string>* manifest) {
  // Only a regular file or a directory carries content the daemon reads.
  const uint64_t data_size = (IsRegular(type) || type == '7') ? size : 0;
  if (name == "manifest.json" && IsRegular(type)) {
    if (size > kMaxManifestBytes) return Bad("manifest.json over 1 MiB");
    std::string text(static_cast<size_t>(size), '\0');
    RETURN_IF_ERROR(ReadFull(source, text.data(), text.size()));
    *manifest = std::move(text);
  } else if (IsRegular(type) && size <= kMaxConfigBytes) {
    Sha256Stream hash;
    std::vector<char> buf(
        static_cast<size_t>(std::min<uint64_t>(std::max<uint64_t>(size, 1), kChunk)));
    for (uint64_t left = size; left > 0;) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
      RETURN_IF_ERROR(ReadFull(source, buf.data(), want));
      hash.Update(std::string_view(buf.data(), want));
      left -= want;
    }
    seen->digest = hash.FinishHex();
  } else {
    RETURN_IF_ERROR(SkipBytes(source, data_size));
  }
  return SkipBytes(source, Padding(data_size));
}

// The config blob manifest.json names, found among the entries: a regular file reached only
// through directories, hashed (so within the config bound).
absl::StatusOr<std::string> ConfigDigest(const absl::flat_hash_map<std::string, Seen>& entries,
                                         const std::optional<std::string>& manifest) {
  if (!manifest) return Bad("no manifest.json");
  ASSIGN_OR_RETURN(std::string config_raw, ConfigPath(*manifest));
  ASSIGN_OR_RETURN(std::string config, CleanName(config_raw));
  if (config.empty()) return Bad("manifest.json names no config");
  // Every directory on the way must be a directory (or not listed), never a link.
  for (size_t slash = config.find('/'); slash != std::string::npos;
       slash = config.find('/', slash + 1)) {
    auto dir = entries.find(config.substr(0, slash));
    if (dir != entries.end() && dir->second.type != '5') {
      return Bad("the config's path passes through an entry that is not a directory");
    }
  }
  auto it = entries.find(config);
  if (it == entries.end()) return Bad("the config manifest.json names is not in the archive");
  if (!IsRegular(it->second.type)) return Bad("the config is not a regular file");
  if (!it->second.digest) return Bad("the config is over 8 MiB");
  return absl::StrCat("sha256:", *it->second.digest);
}

}  // namespace

absl::StatusOr<std::string> ArchiveConfigIdentity(const ArchiveSource& source) {
  absl::flat_hash_map<std::string, Seen> entries;
  std::optional<std::string> manifest;
  PendingExtensions pending;
  char h[kBlock];
  for (;;) {
    ASSIGN_OR_RETURN(bool more, ReadBlock(source, h));
    if (!more) break;
    if (std::all_of(h, h + kBlock, [](char c) { return c == '\0'; })) break;  // end of archive
    if (!ChecksumOk(h)) return Bad("a header checksum");
    const char type = h[156];
    std::optional<uint64_t> header_size = Octal(h + 124, 12);
    if (!header_size) return Bad("an entry size");
    ASSIGN_OR_RETURN(bool extension, ConsumeExtension(source, type, *header_size, &pending));
    if (extension) continue;
    if (type == 'S') return Bad("a sparse entry");
    const uint64_t size = pending.pax_size.value_or(*header_size);
    std::string raw = TakeRawName(h, &pending);
    if (entries.size() >= kMaxArchiveEntries) return Bad("more than 10000 entries");
    ASSIGN_OR_RETURN(std::string name, CleanName(raw));
    if (name.empty()) {
      if (type != '5') return Bad("an entry with no name");
      const uint64_t data_size = (IsRegular(type) || type == '7') ? size : 0;
      RETURN_IF_ERROR(SkipBytes(source, data_size + Padding(data_size)));
      continue;
    }
    Seen seen;
    seen.type = type;
    RETURN_IF_ERROR(ReadEntryData(source, name, type, size, &seen, &manifest));
    if (!entries.emplace(name, std::move(seen)).second) return Bad("an entry name twice");
  }
  return ConfigDigest(entries, manifest);
}

}  // namespace sn::docker
