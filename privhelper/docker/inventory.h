// This installation's sandboxes on the Docker daemon, as a complete, label-filtered container
// list shows them. Every container privhelper creates carries the labels below and is named
// sn-<installation>-<sandbox>; the daemon's label filter is re-checked on every entry, so
// another installation's containers on the same daemon are invisible. A failed, partial or
// malformed list is an error, never an empty inventory (absence is proven only by a complete,
// successful list).
#ifndef SANDBOX_NODE_PRIVHELPER_DOCKER_INVENTORY_H_
#define SANDBOX_NODE_PRIVHELPER_DOCKER_INVENTORY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "privhelper/docker/engine.h"

namespace sn::docker {

inline constexpr char kLabelInstallation[] = "sn.installation";
inline constexpr char kLabelGeneration[] = "sn.generation";
inline constexpr char kLabelSandbox[] = "sn.sandbox";
inline constexpr char kLabelArgs[] = "sn.args";  // digest of create's arguments
inline constexpr char kApiVersionPrefix[] = "/v1.41";

struct SandboxContainer {
  std::string id;           // the native id
  std::string sandbox_id;   // from the sandbox label
  bool running = false;     // else retained (created or exited)
  // Docker's own passing or stuck states: "paused", "restarting", "removing" or "dead" (the
  // state's name; empty for running/created/exited). Such a container still exists and holds
  // its sandbox's name, so it is counted as running (the conservative side of max_active);
  // for its own sandbox it is doubt (Unavailable), never a state to act on.
  std::string transitional;
  int64_t generation = 0;   // from the generation label (0 when unreadable)
  std::string args_digest;  // from the args label
};

// The installation's containers; only `sandbox_id`'s when it is not empty. Any doubt (a
// transport failure, a non-200 answer, malformed JSON, an entry with foreign labels or a state
// Docker does not document) is Unavailable. An entry in a transitional state is listed (see
// SandboxContainer::transitional): another sandbox's removal or dead container must not make
// every create of the node unavailable (docs/reliability.md, soak finding 2).
absl::StatusOr<std::vector<SandboxContainer>> ListSandboxes(DockerEngine& engine,
                                                            std::string_view installation,
                                                            std::string_view sandbox_id,
                                                            const RequestOptions& options);

struct Counts {
  int64_t running = 0;
  int64_t retained = 0;
};

absl::StatusOr<Counts> CountSandboxes(DockerEngine& engine, std::string_view installation,
                                      const RequestOptions& options);

// A generation label's value: a decimal of digits only, > 0, that fits int64; else 0
// (unreadable). The one parse of it, for the list and for an inspected container.
int64_t ParseGenerationLabel(std::string_view s);

// Percent-encodes a query value.
std::string UrlEncode(std::string_view s);

}  // namespace sn::docker

#endif  // SANDBOX_NODE_PRIVHELPER_DOCKER_INVENTORY_H_
