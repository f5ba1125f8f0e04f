// The installer's network child (docs/security.md, "The installer"): everything that talks to
// Core — DNS, TCP, TLS, HTTP, and the parsing of Core's answers (the enrollment answer,
// /releases/current, the release metadata, the configuration, the artifacts' bytes) — runs in
// a process root forks before its first connection, which then takes the agent user's uid
// and gid, drops every capability, sets no_new_privs and loads a seccomp filter
// (fetch_sandbox.h). Root sends it one typed request at a time over a socketpair and reads a
// typed, bounded reply (fetch_protocol.h):
//
//   Current         -> a release source name (lexically checked by root)
//   Metadata        -> manifest, signature and SHA256SUMS bytes, which root verifies again
//                      itself (signature first: root parses only signed bytes)
//   Enroll          -> the enrollment answer's five fields, each checked by root
//   Configuration   -> the verified specification's fields, each checked by root; root then
//                      checks them against the signed manifest of their release
//   Artifact        -> the bytes, in frames of at most 256 KiB, which root writes into a file
//                      it created and verifies itself (size and SHA-256) before using it
//
// Secrets (the token, the credential) travel only over the socketpair, never in argv or the
// environment. Every reply must arrive within the deadline; a child that dies, overstays or
// answers out of protocol is killed and reaped, and the call fails (Unavailable, Unavailable,
// DataLoss) naming what happened; the Fetcher is then spent (FailedPrecondition).
//
// Not thread-safe; the installer's one thread. Start REQUIRES a single-threaded process (the
// child runs the HTTP client after fork()).
#ifndef SANDBOX_NODE_TOOLS_INSTALL_FETCHER_H_
#define SANDBOX_NODE_TOOLS_INSTALL_FETCHER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/state/config.h"
#include "common/release/ed25519.h"
#include "common/release/verify.h"
#include "common/wire/http_bodies.h"
#include "tools/install/fetch.h"
#include "tools/install/fetch_protocol.h"

namespace sn::install {

struct FetcherOptions {
  agent::Origin origin;
  std::optional<std::string> ca_pem;  // --ca-bundle's contents (root read it; the child may not)
  std::optional<release::PublicKey> key;  // --release-public-key (required)
  uid_t uid = 0;  // the agent's user; never 0
  gid_t gid = 0;
  // The longest wait for each frame of a reply (an HTTP call's own timeout is 30 s; the
  // metadata takes three calls).
  absl::Duration reply_deadline = absl::Minutes(3);
  // The longest wait for the child to confine itself and say it is ready (no network).
  absl::Duration start_deadline = absl::Seconds(60);
  // Root's own count of an artifact's bytes (progress for the operator; nothing is decided
  // from it): called after each piece root accepted (within the declared size, hashed and
  // written to the file) with the bytes written so far, so never more than the size the
  // verified manifest declares. The child sends no progress message of its own.
  std::function<void(const wire::RuntimeArtifact& artifact, uint64_t bytes_written)>
      on_artifact_bytes;
  // Tests only (a lying or crashing child): runs in the child, confined, before it handles
  // each request (and once with Kind::kReady before it says it is ready), with the
  // socketpair's descriptor. True: the hook answered the request itself (the child skips it).
  std::function<bool(int channel, fetchwire::Kind request)> child_test_hook;
};

class Fetcher {
 public:
  // Forks and confines the child; returns once the child said it is ready and root has read
  // /proc/<pid>/status: the agent user's uids and gids, no capability in any set,
  // NoNewPrivs and a seccomp filter (otherwise the child is killed: Internal).
  static absl::StatusOr<std::unique_ptr<Fetcher>> Start(FetcherOptions options);
  ~Fetcher();  // closes the socketpair, then kills and reaps the child

  pid_t pid() const { return pid_; }

  absl::StatusOr<std::string> Current();
  absl::StatusOr<release::VerifiedRelease> Metadata(const std::string& source);
  absl::StatusOr<wire::EnrollResponse> Enroll(const wire::EnrollRequest& request);
  // The specification of `generation` whose bytes hash to `digest` (FailedPrecondition when
  // they do not verify; NotFound for 404; Unauthenticated for 401).
  absl::StatusOr<wire::SpecificationDocument> Configuration(const std::string& credential,
                                                            int64_t generation,
                                                            const std::string& digest,
                                                            const std::string& provider);
  // Artifact `a` of `source` into the new file `path` (StagedFile), verified by root.
  absl::Status Artifact(const std::string& source, const wire::RuntimeArtifact& a,
                        const std::string& path);

 private:
  Fetcher(FetcherOptions options, pid_t pid, int channel)
      : options_(std::move(options)), pid_(pid), channel_(channel) {}
  // Sends one request and reads one result frame (kData frames go to `on_data`).
  absl::StatusOr<std::string> Call(fetchwire::Kind kind, std::string_view payload,
                                   std::string_view what,
                                   const std::function<absl::Status(std::string_view)>& on_data);
  // Ends the child after a failure of `what`; returns the status the call reports.
  absl::Status Fail(const absl::Status& why, std::string_view what);
  void Stop();

  FetcherOptions options_;
  pid_t pid_;
  int channel_;
  absl::Duration waited_;  // the deadline of the frame being read (for the message)
  absl::Status spent_;
};

// Reads /proc/<pid>/status: the uids and gids all `uid` and `gid`, no supplementary group,
// and privhelper's check of a native helper (privhelper/helpers/spawn.h): NoNewPrivs 1,
// Seccomp 2 (a filter), CapInh, CapPrm, CapEff, CapBnd and CapAmb zero. FailedPrecondition
// naming what differs.
absl::Status CheckChildConfined(pid_t pid, uid_t uid, gid_t gid);

// Releases (fetch.h) through the child: what StageHost downloads from.
class FetcherReleases final : public Releases {
 public:
  explicit FetcherReleases(Fetcher* fetcher) : fetcher_(fetcher) {}
  absl::StatusOr<release::VerifiedRelease> Metadata(const std::string& source) override {
    return fetcher_->Metadata(source);
  }
  absl::Status Artifact(const std::string& source, const wire::RuntimeArtifact& a,
                        const std::string& path) override {
    return fetcher_->Artifact(source, a, path);
  }

 private:
  Fetcher* fetcher_;
};

}  // namespace sn::install

#endif  // SANDBOX_NODE_TOOLS_INSTALL_FETCHER_H_
