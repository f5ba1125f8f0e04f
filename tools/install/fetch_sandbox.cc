#include "tools/install/fetch_sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <linux/securebits.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "privhelper/native/seccomp_policy.h"

namespace sn::install {
namespace {

// Unlike the native helpers (privhelper/helpers/spawn.cc), the child leaves uid 0, so the
// kernel's setuid fix-up stays on: it clears the permitted and effective sets at setresuid.
constexpr unsigned long kSecurebits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
                                      SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                                      SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

constexpr uint64_t kNamespaceFlags = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |
                                     CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;
constexpr uint64_t kWriteOpenFlags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;

scmp_arg_cmp Arg(unsigned arg, scmp_compare op, uint64_t a, uint64_t b = 0) {
  return scmp_arg_cmp{arg, op, a, b};
}

struct CtxDeleter {
  void operator()(void* c) const { seccomp_release(c); }
};

// Collects the first libseccomp error so the rule list reads as a list.
class Rules {
 public:
  explicit Rules(scmp_filter_ctx ctx) : ctx_(ctx) {}
  void Add(uint32_t action, int nr) { Note(seccomp_rule_add(ctx_, action, nr, 0), nr); }
  void Allow(int nr) { Add(SCMP_ACT_ALLOW, nr); }
  void Allow(int nr, scmp_arg_cmp a) { Note(seccomp_rule_add(ctx_, SCMP_ACT_ALLOW, nr, 1, a), nr); }
  void Allow(int nr, scmp_arg_cmp a, scmp_arg_cmp b) {
    Note(seccomp_rule_add(ctx_, SCMP_ACT_ALLOW, nr, 2, a, b), nr);
  }
  absl::Status status() const { return status_; }

 private:
  void Note(int rc, int nr) {
    if (rc != 0 && status_.ok()) {
      status_ = absl::InternalError(
          absl::StrCat("seccomp rule for syscall ", nr, ": ", strerror(-rc)));
    }
  }
  scmp_filter_ctx ctx_;
  absl::Status status_;
};

}  // namespace

absl::Status ConfineToUser(uid_t uid, gid_t gid) {
  if (uid == 0) return absl::FailedPreconditionError("the network child must not stay uid 0");
  if (prctl(PR_SET_SECUREBITS, kSecurebits, 0, 0, 0) != 0) return ErrnoStatus(errno, "securebits");
  for (int cap = 0; cap < 64; ++cap) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno == EINVAL) break;  // past the kernel's last capability
      return ErrnoStatus(errno, absl::StrCat("drop capability ", cap, " from the bounding set"));
    }
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
    return ErrnoStatus(errno, "clear the ambient set");
  }
  if (setgroups(0, nullptr) != 0) return ErrnoStatus(errno, "setgroups");
  if (setresgid(gid, gid, gid) != 0) return ErrnoStatus(errno, "setresgid");
  if (setresuid(uid, uid, uid) != 0) return ErrnoStatus(errno, "setresuid");
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
  memset(data, 0, sizeof data);
  if (syscall(SYS_capset, &header, data) != 0) return ErrnoStatus(errno, "capset");
  // Leaving uid 0 already made the process non-dumpable (fs.suid_dumpable 0); say it anyway.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return ErrnoStatus(errno, "dumpable");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return ErrnoStatus(errno, "no_new_privs");
  // Nothing above may be undone: check, rather than trust the order of the calls.
  uid_t ru, eu, su;
  gid_t rg, eg, sg;
  if (getresuid(&ru, &eu, &su) != 0 || getresgid(&rg, &eg, &sg) != 0 || ru != uid || eu != uid ||
      su != uid || rg != gid || eg != gid || sg != gid || getgroups(0, nullptr) != 0) {
    return absl::InternalError("the child's credentials are not the agent user's alone");
  }
  if (setresuid(0, 0, 0) == 0) return absl::InternalError("the child could become root again");
  return absl::OkStatus();
}

