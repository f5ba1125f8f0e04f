// The table of providers privhelper can run (backend.h): one row per provider, its factory in
// its own folder.
#ifndef SANDBOX_NODE_PRIVHELPER_BACKENDS_H_
#define SANDBOX_NODE_PRIVHELPER_BACKENDS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "privhelper/backend.h"

namespace sn::privhelper {

struct BackendRow {
  std::string_view provider;  // the provider code of spec/wire.md §3, e.g. "docker"
  BackendFactory make;
};

// Every provider privhelper can run.
const std::vector<BackendRow>& Backends();

// The Backend of `config.provider`; InvalidArgument for a provider without a row.
absl::StatusOr<Backend> MakeBackend(const Config& config, const std::string& installation_id);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_BACKENDS_H_
