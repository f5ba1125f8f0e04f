// The installation identity, owned by privhelper in its state directory:
//   <state_dir>/installation.json = {"schema":1,"installation_id":"<uuid v4>"}
// Created once on the first start with PublishOnce (write-once: it is never replaced, see
// durable.h); read and validated on every later start. Every native object privhelper creates
// is labelled with it, and the agent learns it from Probe (it never chooses it), so the
// identity Core enrolls and the labels on the daemon cannot disagree.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_INSTALLATION_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_INSTALLATION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "privhelper/store/fs.h"

namespace sn::privhelper::store {

inline constexpr char kInstallationFile[] = "installation.json";

// Returns the installation id stored in `state`, creating it when it does not exist. A file
// that exists but is torn, foreign (not a private, singly linked regular file owned by
// `owner`) or malformed is refused with FailedPrecondition and left untouched for inspection:
// privhelper never replaces an identity it cannot read.
absl::StatusOr<std::string> LoadOrCreateInstallationId(Fs& fs, const Dir& state, uint32_t owner);

// The installation lock, <state_dir>/node/installation.lock: an empty private file created
// (durably, with its directory) on first use and never removed. Collection and repair take it
// exclusively without blocking, before the generation's lease and always in that order, and
// hold both through every change they make. Unavailable when another holder has it;
// FailedPrecondition (ownership_refused) for a file that is not a private, singly linked
// regular file owned by `owner`.
inline constexpr char kInstallationLockFile[] = "installation.lock";
absl::StatusOr<std::unique_ptr<FileLock>> LockInstallation(Fs& fs, const Dir& node,
                                                           uint32_t owner);

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_INSTALLATION_H_