absl::Status InstallFetchFilter() {
  std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ERRNO(EPERM)));
  if (ctx == nullptr) return absl::InternalError("seccomp_init failed");
  if (seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) != 0) {
    return absl::InternalError("seccomp: bad-arch action");
  }
  Rules r(ctx.get());
  // Memory (the resolver may load an NSS module: mmap with PROT_EXEC stays allowed).
  for (int nr : {SYS_brk, SYS_mmap, SYS_munmap, SYS_mremap, SYS_madvise, SYS_mprotect}) {
    r.Allow(nr);
  }
  // Threads (Asio resolves names on a thread of its own), never a new process or namespace.
  r.Allow(SYS_clone, Arg(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD | kNamespaceFlags, CLONE_THREAD));
  r.Add(SCMP_ACT_ERRNO(ENOSYS), SYS_clone3);  // its flags are in memory: glibc falls back
  for (int nr : {SYS_futex, SYS_set_robust_list, SYS_rseq, SYS_gettid, SYS_getpid, SYS_getppid,
                 SYS_sched_yield, SYS_sched_getaffinity, SYS_exit, SYS_exit_group,
                 SYS_restart_syscall, SYS_getuid, SYS_geteuid, SYS_getgid, SYS_getegid,
                 SYS_uname}) {
    r.Allow(nr);
  }
  // Signals: its own; tgkill only towards itself (abort()).
  for (int nr : {SYS_rt_sigaction, SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_sigaltstack}) {
    r.Allow(nr);
  }
  r.Allow(SYS_tgkill, Arg(0, SCMP_CMP_EQ, static_cast<uint64_t>(getpid())));
  for (int nr : {SYS_clock_gettime, SYS_clock_getres, SYS_clock_nanosleep, SYS_nanosleep,
                 SYS_gettimeofday}) {
    r.Allow(nr);
  }
  // Descriptors: reading what it opened, writing its sockets and stderr.
  for (int nr : {SYS_read, SYS_readv, SYS_pread64, SYS_write, SYS_writev, SYS_close, SYS_fstat,
                 SYS_newfstatat, SYS_statx, SYS_lseek, SYS_getrandom, SYS_getdents64,
                 SYS_faccessat, SYS_faccessat2, SYS_access, SYS_readlink, SYS_pipe2}) {
    r.Allow(nr);
  }
  for (int cmd : {F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC}) {
    r.Allow(SYS_fcntl, Arg(1, SCMP_CMP_EQ, static_cast<uint64_t>(cmd)));
  }
  for (unsigned long req : {FIONBIO, FIONREAD, FIOCLEX, FIONCLEX}) {
    r.Allow(SYS_ioctl, Arg(1, SCMP_CMP_EQ, static_cast<uint64_t>(req)));
  }
  r.Allow(SYS_openat, Arg(2, SCMP_CMP_MASKED_EQ, kWriteOpenFlags, 0));  // read-only
  r.Allow(SYS_prlimit64, Arg(2, SCMP_CMP_EQ, 0));                        // read limits only
  for (int nr : {SYS_epoll_create1, SYS_epoll_ctl, SYS_epoll_wait, SYS_epoll_pwait,
                 SYS_eventfd2, SYS_timerfd_create, SYS_timerfd_settime, SYS_timerfd_gettime,
                 SYS_poll, SYS_ppoll, SYS_select, SYS_pselect6}) {
    r.Allow(nr);
  }
  // Sockets: TCP/UDP to Core and the resolver, a netlink route socket (getaddrinfo's
  // AI_ADDRCONFIG), the socketpair to root. Connecting and talking, never listening.
  for (int family : {AF_INET, AF_INET6, AF_UNIX}) {
    r.Allow(SYS_socket, Arg(0, SCMP_CMP_EQ, static_cast<uint64_t>(family)));
  }
  r.Allow(SYS_socket, Arg(0, SCMP_CMP_EQ, AF_NETLINK), Arg(2, SCMP_CMP_EQ, NETLINK_ROUTE));
  for (int nr : {SYS_connect, SYS_bind, SYS_sendto, SYS_sendmsg, SYS_sendmmsg, SYS_recvfrom,
                 SYS_recvmsg, SYS_shutdown, SYS_getsockopt, SYS_setsockopt, SYS_getsockname,
                 SYS_getpeername}) {
    r.Allow(nr);
  }
  for (int nr : native::KillListed()) r.Add(SCMP_ACT_KILL_PROCESS, nr);
  r.Add(SCMP_ACT_KILL_PROCESS, SYS_execve);
  RETURN_IF_ERROR(r.status());
  int rc = seccomp_load(ctx.get());
  if (rc != 0) return absl::InternalError(absl::StrCat("seccomp_load: ", strerror(-rc)));
  return absl::OkStatus();
}

}  // namespace sn::install
