#include "tools/release/rootfs_docker.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/json/reader.h"
#include "common/status_macros.h"

namespace sn::release_tool::rootfs {
namespace {

constexpr size_t kReadBlock = 64 * 1024;
constexpr int kMaxLinkHops = 16;

struct ReadFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ReadPtr = std::unique_ptr<archive, ReadFree>;

absl::Status Bad(std::string_view what) {
  return absl::FailedPreconditionError(absl::string_view(what.data(), what.size()));
}

std::string ArchiveError(archive* a) {
  const char* e = archive_error_string(a);
  return e == nullptr ? "unknown libarchive error" : e;
}

std::string Quoted(std::string_view s) {
  return absl::StrCat("\"", absl::CHexEscape(absl::string_view(s.data(), s.size())), "\"");
}

// A manifest.json error as a refusal (the JSON reader's own errors are InvalidArgument).
absl::Status ManifestError(const absl::Status& s) {
  return Bad(absl::StrCat("manifest.json: ", s.message()));
}

absl::StatusOr<std::vector<std::string>> StringArray(json::Reader& r) {
  std::vector<std::string> out;
  if (absl::Status s = r.BeginArray(); !s.ok()) return ManifestError(s);
  for (;;) {
    absl::StatusOr<bool> more = r.NextElement();
    if (!more.ok()) return ManifestError(more.status());
    if (!*more) return out;
    absl::StatusOr<std::string_view> v = r.String();
    if (!v.ok()) return ManifestError(v.status());
    out.emplace_back(*v);
  }
}

absl::Status ParseImageMember(json::Reader& r, const std::string& name, SavedImage* image) {
  if (name == "Config") {
    absl::StatusOr<std::string_view> v = r.String();
    if (!v.ok()) return ManifestError(v.status());
    image->config = std::string(*v);
  } else if (name == "RepoTags" &&
             r.Peek().value_or(json::ValueType::kNull) == json::ValueType::kNull) {
    if (absl::Status s = r.Null(); !s.ok()) return ManifestError(s);
  } else if (name == "RepoTags") {
    ASSIGN_OR_RETURN(image->repo_tags, StringArray(r));
  } else if (name == "Layers") {
    ASSIGN_OR_RETURN(image->layers, StringArray(r));
  } else if (absl::Status s = r.Skip(); !s.ok()) {
    return ManifestError(s);
  }
  return absl::OkStatus();
}

absl::StatusOr<SavedImage> ParseImage(json::Reader& r) {
  if (absl::Status s = r.BeginObject(); !s.ok()) return ManifestError(s);
  SavedImage image;
  std::string_view name;
  for (;;) {
    absl::StatusOr<bool> more = r.NextMember(&name);
    if (!more.ok()) return ManifestError(more.status());
    if (!*more) break;
    RETURN_IF_ERROR(ParseImageMember(r, std::string(name), &image));
  }
  if (image.config.empty()) return Bad("manifest.json: an image has no Config");
  if (image.layers.size() > kMaxLayers) {
    return Bad(absl::StrCat("manifest.json: an image has more than ", kMaxLayers, " layers"));
  }
  return image;
}

std::string TagsOf(const std::vector<SavedImage>& images) {
  std::vector<std::string> tags;
  for (const SavedImage& i : images) {
    if (i.repo_tags.empty()) tags.push_back("an untagged image (" + Quoted(i.config) + ")");
    for (const std::string& t : i.repo_tags) tags.push_back(Quoted(t));
  }
  return absl::StrJoin(tags, ", ");
}

// A member's name as the index keys it ("./a//b" -> "a/b").
absl::StatusOr<std::string> MemberName(const char* raw) {
  if (raw == nullptr) return Bad("the archive has a member without a name");
  absl::StatusOr<std::vector<std::string>> parts = SplitEntryName(raw);
  if (!parts.ok() || parts->empty()) {
    return Bad(absl::StrCat("the archive's member ", Quoted(raw), " has an unusable name"));
  }
  return JoinComponents(*parts, parts->size());
}

// The member a symbolic link `target` in member `name` points to (relative to its directory).
absl::StatusOr<std::string> LinkTarget(const std::string& name, const char* target) {
  const std::string t = target == nullptr ? "" : target;
  if (t.empty() || t.front() == '/') {
    return Bad(absl::StrCat("the archive's member ", Quoted(name), " links outside it"));
  }
  std::vector<std::string> parts;
  const size_t slash = name.rfind('/');
  const std::string joined = slash == std::string::npos ? t : name.substr(0, slash + 1) + t;
  size_t start = 0;
  while (start <= joined.size()) {
    size_t end = joined.find('/', start);
    if (end == std::string::npos) end = joined.size();
    const std::string part = joined.substr(start, end - start);
    start = end + 1;
    if (part.empty() || part == ".") continue;
    if (part != "..") {
      parts.push_back(part);
    } else if (parts.empty()) {
      return Bad(absl::StrCat("the archive's member ", Quoted(name), " links outside it"));
    } else {
      parts.pop_back();
    }
  }
  return JoinComponents(parts, parts.size());
}

absl::StatusOr<ReadPtr> OpenOuter(int fd, const std::string& path) {
  if (lseek(fd, 0, SEEK_SET) != 0) return ErrnoStatus(errno, "seek " + path);
  ReadPtr a(archive_read_new());
  if (a == nullptr) return absl::ResourceExhaustedError("archive_read_new");
  archive_read_support_format_tar(a.get());
  if (archive_read_open_fd(a.get(), fd, kReadBlock) != ARCHIVE_OK) {
    return Bad(absl::StrCat(path, ": ", ArchiveError(a.get())));
  }
  return a;
}

absl::StatusOr<std::string> ReadSmallMember(archive* a, archive_entry* e) {
  if (archive_entry_size(e) < 0 ||
      static_cast<uint64_t>(archive_entry_size(e)) > kMaxManifestBytes) {
    return Bad(absl::StrCat("manifest.json is over ", kMaxManifestBytes, " bytes"));
  }
  std::string out(static_cast<size_t>(archive_entry_size(e)), '\0');
  size_t have = 0;
  while (have < out.size()) {
    const la_ssize_t n = archive_read_data(a, out.data() + have, out.size() - have);
    if (n < 0) return Bad(absl::StrCat("manifest.json: ", ArchiveError(a)));
    if (n == 0) return Bad("manifest.json is truncated");
    have += static_cast<size_t>(n);
  }
  return out;
}

// A layer member's bytes as a libarchive read callback.
struct Nested {
  archive* outer;
  std::vector<char> buf;
};

la_ssize_t NestedRead(archive* inner, void* client, const void** out) {
  auto* n = static_cast<Nested*>(client);
  const la_ssize_t got = archive_read_data(n->outer, n->buf.data(), n->buf.size());
  if (got < 0) {
    archive_set_error(inner, EIO, "%s", ArchiveError(n->outer).c_str());
    return -1;
  }
  *out = n->buf.data();
  return got;
}

}  // namespace

absl::StatusOr<std::vector<SavedImage>> ParseSavedManifest(std::string_view text) {
  json::Reader r(text, 0, 16);
  if (absl::Status s = r.BeginArray(); !s.ok()) return ManifestError(s);
  std::vector<SavedImage> images;
  for (;;) {
    absl::StatusOr<bool> more = r.NextElement();
    if (!more.ok()) return ManifestError(more.status());
    if (!*more) break;
    ASSIGN_OR_RETURN(SavedImage image, ParseImage(r));
    images.push_back(std::move(image));
  }
  if (absl::Status s = r.Finish(); !s.ok()) return ManifestError(s);
  if (images.empty()) return Bad("manifest.json names no image");
  return images;
}

absl::StatusOr<SavedImage> SelectImage(const std::vector<SavedImage>& images,
                                       const std::optional<std::string>& ref) {
  if (!ref.has_value()) {
    if (images.size() == 1) return images.front();
    return Bad(absl::StrCat("the archive holds ", images.size(), " images (", TagsOf(images),
                            "); choose one with --image=REF"));
  }
  for (const SavedImage& i : images) {
    for (const std::string& t : i.repo_tags) {
      if (t == *ref) return i;
    }
  }
  return Bad(absl::StrCat("no image in the archive has the tag ", Quoted(*ref), " (it holds ",
                          TagsOf(images), ")"));
}

absl::StatusOr<DockerArchive> DockerArchive::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus(errno, "open " + path);
  DockerArchive a;
  a.path_ = path;
  a.fd_ = UniqueFd(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoStatus(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return Bad(path + " is not a regular file");
  RETURN_IF_ERROR(a.Index());
  if (a.manifest_.empty()) return Bad(path + " has no manifest.json (not a `docker save` archive)");
  ASSIGN_OR_RETURN(a.images_, ParseSavedManifest(a.manifest_));
  return a;
}

absl::Status DockerArchive::Index() {
  ASSIGN_OR_RETURN(ReadPtr a, OpenOuter(fd_.get(), path_));
  for (size_t count = 0;; ++count) {
    archive_entry* e = nullptr;
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) return absl::OkStatus();
    if (r != ARCHIVE_OK) return Bad(absl::StrCat(path_, ": ", ArchiveError(a.get())));
    if (count >= kMaxArchiveEntries) {
      return Bad(absl::StrCat(path_, " has more than ", kMaxArchiveEntries, " members"));
    }
    ASSIGN_OR_RETURN(std::string name, MemberName(archive_entry_pathname(e)));
    Member m;
    if (const char* hard = archive_entry_hardlink(e)) {
      ASSIGN_OR_RETURN(m.link, MemberName(hard));
    } else if (archive_entry_filetype(e) == AE_IFLNK) {
      ASSIGN_OR_RETURN(m.link, LinkTarget(name, archive_entry_symlink(e)));
    } else {
      m.regular = archive_entry_filetype(e) == AE_IFREG;
    }
    if (name == "manifest.json" && m.regular) {
      ASSIGN_OR_RETURN(manifest_, ReadSmallMember(a.get(), e));
    }
    if (!members_.emplace(name, std::move(m)).second) {
      return Bad(absl::StrCat(path_, " holds the member ", Quoted(name), " twice"));
    }
  }
}

absl::StatusOr<std::string> DockerArchive::Resolve(const std::string& wanted) const {
  std::string name = wanted;
  for (int hop = 0; hop <= kMaxLinkHops; ++hop) {
    auto it = members_.find(name);
    if (it == members_.end()) {
      return Bad(absl::StrCat("the archive has no member ", Quoted(name),
                              " (manifest.json names ", Quoted(wanted), ")"));
    }
    if (!it->second.link.has_value()) {
      if (it->second.regular) return name;
      return Bad(absl::StrCat("the member ", Quoted(name), " is not a file"));
    }
    name = *it->second.link;
  }
  return Bad(absl::StrCat("the member ", Quoted(wanted), " is a chain of links"));
}

absl::Status DockerArchive::CheckMember(const std::string& name) const {
  ASSIGN_OR_RETURN(std::string member, MemberName(name.c_str()));
  return Resolve(member).status();
}

absl::Status DockerArchive::ReadLayer(
    const std::string& name, const std::function<absl::Status(archive*)>& apply) const {
  ASSIGN_OR_RETURN(std::string wanted, MemberName(name.c_str()));
  ASSIGN_OR_RETURN(std::string member, Resolve(wanted));
  ASSIGN_OR_RETURN(ReadPtr outer, OpenOuter(fd_.get(), path_));
  for (;;) {
    archive_entry* e = nullptr;
    const int r = archive_read_next_header(outer.get(), &e);
    if (r == ARCHIVE_EOF) return Bad(absl::StrCat("the member ", Quoted(member), " vanished"));
    if (r != ARCHIVE_OK) return Bad(absl::StrCat(path_, ": ", ArchiveError(outer.get())));
    absl::StatusOr<std::string> n = MemberName(archive_entry_pathname(e));
    if (n.ok() && *n == member && archive_entry_hardlink(e) == nullptr) break;
  }
  Nested nested{outer.get(), std::vector<char>(kReadBlock)};
  ReadPtr inner(archive_read_new());
  if (inner == nullptr) return absl::ResourceExhaustedError("archive_read_new");
  archive_read_support_format_tar(inner.get());
  if (archive_read_support_filter_gzip(inner.get()) != ARCHIVE_OK) {
    return absl::InternalError("this libarchive cannot read gzip by itself");
  }
  if (archive_read_open(inner.get(), &nested, nullptr, NestedRead, nullptr) != ARCHIVE_OK) {
    return Bad(absl::StrCat("layer ", Quoted(name), ": ", ArchiveError(inner.get())));
  }
  return apply(inner.get());
}

}  // namespace sn::release_tool::rootfs
