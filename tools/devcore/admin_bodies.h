// Strict decoders of devcore's generation admin bodies, with the rules of spec/wire.md §2
// (exact members, no duplicates, no unexpected null, exact int64 spellings):
//   PUT  /admin/v1/nodes/{id}/deployment  {generation: positive, serving_generation: positive|null}
//   POST /admin/v1/nodes/{id}/drops       {generation: positive, specification_digest: digest}
// InvalidArgument names the member and rule. Pure functions.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_ADMIN_BODIES_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_ADMIN_BODIES_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "tools/devcore/node_store.h"

namespace sn::devcore {

absl::StatusOr<DeploymentRecord> DecodeDeploymentBody(std::string_view body);
absl::StatusOr<GenerationRef> DecodeDropBody(std::string_view body);

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_ADMIN_BODIES_H_
