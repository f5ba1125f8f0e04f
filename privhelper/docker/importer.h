// The Docker image store for preparation: an archive's identity is the config identity its
// manifest.json names (archive_identity.h); archives are loaded with POST /images/load,
// streamed from privhelper's store (never through the CLI, never held whole), and an identity
// is resolved only as the image ID itself (GET /images/<id>/json): never through a repository
// digest, which names whatever image a registry served under it. Images are never removed
// (they belong to the host's shared daemon).
#ifndef SANDBOX_NODE_PRIVHELPER_DOCKER_IMPORTER_H_
#define SANDBOX_NODE_PRIVHELPER_DOCKER_IMPORTER_H_

#include <memory>
#include <utility>

#include "absl/time/time.h"
#include "privhelper/docker/engine.h"
#include "privhelper/importer.h"

namespace sn::docker {

class DockerImporter final : public privhelper::ImageImporter {
 public:
  // REQUIRES: `engine` outlives this.
  explicit DockerImporter(docker::DockerEngine* engine,
                          absl::Duration load_timeout = absl::Minutes(25))
      : engine_(engine), load_timeout_(load_timeout) {}
  // Owns the engine it reads through.
  explicit DockerImporter(std::unique_ptr<docker::DockerEngine> engine)
      : owned_(std::move(engine)), engine_(owned_.get()), load_timeout_(absl::Minutes(25)) {}

  absl::StatusOr<std::string> ArchiveIdentity(const Source& source, const Skip& skip,
                                              uint64_t size) override;
  absl::Status Load(const Source& source, uint64_t size) override;
  absl::Duration LoadTimeout() const override { return load_timeout_; }
  absl::StatusOr<std::string> Resolve(const std::string& identity) override;
  // Removes nothing: Docker images belong to the host's shared daemon; collection never
  // removes or prunes them (docs/operator-guide.md says what an administrator checks before
  // removing one by hand).
  absl::Status ForgetImages(const std::vector<std::string>& native_images) override;

 private:
  const std::unique_ptr<docker::DockerEngine> owned_;  // null when the engine is borrowed
  docker::DockerEngine* const engine_;
  const absl::Duration load_timeout_;
};

}  // namespace sn::docker

#endif  // SANDBOX_NODE_PRIVHELPER_DOCKER_IMPORTER_H_
