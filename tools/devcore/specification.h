// The §6 specification documents devcore hands out. The document named by --specification is
// the current deployment: its generation is what enroll hands out and what a
// generation-managing node is told to prepare. Every document devcore has served is kept,
// byte-exact and immutable, in DIR/specifications/<generation>.json so the configuration route
// can still serve a node's enrolled generation after the current one changes.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_SPECIFICATION_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_SPECIFICATION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace sn::devcore {

struct Specification {
  int64_t generation = 0;
  std::string provider;
  std::string runtime_source;
  std::string bytes;   // exactly as read
  std::string digest;  // SHA-256 of `bytes`, lowercase hex
};

// Reads and strictly decodes a specification document (common/wire/http_bodies.h).
// InvalidArgument names the rule it breaks.
absl::StatusOr<Specification> LoadSpecification(const std::string& path);

// Keeps `spec` in DIR/specifications/<generation>.json. A generation already stored with
// different bytes is FailedPrecondition: a generation's specification never changes.
absl::Status PublishSpecification(const std::string& state_dir, const Specification& spec);

// The stored bytes of `generation`; NotFound when devcore never published it.
absl::StatusOr<std::string> ReadPublishedSpecification(const std::string& state_dir,
                                                       int64_t generation);

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_SPECIFICATION_H_
