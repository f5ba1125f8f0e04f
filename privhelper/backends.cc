#include "privhelper/backends.h"

#include "absl/strings/str_cat.h"
#include "privhelper/docker/backend.h"
#include "privhelper/microvm/backend.h"

namespace sn::privhelper {

const std::vector<BackendRow>& Backends() {
  static const std::vector<BackendRow> rows = {
      {"docker", &docker::MakeDockerBackend},
      {"microvm", &microvm::MakeMicrovmBackend},
  };
  return rows;
}

absl::StatusOr<Backend> MakeBackend(const Config& config, const std::string& installation_id) {
  for (const BackendRow& row : Backends()) {
    if (row.provider == config.provider) return row.make(config, installation_id);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no backend for provider \"", config.provider, "\""));
}

}  // namespace sn::privhelper
