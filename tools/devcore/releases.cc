#include "tools/devcore/releases.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <memory>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/release/layout.h"
#include "common/wire/validate.h"

namespace sn::devcore {
namespace {

constexpr std::string_view kPrefix = "/releases/";

// An owned descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// Opens a regular file `name` in `dirfd` without following symlinks; nullopt when absent or
// not a regular file.
std::optional<Fd> OpenRegular(int dirfd, const std::string& name, struct stat* st) {
  Fd fd(openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0 || fstat(fd.get(), st) != 0 || !S_ISREG(st->st_mode)) return std::nullopt;
  return fd;
}

// Reads a whole small regular file; nullopt when absent, not regular or larger than `max`.
std::optional<std::string> ReadSmall(int dirfd, const std::string& name, size_t max) {
  struct stat st;
  std::optional<Fd> fd = OpenRegular(dirfd, name, &st);
  if (!fd || static_cast<uint64_t>(st.st_size) > max) return std::nullopt;
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = pread(fd->get(), out.data() + got, out.size() - got,
                            static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    got += static_cast<size_t>(n);
  }
  return out;
}

std::optional<uint64_t> ParseUint(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  uint64_t v = 0;
  if (!absl::SimpleAtoi(absl::string_view(s.data(), s.size()), &v)) return std::nullopt;
  return v;
}

std::string ETagOf(const struct stat& st) {
  return absl::StrCat("\"", st.st_ino, "-", st.st_size, "-", st.st_mtim.tv_sec, ".",
                      st.st_mtim.tv_nsec, "\"");
}

HttpResponse NotFound() { return JsonError(404, "no such release file"); }

HttpResponse ServeFile(int dirfd, const std::string& name, std::string content_type,
                       const HttpRequest& req,
                       uint64_t cut_after = std::numeric_limits<uint64_t>::max()) {
  struct stat st;
  std::optional<Fd> fd = OpenRegular(dirfd, name, &st);
  if (!fd) return NotFound();
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const std::string etag = ETagOf(st);
  RangeDecision range = DecideRange(req.range, size);
  if (!req.if_range.empty() && req.if_range != etag) range = RangeDecision{};  // whole file
  HttpResponse r(200, std::move(content_type), "");
  r.headers.emplace_back("Accept-Ranges", "bytes");
  r.headers.emplace_back("ETag", etag);
  switch (range.kind) {
    case RangeDecision::Kind::kUnsatisfiable:
      r.status = 416;
      r.content_type = "application/json";
      r.body = JsonError(416, "range not satisfiable").body;
      r.headers.emplace_back("Content-Range", absl::StrCat("bytes */", size));
      return r;
    case RangeDecision::Kind::kPartial:
      r.status = 206;
      r.headers.emplace_back("Content-Range",
                             absl::StrCat("bytes ", range.first, "-",
                                          range.first + range.length - 1, "/", size));
      {
        auto body = std::make_shared<FileBody>(fd->release(), range.first, range.length);
        body->cut_after = cut_after;
        r.file = std::move(body);
      }
      return r;
    case RangeDecision::Kind::kWhole:
      break;
  }
  auto body = std::make_shared<FileBody>(fd->release(), 0, size);
  body->cut_after = cut_after;
  r.file = std::move(body);
  return r;
}

}  // namespace

RangeDecision DecideRange(std::string_view header, uint64_t size) {
  constexpr std::string_view kUnit = "bytes=";
  RangeDecision whole;
  if (header.substr(0, kUnit.size()) != kUnit) return whole;
  const std::string_view spec = header.substr(kUnit.size());
  const size_t dash = spec.find('-');
  if (dash == std::string_view::npos || spec.find(',') != std::string_view::npos) return whole;
  const std::string_view a = spec.substr(0, dash);
  const std::string_view b = spec.substr(dash + 1);
  RangeDecision out;
  if (a.empty()) {  // "-n": the last n bytes
    std::optional<uint64_t> n = ParseUint(b);
    if (!n) return whole;
    if (*n == 0 || size == 0) return {RangeDecision::Kind::kUnsatisfiable};
    const uint64_t len = std::min(*n, size);
    return {RangeDecision::Kind::kPartial, size - len, len};
  }
  std::optional<uint64_t> first = ParseUint(a);
  if (!first) return whole;
  uint64_t last = std::numeric_limits<uint64_t>::max();
  if (!b.empty()) {
    std::optional<uint64_t> l = ParseUint(b);
    if (!l || *l < *first) return whole;  // invalid: ignored (RFC 7233 §3.1)
    last = *l;
  }
  if (*first >= size) return {RangeDecision::Kind::kUnsatisfiable};
  last = std::min(last, size - 1);
  out.kind = RangeDecision::Kind::kPartial;
  out.first = *first;
  out.length = last - *first + 1;
  return out;
}

bool ReleaseRoutes::Matches(std::string_view path) {
  return path == "/releases" || path.substr(0, kPrefix.size()) == kPrefix;
}

absl::StatusOr<wire::ReleaseManifest> ReleaseRoutes::Manifest(std::string_view source) const {
  if (dir_.empty() || !wire::IsReleaseSourceName(source)) {
    return absl::NotFoundError("no such release");
  }
  Fd root(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) return absl::NotFoundError("no releases directory");
  Fd rel(openat(root.get(), std::string(source).c_str(),
                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (rel.get() < 0) return absl::NotFoundError("no such release");
  std::optional<std::string> bytes = ReadSmall(rel.get(), std::string(release::kManifestFileName),
                                               release::kMaxManifestBytes);
  if (!bytes) return absl::NotFoundError("the release has no readable manifest.json");
  absl::StatusOr<wire::ReleaseManifest> m = wire::DecodeReleaseManifest(*bytes);
  if (!m.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the release's manifest fails §6: ", m.status().message()));
  }
  return m;
}

HttpResponse ReleaseRoutes::Handle(const HttpRequest& req) const {
  if (req.method != "GET") return JsonError(405, "method not allowed");
  if (dir_.empty()) return NotFound();
  const std::string_view path = TargetPath(req.target);
  if (path.substr(0, kPrefix.size()) != kPrefix) return NotFound();
  const std::string_view rest = path.substr(kPrefix.size());
  Fd root(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) return NotFound();
  if (rest == release::kCurrentFileName) {
    std::optional<std::string> text = ReadSmall(root.get(), std::string(release::kCurrentFileName),
                                                release::kMaxCurrentFileBytes);
    if (!text) return JsonError(404, "no current release");
    absl::StatusOr<std::string> source = release::ParseCurrentFile(*text);
    if (!source.ok()) return JsonError(500, "the current file is malformed");
    return HttpResponse(200, "application/json", wire::EncodeCurrentRelease({*source}));
  }
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return NotFound();
  const std::string source(rest.substr(0, slash));
  const std::string name(rest.substr(slash + 1));
  if (!wire::IsReleaseSourceName(source) || !wire::IsArtifactName(name)) return NotFound();
  Fd rel(openat(root.get(), source.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (rel.get() < 0) return NotFound();
  if (name == release::kManifestFileName) return ServeFile(rel.get(), name, "application/json", req);
  if (release::IsMetadataName(name)) return ServeFile(rel.get(), name, "text/plain", req);
  std::optional<std::string> manifest_bytes = ReadSmall(
      rel.get(), std::string(release::kManifestFileName), release::kMaxManifestBytes);
  if (!manifest_bytes) return NotFound();
  absl::StatusOr<wire::ReleaseManifest> m = wire::DecodeReleaseManifest(*manifest_bytes);
  if (!m.ok()) return NotFound();
  for (const wire::RuntimeArtifact& a : m->artifacts) {
    if (a.name != name) continue;
    ArtifactRequest rec{std::string(path), req.range, 0, false};
    uint64_t cut_after = std::numeric_limits<uint64_t>::max();
    if (auto cut = cuts_.find(rec.path); cut != cuts_.end()) {
      cut_after = cut->second;
      cuts_.erase(cut);
      rec.cut = true;
    }
    HttpResponse r = ServeFile(rel.get(), name, "application/octet-stream", req, cut_after);
    rec.status = r.status;
    requests_.push_back(std::move(rec));
    if (requests_.size() > kMaxRecorded) requests_.pop_front();
    return r;
  }
  return NotFound();
}

}  // namespace sn::devcore
