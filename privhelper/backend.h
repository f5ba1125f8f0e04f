// What one provider brings to privhelper, behind the interfaces the rest of privhelper uses:
// its probe and inventory counts (Provider) and its image store (ImageImporter). Main makes
// the configured provider's Backend through one table (backends.h): a new provider adds its
// folder (privhelper/<provider>/) and one row there, and no switch anywhere else.
#ifndef SANDBOX_NODE_PRIVHELPER_BACKEND_H_
#define SANDBOX_NODE_PRIVHELPER_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "privhelper/config.h"
#include "privhelper/helpers/helper_manager.h"
#include "privhelper/importer.h"
#include "privhelper/provider.h"
#include "privhelper/retirement_hooks.h"

namespace sn::privhelper {

namespace store {
class GenerationStore;
}

struct Backend {
  std::unique_ptr<Provider> provider;
  std::unique_ptr<ImageImporter> importer;
  // Its native helper's own flags (`--<option>=VALUE`; privhelper/native/providers.cc).
  std::vector<std::string> helper_flags;
  // A provider with VMs: makes what privhelper does for its helpers' permitted VmRequests
  // (HelperOptions::vm_actions) once the generation store is open. Unset: no VMs, and a helper
  // that sends a VmRequest is killed.
  std::function<VmActions(const store::GenerationStore* generations)> make_vm_actions;
  // Capabilities privhelper keeps beyond CAP_SETPCAP (capabilities.h) for what the provider
  // does as root after start-up (the microVM provider: CAP_CHOWN, CAP_SETUID, CAP_SETGID for a
  // VM's overlay and its supervisor's drop to the VM's uid). A bit per capability number.
  uint64_t capabilities = 0;
  // Removes what an interrupted write of the provider's own store left (called once at start,
  // before anything is served). Unset: nothing to recover.
  std::function<absl::Status()> recover;
  // Collection's extra checks and cleanup (RetirementHooks, privhelper/rpc/retirement.h).
  RetirementHooks retirement;
};

// Makes a provider's Backend from the trusted configuration and the installation identity.
using BackendFactory = absl::StatusOr<Backend> (*)(const Config& config,
                                                   const std::string& installation_id);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_BACKEND_H_
