#include "tools/install/agent_state.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace sn::install {

agent::NodeIdentity IdentityOf(const InstallRecord& rec) {
  agent::NodeIdentity id;
  id.node_id = rec.node_id;
  id.installation_id = rec.installation_id;
  id.provider = rec.provider;
  id.deployment_generation = rec.deployment_generation;
  id.specification_digest = rec.specification_digest;
  id.runtime_source = rec.runtime_source;
  id.core_origin = rec.core_origin;
  return id;
}

absl::StatusOr<AgentState> EnsureAgentStateAs(const std::string& agent_state_dir,
                                              const InstallRecord& rec, const SystemUser& user) {
  const agent::StateFiles files(agent_state_dir);
  const agent::NodeIdentity want = IdentityOf(rec);
  int pipefd[2];  // the child's one-letter answer: i(dentity), w(rote), k(ept)
  if (pipe2(pipefd, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe");
  auto answer = [&pipefd](char c) {
    ssize_t ignored = write(pipefd[1], &c, 1);
    (void)ignored;
  };
  absl::Status s = RunAs(user.uid, user.gid, [&]() -> absl::Status {
    absl::StatusOr<agent::NodeIdentity> enrolled = files.ReadIdentity();
    if (enrolled.ok()) {
      if (enrolled->node_id != rec.node_id) {
        return absl::FailedPreconditionError(
            absl::StrCat(files.IdentityPath(), " is node ", enrolled->node_id,
                         ", not the enrolled node ", rec.node_id));
      }
      answer('i');
      return absl::OkStatus();
    }
    if (!absl::IsNotFound(enrolled.status())) return enrolled.status();
    RETURN_IF_ERROR(files.EnsureDirs());
    absl::StatusOr<agent::NodeIdentity> pending = files.ReadPendingEnrollment();
    if (pending.ok()) {
      if (!(*pending == want)) {
        return absl::FailedPreconditionError(
            absl::StrCat(files.PendingEnrollmentPath(), " is another enrollment (node ",
                         pending->node_id, ") than the installer's (node ", want.node_id, ")"));
      }
      absl::StatusOr<std::string> cred = files.ReadCredential();
      if (cred.ok() && absl::StripTrailingAsciiWhitespace(*cred) == rec.credential) {
        answer('k');
        return absl::OkStatus();
      }
    } else if (!absl::IsNotFound(pending.status())) {
      return pending.status();
    }
    RETURN_IF_ERROR(files.WriteCredential(rec.credential));
    RETURN_IF_ERROR(files.WritePendingEnrollment(want));
    answer('w');
    return absl::OkStatus();
  });
  close(pipefd[1]);
  char c = 0;
  if (read(pipefd[0], &c, 1) != 1) c = 0;
  close(pipefd[0]);
  if (!s.ok()) return Refuse(std::string(s.message()));
  if (c == 'i') return AgentState::kEnrolled;
  if (c == 'w') return AgentState::kWrotePending;
  return AgentState::kKeptPending;
}

}  // namespace sn::install
