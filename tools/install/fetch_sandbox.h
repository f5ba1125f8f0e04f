// The confinement of the installer's network child (fetcher.h): what a process forked by root
// does to itself before it opens its first connection to Core.
//
//   ConfineToUser: locks the securebits (NOROOT, KEEP_CAPS off, NO_CAP_AMBIENT_RAISE, all
//     locked), empties the bounding and ambient sets, takes the agent user's uid and gid with
//     no supplementary groups (setgroups, setresgid, setresuid: real, effective and saved),
//     sets the permitted, effective and inheritable sets to zero, marks itself non-dumpable
//     (no other process of that user can ptrace it or read its memory: it holds the enrollment
//     token and the node credential) and sets no_new_privs.
//   InstallFetchFilter: a seccomp allow-list for what a blocking HTTPS client needs (memory,
//     threads for the resolver, the socketpair to root, TCP and UDP sockets of AF_INET/INET6,
//     a netlink route socket for getaddrinfo, read-only opens for the resolver's and
//     OpenSSL's files); every other call fails with EPERM, and the calls of
//     native::KillListed() (filesystem mutation, ptrace, mounts, namespaces, bpf, modules...)
//     plus execve and execveat kill the process. listen and accept are not allowed.
//
// Both run in the child only, after fork() of the single-threaded installer (so they may
// allocate). REQUIRES: the caller is root with every capability (it drops them).
#ifndef SANDBOX_NODE_TOOLS_INSTALL_FETCH_SANDBOX_H_
#define SANDBOX_NODE_TOOLS_INSTALL_FETCH_SANDBOX_H_

#include <sys/types.h>

#include "absl/status/status.h"

namespace sn::install {

absl::Status ConfineToUser(uid_t uid, gid_t gid);

// REQUIRES: no_new_privs is set (ConfineToUser).
absl::Status InstallFetchFilter();

}  // namespace sn::install

#endif  // SANDBOX_NODE_TOOLS_INSTALL_FETCH_SANDBOX_H_
