// What one provider brings to privhelper, behind the interfaces the rest of privhelper uses:
// its probe and inventory counts (Provider) and its image store (ImageImporter). Main makes
// the configured provider's Backend through one table (backends.h): a new provider adds its
// folder (privhelper/<provider>/) and one row there, and no switch anywhere else.
#ifndef SANDBOX_NODE_PRIVHELPER_BACKEND_H_
#define SANDBOX_NODE_PRIVHELPER_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "privhelper/config.h"
#include "privhelper/importer.h"
#include "privhelper/provider.h"

namespace sn::privhelper {

struct Backend {
  std::unique_ptr<Provider> provider;
  std::unique_ptr<ImageImporter> importer;
  // Its native helper's own flags (`--<option>=VALUE`; privhelper/native/providers.cc).
  std::vector<std::string> helper_flags;
};

// Makes a provider's Backend from the trusted configuration and the installation identity.
using BackendFactory = absl::StatusOr<Backend> (*)(const Config& config,
                                                   const std::string& installation_id);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_BACKEND_H_
