// The installation identity, owned by privhelper (root) in its state directory:
//   <state_dir>/installation.json = {"schema":1,"installation_id":"<uuid>"}
// Created once, exclusively, on the first start (write-temp, fsync, rename, fsync dir: see
// docs/formats.md); read and validated on every later start. Every native object privhelper
// creates is labelled with it, and the agent learns it from Probe (it never chooses it), so
// the identity Core enrolls and the labels on the daemon cannot disagree.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_INSTALLATION_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_INSTALLATION_H_

#include <string>

#include "absl/status/statusor.h"

namespace sn::privhelper {

inline constexpr char kInstallationFile[] = "installation.json";

// Returns the installation id stored under `state_dir`, creating it when the file does not
// exist. A file that exists but is torn, foreign (not a private regular file owned by this
// uid) or malformed is refused with FailedPrecondition and left untouched for inspection:
// privhelper never replaces an identity it cannot read.
absl::StatusOr<std::string> LoadOrCreateInstallationId(const std::string& state_dir);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_INSTALLATION_H_
