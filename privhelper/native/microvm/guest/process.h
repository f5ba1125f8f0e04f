// What the guest agent does for each request, inside the sandbox root.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_GUEST_PROCESS_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_GUEST_PROCESS_H_

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"
#include "proto/guest_agent.pb.h"

namespace sn::guest {

v1::FromGuest ErrorAnswer(v1::ErrorCode code, std::string message);

// Runs exec.argv chrooted into `root` as a new session, feeding exec.stdin and collecting
// stdout and stderr up to exec.output_limit_bytes together (the rest is read and discarded,
// truncated set). At exec.timeout_ms the process group is killed. exit_code: the exit status,
// or 128 + the signal that ended it; 127 when argv[0] is not found, 126 when it cannot run.
v1::FromGuest RunExec(const std::string& root, const v1::Exec& exec);

// Starts the sandbox's main process (chrooted, own session, stdio on /dev/null); its pid.
absl::StatusOr<pid_t> StartMain(const std::string& root, const v1::Start& start);

// write_file / read_file resolved inside the directory `root_fd` (openat2 RESOLVE_IN_ROOT).
v1::FromGuest WriteFileIn(int root_fd, const v1::WriteFile& w);
v1::FromGuest ReadFileIn(int root_fd, const v1::ReadFile& r);

}  // namespace sn::guest

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_GUEST_PROCESS_H_
