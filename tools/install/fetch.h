// Where the installer gets releases from (spec/wire.md §6): the console's release routes, or
// a local bundle directory in the layout `release publish` writes (common/release/layout.h).
// Both verify the same way: the metadata with VerifyRelease against the key the operator gave,
// every artifact streamed through an ArtifactVerifier pinned to that verified manifest.
// Blocking; the installer's one thread.
//
// ConsoleReleases and FetchConfiguration talk to Core (TLS, HTTP, Core's JSON): only the
// installer's network child runs them (fetcher.h); root reaches Core through that child.
#ifndef SANDBOX_NODE_TOOLS_INSTALL_FETCH_H_
#define SANDBOX_NODE_TOOLS_INSTALL_FETCH_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/state/config.h"
#include "common/release/ed25519.h"
#include "common/release/verify.h"
#include "common/wire/http_bodies.h"
#include "tools/install/fetch_protocol.h"

namespace sn::install {

class Releases {
 public:
  virtual ~Releases() = default;
  // The verified metadata of release `source`. NotFound when this place does not hold it;
  // provenance failures (common/release/failure.h) when it does not verify.
  virtual absl::StatusOr<release::VerifiedRelease> Metadata(const std::string& source) = 0;
  // Writes artifact `a` of `source` into the new file `path` (0600, fsynced), verified
  // against `a` while it streams; the file is removed on any failure.
  virtual absl::Status Artifact(const std::string& source, const wire::RuntimeArtifact& a,
                                const std::string& path) = 0;
};

// A new file (0600, O_EXCL, no symlink followed) that is removed unless Commit() succeeded.
class StagedFile {
 public:
  explicit StagedFile(std::string path) : path_(std::move(path)) {}
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  absl::Status Open();  // removes a download an earlier run left unfinished first
  absl::Status Write(std::string_view bytes);
  absl::Status Commit();  // fsync and close

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

class ConsoleReleases final : public Releases {
 public:
  ConsoleReleases(agent::Origin origin, std::optional<std::string> ca_bundle,
                  const release::PublicKey* key)
      : origin_(std::move(origin)), ca_bundle_(std::move(ca_bundle)), key_(key) {}

  // GET /releases/current, read once per installation.
  absl::StatusOr<std::string> Current();
  // The three metadata files of `source` as served (not verified).
  absl::StatusOr<fetchwire::MetadataFiles> Files(const std::string& source);
  absl::StatusOr<release::VerifiedRelease> Metadata(const std::string& source) override;
  absl::Status Artifact(const std::string& source, const wire::RuntimeArtifact& a,
                        const std::string& path) override;
  // Artifact `a` of `source`, verified against `a` while it streams, piece by piece into
  // `on_bytes` (each piece at most 256 KiB). A checksum failure stops the stream.
  absl::Status Stream(const std::string& source, const wire::RuntimeArtifact& a,
                      const std::function<absl::Status(std::string_view)>& on_bytes);

 private:
  absl::StatusOr<std::string> GetSmall(const std::string& target, size_t max_bytes);

  agent::Origin origin_;
  std::optional<std::string> ca_bundle_;
  const release::PublicKey* key_;
};

class BundleReleases final : public Releases {
 public:
  BundleReleases(std::string dir, const release::PublicKey* key)
      : dir_(std::move(dir)), key_(key) {}

  // The release names the bundle holds (its subdirectories), sorted.
  std::vector<std::string> Sources() const;
  absl::StatusOr<release::VerifiedRelease> Metadata(const std::string& source) override;
  absl::Status Artifact(const std::string& source, const wire::RuntimeArtifact& a,
                        const std::string& path) override;

 private:
  std::string dir_;
  const release::PublicKey* key_;
};

// GET /api/v1/sandbox-node/configuration?generation=G with the node credential: the exact
// bytes (not yet verified). NotFound for 404, Unauthenticated for 401.
absl::StatusOr<std::string> FetchConfiguration(const agent::Origin& origin,
                                               const std::optional<std::string>& ca_bundle,
                                               const std::string& credential, int64_t generation);

}  // namespace sn::install

#endif  // SANDBOX_NODE_TOOLS_INSTALL_FETCH_H_
