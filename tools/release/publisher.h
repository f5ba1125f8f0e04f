// `release publish`: publishes <releases>/<source>/ as spec/wire.md §6 describes, and adds to
// a published release only what its signed manifest already declares.
//
// A release's manifest is immutable once published (a published release's bytes never
// change). So:
//   - a new source: the artifacts given become the manifest (sorted by name; published_at from
//     the injected clock), signed with the key; SHA256SUMS lists them. Everything is built in
//     <releases>/.staging-XXXXXX/ and the directory is renamed into place (never replacing):
//     the release appears complete or not at all.
//   - an existing source: first its metadata is verified (signature by this key, §6 decoding,
//     source, SHA256SUMS), then every entry of the directory (only metadata and declared
//     artifacts, all regular files) and every present artifact's size and digest. Then each
//     artifact given must be declared with the same kind and have exactly the declared bytes.
//     Declared artifacts that are missing are copied to staging files, verified from disk,
//     and only when every one verified are they renamed into place (never replacing).
//     Anything else — an undeclared artifact, other bytes, a foreign entry, a changed
//     file, another key — is a conflict: nothing is added.
//   - --make-current: after the release is complete (every declared artifact present; a
//     conflict otherwise, checked before anything is added), <releases>/current is replaced
//     atomically (common/atomic_file.h) with "<source>\n".
// Publishers of one releases directory are serialized by an exclusive flock on
// <releases>/.publish.lock; under it, `.staging-*` leftovers of a crashed publisher are
// removed first.
//
// Thread-compatible; one Publish at a time per process (the flock serializes processes).
#ifndef SANDBOX_NODE_TOOLS_RELEASE_PUBLISHER_H_
#define SANDBOX_NODE_TOOLS_RELEASE_PUBLISHER_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/release/signing.h"

namespace sn::release_tool {

struct ArtifactInput {
  std::string kind;  // a manifest kind (wire::IsManifestArtifactKind)
  std::string path;  // its base name is the artifact's name
};

struct PublishRequest {
  std::string releases_dir;
  std::string source;
  bool make_current = false;
  std::vector<ArtifactInput> artifacts;
  // Test seam: called before each durable step with the step's name (see kSteps in
  // publisher.cc and docs/formats.md); returning false stops Publish right there, as a crash
  // would (no clean-up), and Publish answers Aborted.
  std::function<bool(std::string_view step)> step_hook;
};

struct PublishResult {
  bool created = false;                // a new release was published
  std::vector<std::string> added;      // artifacts added to an existing release
  std::vector<std::string> missing;    // declared artifacts still absent afterwards
  bool made_current = false;
};

// InvalidArgument: a usage error (source or artifact name, kind, duplicate names, a new
// release without artifacts, an input that is not a regular file). FailedPrecondition: a
// conflict with what is published, or a release that does not verify. Other codes: local I/O.
// On every error nothing was added and `current` is unchanged.
absl::StatusOr<PublishResult> Publish(const PublishRequest& request,
                                      const release::PrivateKey& key, const Clock& clock);

}  // namespace sn::release_tool

#endif  // SANDBOX_NODE_TOOLS_RELEASE_PUBLISHER_H_
