#include "privhelper/native/seccomp_bpf.h"

#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sn::native {

void SeccompCtxDeleter::operator()(void* ctx) const { seccomp_release(ctx); }

absl::StatusOr<std::vector<sock_filter>> ExportFilterProgram(void* ctx) {
  // libseccomp 2.5 exports only to a descriptor: an anonymous memory file.
  int fd = memfd_create("sn-seccomp-bpf", MFD_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("memfd_create: ", strerror(errno)));
  int rc = seccomp_export_bpf(ctx, fd);
  off_t size = rc == 0 ? lseek(fd, 0, SEEK_CUR) : -1;
  std::vector<sock_filter> program;
  if (size > 0 && size % static_cast<off_t>(sizeof(sock_filter)) == 0) {
    program.resize(static_cast<size_t>(size) / sizeof(sock_filter));
    ssize_t got = pread(fd, program.data(), static_cast<size_t>(size), 0);
    if (got != size) program.clear();
  }
  close(fd);
  if (program.empty()) return absl::InternalError("seccomp: exporting the BPF program failed");
  return program;
}

int LoadFilterProgram(std::span<const sock_filter> program) noexcept {
  sock_fprog prog;
  prog.len = static_cast<unsigned short>(program.size());
  prog.filter = const_cast<sock_filter*>(program.data());
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return errno;
  return 0;
}

}  // namespace sn::native
