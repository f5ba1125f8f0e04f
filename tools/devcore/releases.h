// The console release routes of spec/wire.md §6, served from a releases directory laid out as
// common/release/layout.h describes (tools/release publishes it):
//
//   GET /releases/current                     200 {source} from <dir>/current; 404 when absent
//   GET /releases/{source}/manifest.json      the files as they are on disk (devcore serves,
//   GET /releases/{source}/manifest.json.sig  it does not vouch: the node verifies them, so a
//   GET /releases/{source}/SHA256SUMS         test can serve a hostile release)
//   GET /releases/{source}/{artifact}         only when that release's manifest decodes and
//                                             names the artifact; anything else 404
//
// Files are streamed from an open descriptor (HttpResponse::file), never read whole, with
// single-range HTTP Range support (RFC 7233: 206 with Content-Range, 416 when unsatisfiable,
// a malformed or multi-range header is ignored and the whole file is sent) and If-Range
// against a strong ETag derived from the file's inode, size and modification time. Every
// path component is opened with O_NOFOLLOW below the releases directory: a symlink is 404.
// The release files are re-read on every request: `current` may change between requests
// and a node pins the release it verified.
//
// Test-only knobs (the admin API, tools/devcore/README.md): CutNext makes the next response of
// one artifact stop after N body bytes and drop the connection; every artifact request is
// recorded (path, Range header, status; the last kMaxRecorded) for tests to assert what a node
// asked.
//
// Thread-compatibility: no state beyond the directory name and those knobs; devcore calls
// everything on its event-loop thread.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_RELEASES_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_RELEASES_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/wire/http_bodies.h"
#include "tools/devcore/http.h"

namespace sn::devcore {

// What a Range header asks of a file of `size` bytes.
struct RangeDecision {
  enum class Kind { kWhole, kPartial, kUnsatisfiable };
  Kind kind = Kind::kWhole;
  uint64_t first = 0;   // kPartial: the first byte
  uint64_t length = 0;  // kPartial: bytes from `first`
};
// `header` is the Range header's value ("" when absent). Only "bytes=" with one range
// ("a-b", "a-", "-n") is honoured.
RangeDecision DecideRange(std::string_view header, uint64_t size);

class ReleaseRoutes {
 public:
  // `releases_dir` empty: devcore serves no releases (every route 404).
  explicit ReleaseRoutes(std::string releases_dir) : dir_(std::move(releases_dir)) {}

  static bool Matches(std::string_view path);
  bool enabled() const { return !dir_.empty(); }

  HttpResponse Handle(const HttpRequest& req) const;

  struct ArtifactRequest {
    std::string path;   // /releases/<source>/<artifact>
    std::string range;  // the Range header as sent ("" when none)
    int status = 0;     // what devcore answered
    bool cut = false;   // CutNext applied to it
  };
  static constexpr size_t kMaxRecorded = 1000;
  void CutNext(std::string path, uint64_t after_bytes) const { cuts_[std::move(path)] = after_bytes; }
  const std::deque<ArtifactRequest>& artifact_requests() const { return requests_; }

  // The decoded manifest of release `source` (for checking a specification against it).
  // NotFound when devcore serves no such release; InvalidArgument when its manifest does not
  // decode.
  absl::StatusOr<wire::ReleaseManifest> Manifest(std::string_view source) const;

 private:
  std::string dir_;
  mutable std::map<std::string, uint64_t> cuts_;  // path -> body bytes of its next response
  mutable std::deque<ArtifactRequest> requests_;
};

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_RELEASES_H_
