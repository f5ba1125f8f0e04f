// The host-facing actions of the installer: the system user, processes run as that user or as
// root, systemd, the installer's lock. Blocking; the installer's one thread (fork() is safe
// there: the installer starts no thread of its own).
#ifndef SANDBOX_NODE_TOOLS_INSTALL_SYSTEM_H_
#define SANDBOX_NODE_TOOLS_INSTALL_SYSTEM_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sn::install {

struct SystemUser {
  uid_t uid = 0;
  gid_t gid = 0;
  bool created = false;
};

// The system user `name`, created (useradd --system, no home, no login shell, its own group)
// when it does not exist. FailedPrecondition for uid 0.
absl::StatusOr<SystemUser> EnsureSystemUser(const std::string& name);

// The gid of the group `name`, if there is one.
std::optional<gid_t> GroupId(const std::string& name);

// Runs `fn` in a child process with the credentials of uid/gid (no supplementary groups) and
// returns its status (the child reports only OK or the failure's message).
absl::Status RunAs(uid_t uid, gid_t gid, const std::function<absl::Status()>& fn);

// Runs argv (argv[0] an absolute path) to completion, optionally as uid/gid, with stdout and
// stderr going to the installer's stderr. Its exit status (128 + signal for a signal).
absl::StatusOr<int> RunCommand(const std::vector<std::string>& argv,
                               std::optional<std::pair<uid_t, gid_t>> as = std::nullopt);

// A child process started in the background (stdout and stderr into `log`).
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log);
// SIGTERM, then waits up to `grace` before SIGKILL; always reaps.
void StopChild(pid_t pid, absl::Duration grace = absl::Seconds(20));
// Whether `pid` (a child) is still running (reaps it when it has exited).
bool ChildAlive(pid_t pid);

// True when systemd is the init system (/run/systemd/system exists, as sd_booted() checks).
bool SystemdIsPid1();

// The installer's exclusive lock (flock, non-blocking) on `path`, created 0600 when missing;
// held until the process exits. Unavailable when another installer holds it.
absl::Status TakeInstallLock(const std::string& path);

}  // namespace sn::install

#endif  // SANDBOX_NODE_TOOLS_INSTALL_SYSTEM_H_
