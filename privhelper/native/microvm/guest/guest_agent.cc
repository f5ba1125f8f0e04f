// The guest agent: PID 1 of a microVM sandbox (the /init of the release's `guest_agent`
// initramfs), statically linked. It mounts the guest's pseudo filesystems and the sandbox's
// root filesystem disk, then answers the host's requests (proto/guest_agent.proto) on the
// virtio-serial port "sn.agent", one at a time, until it is told to power off.
//
// Kernel command line: `sn.root=DEV` names the root filesystem disk (mounted read-write at
// /sandbox, ext4 or erofs; an ext4 is grown to the whole disk, docs/protocol.md 24j); without it the sandbox root is the initramfs itself (the kernel
// boot test). Everything the host asks runs inside the sandbox root: processes chroot into
// it, files are resolved in it (openat2 RESOLVE_IN_ROOT).
//
// The guest trusts the host (it is the host's agent); the host does not trust the guest
// (privhelper/native/microvm/guest_channel.h).
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "privhelper/native/microvm/guest/process.h"
#include "privhelper/native/microvm/guest_frames.h"
#include "proto/guest_agent.pb.h"

namespace sn::guest {
namespace {

using v1::FromGuest;
using v1::ToGuest;

constexpr char kPortName[] = "sn.agent";
constexpr char kSandboxRoot[] = "/sandbox";
// ext4's online resize (fs/ext4/ext4.h; not in the kernel's uapi headers): the new size in
// filesystem blocks.
constexpr unsigned long kExt4ResizeFs = _IOW('f', 16, uint64_t);
constexpr uint32_t kProtocolVersion = 1;
// A request is at most 48 MiB of content plus its envelope.
constexpr size_t kMaxRequestBytes = (size_t{48} << 20) + 65536;

void Log(const std::string& line) {
  std::string l = "sn-guest-agent: " + line + "\n";
  (void)!write(2, l.data(), l.size());
}

std::string ReadSmall(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  std::string out = s.str();
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// `key=value` of the kernel command line, or nothing.
std::optional<std::string> CmdlineValue(const std::string& key) {
  std::istringstream words(ReadSmall("/proc/cmdline"));
  std::string w;
  while (words >> w) {
    if (w.rfind(key + "=", 0) == 0) return w.substr(key.size() + 1);
  }
  return std::nullopt;
}

void MountPseudo(const char* src, const char* target, const char* type) {
  mkdir(target, 0755);
  if (mount(src, target, type, MS_NOSUID | MS_NOEXEC, nullptr) != 0 && errno != EBUSY) {
    Log(std::string("mount ") + type + " on " + target + ": " + std::strerror(errno));
  }
}

// The host gives the guest a disk of microvm.disk_bytes (its qcow2 overlay's size) over an
// image made as small as its files: the mounted ext4 is grown online to the whole disk, so
// the sandbox can use it. Once grown (a resume), there is nothing to do. A failure is logged
// and the sandbox keeps the image's size.
void GrowToDisk(const std::string& dev) {
  const int disk = open(dev.c_str(), O_RDONLY | O_CLOEXEC);
  uint64_t disk_bytes = 0;
  const bool sized = disk >= 0 && ioctl(disk, BLKGETSIZE64, &disk_bytes) == 0;
  if (disk >= 0) close(disk);
  struct statfs fs;
  if (!sized || statfs(kSandboxRoot, &fs) != 0 || fs.f_bsize <= 0) {
    Log("cannot size the root disk " + dev + ": " + std::strerror(errno));
    return;
  }
  const uint64_t blocks = disk_bytes / static_cast<uint64_t>(fs.f_bsize);
  if (blocks <= static_cast<uint64_t>(fs.f_blocks)) return;
  const int root = open(kSandboxRoot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  uint64_t want = blocks;
  if (root < 0 || ioctl(root, kExt4ResizeFs, &want) != 0) {
    Log("cannot grow the root filesystem to its disk: " + std::string(std::strerror(errno)));
  }
  if (root >= 0) close(root);
}

// The root filesystem disk at /sandbox, with its own /proc, /dev and /tmp when it has those
// directories. False when there is no disk (the sandbox root is then "/").
bool MountSandboxRoot() {
  std::optional<std::string> dev = CmdlineValue("sn.root");
  if (!dev.has_value()) return false;
  mkdir(kSandboxRoot, 0755);
  bool mounted = false;
  const char* mounted_type = nullptr;
  for (const char* type : {"ext4", "erofs"}) {
    for (int attempt = 0; attempt < 100 && !mounted; ++attempt) {
      if (mount(dev->c_str(), kSandboxRoot, type, 0, nullptr) == 0) {
        mounted = true;
        mounted_type = type;
      } else if (errno == ENOENT || errno == ENXIO) {
        usleep(20 * 1000);  // the disk's node is not there yet
      } else {
        break;
      }
    }
    if (mounted) break;
  }
  if (!mounted) {
    Log("cannot mount the root filesystem " + *dev + ": " + std::strerror(errno));
    return false;
  }
  if (std::strcmp(mounted_type, "ext4") == 0) GrowToDisk(*dev);
  const std::string root = kSandboxRoot;
  struct stat st;
  if (stat((root + "/proc").c_str(), &st) == 0) {
    mount("proc", (root + "/proc").c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  }
  if (stat((root + "/dev").c_str(), &st) == 0) {
    mount("devtmpfs", (root + "/dev").c_str(), "devtmpfs", MS_NOSUID, nullptr);
  }
  if (stat((root + "/tmp").c_str(), &st) == 0) {
    mount("tmpfs", (root + "/tmp").c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  }
  return true;
}

// The /dev node of the virtio-serial port named kPortName (its sysfs directory's name).
std::optional<std::string> FindPort() {
  for (int attempt = 0; attempt < 500; ++attempt) {
    if (DIR* d = opendir("/sys/class/virtio-ports")) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string name = e->d_name;
        if (ReadSmall("/sys/class/virtio-ports/" + name + "/name") == kPortName) {
          closedir(d);
          const std::string node = "/dev/" + name;
          struct stat st;
          for (int i = 0; i < 100 && stat(node.c_str(), &st) != 0; ++i) usleep(10 * 1000);
          return node;
        }
      }
      closedir(d);
    }
    usleep(10 * 1000);
  }
  return std::nullopt;
}

class Agent {
 public:
  Agent(int port, std::string root) : port_(port), root_(std::move(root)) {
    root_fd_ = open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  }

  // Serves until Poweroff; returns then.
  void Serve() {
    for (;;) {
      ReapOrphans();
      ToGuest request;
      absl::Status s = ReadGuestFrame(port_, &request, kMaxRequestBytes, /*idle_ms=*/1000);
      if (absl::IsDeadlineExceeded(s)) continue;  // idle: reap, then wait again
      if (!s.ok()) {
        // The host went away (or sent garbage): wait for the next host; the sandbox keeps
        // running. A closed virtio port reads EOF until a host reconnects.
        usleep(50 * 1000);
        continue;
      }
      FromGuest answer = Answer(request);
      answer.set_id(request.id());
      if (absl::Status w = WriteGuestFrame(port_, answer); !w.ok()) {
        Log(std::string("answer lost: ") + std::string(w.message()));
      }
      if (request.request_case() == ToGuest::kPoweroff) return;
    }
  }

 private:
  FromGuest Answer(const ToGuest& r) {
    switch (r.request_case()) {
      case ToGuest::kHello:
        return Hello(r.hello());
      case ToGuest::kStart:
        return Start(r.start());
      case ToGuest::kExec:
        return RunExec(root_, r.exec());
      case ToGuest::kWriteFile:
        return WriteFileIn(root_fd_, r.write_file());
      case ToGuest::kReadFile:
        return ReadFileIn(root_fd_, r.read_file());
      case ToGuest::kSync:
      case ToGuest::kPoweroff: {
        sync();
        FromGuest a;
        a.mutable_done();
        return a;
      }
      case ToGuest::REQUEST_NOT_SET:
        break;
    }
    return ErrorAnswer(v1::ERROR_INVALID, "an empty request");
  }

  FromGuest Hello(const v1::Hello& h) {
    FromGuest a;
    v1::Ready* r = a.mutable_ready();
    r->set_nonce(h.nonce());
    r->set_protocol_version(kProtocolVersion);
    utsname u;
    if (uname(&u) == 0) r->set_kernel_release(std::string(u.release).substr(0, 64));
    r->set_main_running(main_pid_ > 0);
    return a;
  }

  FromGuest Start(const v1::Start& s) {
    if (main_pid_ > 0) return ErrorAnswer(v1::ERROR_CONFLICT, "the main process runs");
    absl::StatusOr<pid_t> pid = StartMain(root_, s);
    if (!pid.ok()) return ErrorAnswer(v1::ERROR_FAILED, std::string(pid.status().message()));
    main_pid_ = *pid;
    FromGuest a;
    a.mutable_done();
    return a;
  }

  // PID 1 reaps every orphan; the main process's end is noted. (An exec's own child is
  // waited for by RunExec before the loop comes back here.)
  void ReapOrphans() {
    for (;;) {
      int status = 0;
      pid_t p = waitpid(-1, &status, WNOHANG);
      if (p <= 0) return;
      if (p == main_pid_) main_pid_ = 0;
    }
  }

  int port_;
  std::string root_;
  int root_fd_ = -1;
  pid_t main_pid_ = 0;
};

}  // namespace
}  // namespace sn::guest

int main() {
  using namespace sn::guest;
  if (getpid() == 1) {
    MountPseudo("proc", "/proc", "proc");
    MountPseudo("sysfs", "/sys", "sysfs");
    MountPseudo("devtmpfs", "/dev", "devtmpfs");
  }
  signal(SIGPIPE, SIG_IGN);
  const bool disk = MountSandboxRoot();
  std::optional<std::string> port = FindPort();
  if (!port.has_value()) {
    Log("no virtio-serial port named sn.agent: powering off");
  } else {
    int fd = open(port->c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      Log("open " + *port + ": " + std::strerror(errno));
    } else {
      Log("serving on " + *port + (disk ? " (root filesystem at /sandbox)" : " (no disk)"));
      Agent(fd, disk ? "/sandbox" : "/").Serve();
    }
  }
  sync();
  if (disk) umount2("/sandbox", MNT_DETACH);
  // qemu runs with -no-reboot and the kernel with reboot=t: the guest's reboot is its
  // power-off (the kernel has no ACPI, so RB_POWER_OFF would only halt the CPU and leave qemu
  // running).
  if (getpid() == 1) reboot(RB_AUTOBOOT);
  return 0;
}
