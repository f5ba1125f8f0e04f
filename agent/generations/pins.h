// The node's durable deployment pins (docs/formats.md, node/deployment.json): the local
// target (the last target Core announced on a connection) and the serving pin (the generation
// the node serves; it moves only to a generation that is ready locally, and Core's `null`
// leaves it). Both are references that keep a generation (privhelper's collection
// rechecks them), and the hello of the next connection reports them first, before that connection has
// delivered deployment facts.
//
//   {"schema":1,"target":{"generation":G,"specification_digest":"<hex>"}|null,
//    "serving":{"generation":G,"specification_digest":"<hex>"}|null}
//
// Store is durable when it returns (on the filesystem seam, common/fs/durable.h: temporary,
// fsync, rename, fsync of node/). A torn, foreign or malformed file (the strict record reader,
// common/json/record.h) is DataLoss (the agent refuses to start rather than forget a pin); a
// missing file is no pins. Store and Load run on the event loop (a few hundred bytes, rare).
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_PINS_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_PINS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "agent/generations/types.h"
#include "common/fs/fs.h"

namespace sn::agent {

struct DeploymentPins {
  std::optional<GenerationRef> target;
  std::optional<GenerationRef> serving;
  bool operator==(const DeploymentPins&) const = default;
};

class PinStore {
 public:
  virtual ~PinStore() = default;
  virtual absl::StatusOr<DeploymentPins> Load() = 0;
  // Durable before it returns OK.
  virtual absl::Status Store(const DeploymentPins& pins) = 0;
};

// `fs` (not owned; nullptr: the real filesystem) must outlive this.
class FilePinStore final : public PinStore {
 public:
  explicit FilePinStore(std::string path, fs::Fs* fs = nullptr);
  absl::StatusOr<DeploymentPins> Load() override;
  absl::Status Store(const DeploymentPins& pins) override;

 private:
  std::string path_;
  fs::Fs* fs_;
};

// The file's text for `pins`, and its strict reader (DataLoss names what is wrong).
std::string FormatPins(const DeploymentPins& pins);
absl::StatusOr<DeploymentPins> ParsePins(const std::string& text);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_PINS_H_
