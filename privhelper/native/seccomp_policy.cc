#include "privhelper/native/seccomp_policy.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "privhelper/helpers/sanitizer_build.h"
#include "privhelper/native/seccomp_bpf.h"

namespace sn::native {
namespace {

// Syscalls no correct helper ever makes: their use is taken as evidence of compromise and
// kills the process (SIGSYS), which privhelper logs with the helper's exit status.
constexpr int kKill[] = {
    // Filesystem mutation (the helper is uid 0 without capabilities: it still owns every
    // root-owned file, so the filter, not the permission bits, keeps it from changing them).
    SYS_open, SYS_creat, SYS_unlink, SYS_unlinkat, SYS_rename, SYS_renameat, SYS_renameat2,
    SYS_mkdir, SYS_mkdirat, SYS_rmdir, SYS_chmod, SYS_fchmod, SYS_fchmodat, SYS_chown,
    SYS_fchown, SYS_lchown, SYS_fchownat, SYS_link, SYS_linkat, SYS_symlink, SYS_symlinkat,
    SYS_truncate, SYS_ftruncate, SYS_fallocate, SYS_mknod, SYS_mknodat, SYS_setxattr,
    SYS_lsetxattr, SYS_fsetxattr, SYS_removexattr, SYS_lremovexattr, SYS_fremovexattr,
    SYS_utime, SYS_utimes, SYS_utimensat, SYS_futimesat, SYS_name_to_handle_at,
    SYS_open_by_handle_at, SYS_acct, SYS_swapon, SYS_swapoff, SYS_quotactl,
    // Mounts and the root directory.
    SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot, SYS_fsopen, SYS_fsconfig, SYS_fsmount,
    SYS_fspick, SYS_move_mount, SYS_open_tree, SYS_mount_setattr,
    // Other processes and the kernel's own attack surface.
    SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev, SYS_kcmp, SYS_bpf, SYS_keyctl,
    SYS_add_key, SYS_request_key, SYS_perf_event_open, SYS_userfaultfd, SYS_io_uring_setup,
    SYS_io_uring_enter, SYS_io_uring_register, SYS_setns, SYS_unshare, SYS_init_module,
    SYS_finit_module, SYS_delete_module, SYS_kexec_load, SYS_kexec_file_load, SYS_reboot,
    SYS_iopl, SYS_ioperm, SYS_syslog, SYS_settimeofday, SYS_clock_settime, SYS_adjtimex,
    SYS_clock_adjtime, SYS_sethostname, SYS_setdomainname, SYS_vhangup, SYS_lookup_dcookie,
    // Process creation outside clone: nothing in the helper uses the legacy calls.
    SYS_fork, SYS_vfork, SYS_execveat,
};

// Sanitizer builds (tests, fuzzing; privhelper/helpers/sanitizer_build.h) carry a runtime
// that reads /proc with the legacy open(2) and readlink(2), sets rlimits and alternate signal
// stacks; it gets those calls (reads only) in both filters. Release builds never do.
constexpr bool kSanitizerRuntime = privhelper::kSanitizerBuild;

constexpr uint64_t kNamespaceFlags = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |
                                     CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;
constexpr uint64_t kWriteOpenFlags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;

// One argument comparison (libseccomp's SCMP_An macros leave datum_b to the compiler's
// missing-initializer warning when only one datum is given).
scmp_arg_cmp Arg(unsigned arg, scmp_compare op, uint64_t a, uint64_t b = 0) {
  return scmp_arg_cmp{arg, op, a, b};
}

using Ctx = SeccompCtx;

// Collects the first libseccomp error so the rule list reads as a list.
class Rules {
 public:
  explicit Rules(scmp_filter_ctx ctx) : ctx_(ctx) {}
  void Add(uint32_t action, int nr) { Note(seccomp_rule_add(ctx_, action, nr, 0), nr); }
  void Add(uint32_t action, int nr, scmp_arg_cmp cmp) {
    Note(seccomp_rule_add(ctx_, action, nr, 1, cmp), nr);
  }
  void Allow(int nr) { Add(SCMP_ACT_ALLOW, nr); }
  void Allow(int nr, scmp_arg_cmp cmp) { Add(SCMP_ACT_ALLOW, nr, cmp); }
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

// Memory, threads and their synchronization.
void AllowMemoryAndThreads(Rules& r, bool spawn) {
  // Start-up maps the shared libraries executable; once serving, no new executable
  // memory (mmap/mprotect with PROT_EXEC fail).
  for (int nr : {SYS_brk, SYS_munmap, SYS_mremap, SYS_madvise}) r.Allow(nr);
  for (int nr : {SYS_mmap, SYS_mprotect}) {
    if (spawn) {
      r.Allow(nr);
    } else {
      r.Allow(nr, Arg(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    }
  }

  // Threads and their synchronization. clone: never a new namespace; once serving, threads
  // only (CLONE_THREAD set), so no fork. clone3 answers ENOSYS so glibc uses clone.
  if (spawn) {
    r.Allow(SYS_clone, Arg(0, SCMP_CMP_MASKED_EQ, kNamespaceFlags, 0));
  } else {
    r.Allow(SYS_clone, Arg(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
  }
  r.Add(SCMP_ACT_ERRNO(ENOSYS), SYS_clone3);
  for (int nr : {SYS_futex, SYS_set_robust_list, SYS_rseq, SYS_gettid, SYS_getpid, SYS_sched_yield,
                 SYS_sched_getaffinity, SYS_sched_getparam, SYS_sched_getscheduler, SYS_exit,
                 SYS_exit_group, SYS_restart_syscall}) {
    r.Allow(nr);
  }
}

// Signals and time.
void AllowSignalsAndTime(Rules& r, bool spawn, pid_t self) {
  // Signals: its own dispositions and masks; tgkill only towards itself once serving
  // (abort() raises SIGABRT with it); kill/tkill never (uid 0 could signal any root process).
  for (int nr : {SYS_rt_sigaction, SYS_rt_sigprocmask, SYS_rt_sigreturn}) r.Allow(nr);
  if (spawn) {
    r.Allow(SYS_tgkill);
  } else {
    r.Allow(SYS_tgkill, Arg(0, SCMP_CMP_EQ, static_cast<uint64_t>(self)));
  }

  // Time.
  for (int nr : {SYS_clock_gettime, SYS_clock_getres, SYS_clock_nanosleep, SYS_nanosleep,
                 SYS_gettimeofday}) {
    r.Allow(nr);
  }
}

// I/O on descriptors the helper already holds (its socketpair, stderr, daemon connections).
void AllowDescriptorIo(Rules& r) {
  for (int nr : {SYS_read, SYS_readv, SYS_write, SYS_writev, SYS_close, SYS_fstat,
                 SYS_newfstatat}) {
    r.Allow(nr);
  }
  for (int cmd : {F_GETFD, F_SETFD, F_GETFL, F_SETFL}) {
    r.Allow(SYS_fcntl, Arg(1, SCMP_CMP_EQ, static_cast<uint64_t>(cmd)));
  }
  // Non-blocking mode (Asio) and readable-byte counts; never terminal ioctls (TIOCSTI).
  for (unsigned long req : {FIONBIO, FIONREAD, FIOCLEX, FIONCLEX}) {
    r.Allow(SYS_ioctl, Arg(1, SCMP_CMP_EQ, static_cast<uint64_t>(req)));
  }
  r.Allow(SYS_prlimit64, Arg(2, SCMP_CMP_EQ, 0));  // read limits only
  r.Allow(SYS_getrandom);
}

// The event loop of the Docker client (Boost.Asio: epoll, its wake-up eventfd, timers) and
// its unix socket.
void AllowEventLoopAndSockets(Rules& r) {
  for (int nr : {SYS_epoll_create1, SYS_epoll_ctl, SYS_epoll_wait, SYS_epoll_pwait,
                 SYS_eventfd2, SYS_timerfd_create, SYS_timerfd_settime, SYS_timerfd_gettime,
                 SYS_poll, SYS_ppoll}) {
    r.Allow(nr);
  }

  // Sockets: unix-domain only (the daemon's socket); no bind/listen/accept.
  r.Allow(SYS_socket, Arg(0, SCMP_CMP_EQ, AF_UNIX));
  for (int nr : {SYS_connect, SYS_sendto, SYS_sendmsg, SYS_recvfrom, SYS_recvmsg, SYS_shutdown,
                 SYS_getsockopt}) {
    r.Allow(nr);
  }
}

// The exec and the loader (start-up only), and what a sanitizer build's runtime needs.
void AllowStartAndSanitizer(Rules& r, bool spawn) {
  if (spawn) {
    // Start-up only: the exec itself, the dynamic loader (TLS setup, reading the libraries
    // read-only) and the helper installing kServing.
    for (int nr : {SYS_execve, SYS_arch_prctl, SYS_set_tid_address, SYS_pread64, SYS_seccomp}) {
      r.Allow(nr);
    }
    r.Allow(SYS_openat, Arg(2, SCMP_CMP_MASKED_EQ, kWriteOpenFlags, 0));
  } else {
    r.Add(SCMP_ACT_KILL_PROCESS, SYS_execve);
  }

  if (kSanitizerRuntime) {
    r.Allow(SYS_open, Arg(1, SCMP_CMP_MASKED_EQ, kWriteOpenFlags, 0));
    r.Allow(SYS_openat, Arg(2, SCMP_CMP_MASKED_EQ, kWriteOpenFlags, 0));
    for (int nr : {SYS_readlink, SYS_readlinkat, SYS_sigaltstack, SYS_getrlimit, SYS_setrlimit,
                   SYS_prctl, SYS_personality, SYS_uname, SYS_getdents64, SYS_lseek,
                   SYS_mincore, SYS_getppid, SYS_getuid, SYS_geteuid, SYS_pipe2}) {
      r.Allow(nr);
    }
    r.Allow(SYS_prlimit64);
  }
}

// A provider's own group. The microVM provider reads its store's records and /proc/<pid>/stat
// (open read-only; Landlock confines which files, see privhelper/native/landlock.h), lists
// its store's directories, and finds and stops a VM's supervisor by pidfd, never by a bare pid
// (kill stays forbidden). Its start-up confines its file access with Landlock.
void AllowProvider(Rules& r, bool spawn, std::string_view provider) {
  if (provider != "microvm") return;
  if (!kSanitizerRuntime) {  // the sanitizer group has these already
    if (!spawn) r.Allow(SYS_openat, Arg(2, SCMP_CMP_MASKED_EQ, kWriteOpenFlags, 0));
    for (int nr : {SYS_getdents64, SYS_lseek}) r.Allow(nr);
  }
  for (int nr : {SYS_pidfd_open, SYS_pidfd_send_signal}) r.Allow(nr);
  if (spawn) {
    for (int nr : {SYS_landlock_create_ruleset, SYS_landlock_add_rule, SYS_landlock_restrict_self}) {
      r.Allow(nr);
    }
  }
}

absl::StatusOr<Ctx> Build(HelperFilter which, std::string_view provider, pid_t self) {
  Ctx ctx(seccomp_init(SCMP_ACT_ERRNO(EPERM)));
  if (ctx == nullptr) return absl::InternalError("seccomp_init failed");
  // A foreign ABI (x32, i386 through int 0x80) is never used: kill.
  if (seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) != 0) {
    return absl::InternalError("seccomp: bad-arch action");
  }
  Rules r(ctx.get());
  const bool spawn = which == HelperFilter::kSpawn;

  AllowMemoryAndThreads(r, spawn);
  AllowSignalsAndTime(r, spawn, self);
  AllowDescriptorIo(r);
  AllowEventLoopAndSockets(r);
  AllowStartAndSanitizer(r, spawn);
  AllowProvider(r, spawn, provider);
  for (int nr : kKill) {
    if (!(kSanitizerRuntime && nr == SYS_open)) r.Add(SCMP_ACT_KILL_PROCESS, nr);
  }
  if (!r.status().ok()) return r.status();
  return ctx;
}

}  // namespace

std::span<const int> KillListed() { return kKill; }

absl::StatusOr<std::vector<sock_filter>> ExportHelperFilter(HelperFilter which,
                                                            std::string_view provider,
                                                            pid_t self) {
  absl::StatusOr<Ctx> ctx = Build(which, provider, self);
  if (!ctx.ok()) return ctx.status();
  return ExportFilterProgram(ctx->get());
}

absl::Status InstallServingFilter(std::string_view provider) {
  absl::StatusOr<Ctx> ctx = Build(HelperFilter::kServing, provider, getpid());
  if (!ctx.ok()) return ctx.status();
  // no_new_privs is already set by the spawn path; every thread gets the filter.
  if (seccomp_attr_set(ctx->get(), SCMP_FLTATR_CTL_NNP, 0) != 0 ||
      seccomp_attr_set(ctx->get(), SCMP_FLTATR_CTL_TSYNC, 1) != 0) {
    return absl::InternalError("seccomp: attributes");
  }
  int rc = seccomp_load(ctx->get());
  if (rc != 0) return absl::InternalError(absl::StrCat("seccomp_load: ", strerror(-rc)));
  return absl::OkStatus();
}


}  // namespace sn::native
