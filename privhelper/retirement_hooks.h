// What a provider adds to collection (privhelper/rpc/retirement.h), beside its image store's
// ForgetImages: a check that nothing of the provider's still uses the generation, and the
// cleanup of the private copies it made of the generation's release files.
#ifndef SANDBOX_NODE_PRIVHELPER_RETIREMENT_HOOKS_H_
#define SANDBOX_NODE_PRIVHELPER_RETIREMENT_HOOKS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "privhelper/store/plan.h"

namespace sn::privhelper {

struct RetirementHooks {
  // OK when no native object of the provider belongs to `generation` (the microVM provider: no
  // VM or overlay of it); Unavailable naming one, or when the provider cannot tell (its
  // inventory failed): collection is then HELD and keeps every byte. Unset: nothing to check.
  std::function<absl::Status(int64_t generation)> in_use;
  // Removes the provider's own copies of the release files collection removes (`files`: the
  // journal's, which no other retained configuration references). Unset: none.
  std::function<absl::Status(const std::vector<store::PlannedArtifact>& files)> forget_files;
};

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RETIREMENT_HOOKS_H_
