// Applying one step of the installer's plan (plan.h) to the file system, idempotently:
//   absent                                   -> created (directories with mkdir, chown, chmod
//                                               and an fsync of the parent; files with
//                                               WriteFileAtomically; executables copied,
//                                               fsynced, verified again, renamed, directory
//                                               fsynced), Outcome::kCreated;
//   present with the planned kind, owner, mode and bytes (an executable: the pinned artifact's
//   size and SHA-256)                         -> Outcome::kUnchanged;
//   anything else (another kind, a symlink, another owner or mode, other bytes)
//                                            -> FailedPrecondition "refused: <path> ..." naming
//                                               what differs; nothing is changed.
// With `check_only` (an installed host) a missing file or executable is refused too; a missing
// directory is made again (it holds nothing installed, e.g. /run/sandbox-node).
// Blocking; the installer's one thread.
#ifndef SANDBOX_NODE_TOOLS_INSTALL_APPLY_H_
#define SANDBOX_NODE_TOOLS_INSTALL_APPLY_H_

#include "absl/status/statusor.h"
#include "tools/install/plan.h"

namespace sn::install {

enum class Outcome { kUnchanged, kCreated };

absl::StatusOr<Outcome> Apply(const Step& step, bool check_only);

}  // namespace sn::install

#endif  // SANDBOX_NODE_TOOLS_INSTALL_APPLY_H_
