// The enrollment token, read from a file or standard input — never from the command line.
//
// Why: /proc/<pid>/cmdline is readable by every local user, so a token given as an argument
// (`--token=TOKEN`) is disclosed to all of them for as long as the process runs. Both programs
// that take a token, sandbox-node-install and `agent enroll`, accept only
// `--token-file=PATH` (or `--token-file=-`, standard input), refuse `--token=` as a usage
// error, and read the token with this one reader (docs/operator-guide.md, "The enrollment
// token").
//
// Contract of ReadTokenFile(path):
//   - "-" reads standard input, whatever it is (a pipe, a terminal, a redirected file), to its
//     end; the descriptor is left open. Who can read what stdin carries is the caller's
//     business (`runuser -u sandbox-node -- agent enroll --token-file=- < /root/token`).
//   - Any other path is opened with O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK and checked on the
//     opened descriptor (fstat: what is checked is what is read, no window between the two):
//       * a symbolic link (the last component) is refused; directories above it resolve as
//         usual;
//       * it must be a regular file (O_NONBLOCK only keeps a FIFO from blocking the open);
//       * no permission bit for group or others: mode & 077 == 0 (a POSIX ACL granting
//         anyone else shows in the group bits, so it is refused too);
//       * owned by the reading process's effective uid or by root: another user who owns the
//         file could put a token of their choosing in it, or open it to everyone later.
//   - At most kMaxTokenFileBytes (256, the wire's limit on the token) bytes in all, a trailing
//     newline included: 257 bytes are read to tell "more than 256".
//   - Exactly one trailing "\n" is stripped (so `echo TOKEN > file` works); nothing else is
//     (a "\r" or a space is part of the token, and Core will reject it).
//   - What is left must be non-empty.
// Errors: InvalidArgument for every refusal (both programs exit 2, usage). The message names
// the path (or "standard input") and why; it never holds a byte of what was read.
#ifndef SANDBOX_NODE_COMMON_TOKEN_FILE_H_
#define SANDBOX_NODE_COMMON_TOKEN_FILE_H_

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "common/wire/limits.h"

namespace sn {

inline constexpr size_t kMaxTokenFileBytes = wire::kMaxOpaqueBytes;

// The token in `path` ("-": standard input), as the contract above says.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// The same with the reader's effective uid and the descriptor "-" reads given (tests).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, uid_t euid, int stdin_fd);

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_TOKEN_FILE_H_
