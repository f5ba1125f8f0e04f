#include "privhelper/native/microvm/vm_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <poll.h>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/json/record.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "privhelper/native/microvm/qemu_command.h"
#include "privhelper/native/microvm/vm_cgroup.h"
#include "privhelper/native/microvm/vm_process.h"

namespace sn::microvm {
namespace {

constexpr char kDefinition[] = "vm.json";
constexpr char kAgentSocket[] = "agent.sock";  // bound by the supervisor (root, 0600)
constexpr size_t kMaxDefinitionBytes = 256 * 1024;

// A sandbox id as spec §3 writes it: a lowercase uuid. Nothing else names a directory.
bool IsSandboxId(const std::string& id) {
  if (id.size() != 36) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Runs argv (absolute argv[0], empty environment) to its end; its exit status.
// The child only makes async-signal-safe calls (privhelper is multi-threaded when it boots a
// VM): the argument vector is built before the fork.
absl::StatusOr<int> RunToEnd(const std::vector<std::string>& argv) {
  std::vector<char*> av;
  for (const std::string& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus(errno, "fork");
  if (pid == 0) {
    char* envp[] = {nullptr};
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    // Nothing of privhelper's reaches qemu-img or a VM's supervisor (a generation's lease
    // least of all): only 0-2.
    syscall(SYS_close_range, 3, ~0U, 0);
    execve(av[0], av.data(), envp);
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus(errno, "waitpid");
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

absl::StatusOr<VmDefinition> ReadDefinition(const std::string& dir) {
  absl::StatusOr<std::string> text = ReadSmallFile(dir + "/" + kDefinition, kMaxDefinitionBytes);
  if (!text.ok()) return text.status();
  return DecodeVmDefinition(*text);
}

}  // namespace

std::string EncodeVmDefinition(const VmDefinition& d) {
  nlohmann::json env = nlohmann::json::array();
  for (const auto& [k, v] : d.env) env.push_back(k + "=" + v);
  nlohmann::json doc = {{"schema", 1},
                        {"sandbox_id", d.sandbox_id},
                        {"generation", d.generation},
                        {"args_digest", d.args_digest},
                        {"image", d.image},
                        {"kernel", d.kernel},
                        {"firmware", d.firmware},
                        {"initramfs", d.initramfs},
                        {"seccomp", d.seccomp},
                        {"cpu_millis", d.cpu_millis},
                        {"memory_bytes", d.memory_bytes},
                        {"command", d.command},
                        {"env", env}};
  return doc.dump() + "\n";
}

absl::StatusOr<VmDefinition> DecodeVmDefinition(std::string_view text) {
  absl::StatusOr<json::RecordObject> parsed =
      json::RecordObject::Parse(text, "VM definition", kMaxDefinitionBytes);
  if (!parsed.ok()) return parsed.status();
  json::RecordObject& d = *parsed;
  VmDefinition v;
  absl::Status s = d.Schema(1);
  auto str = [&](const char* name, std::string* out) {
    if (!s.ok()) return;
    absl::StatusOr<std::string> x = d.String(name);
    if (x.ok()) *out = *std::move(x); else s = x.status();
  };
  auto num = [&](const char* name, int64_t* out) {
    if (!s.ok()) return;
    absl::StatusOr<int64_t> x = d.Int(name);
    if (x.ok()) *out = *x; else s = x.status();
  };
  str("sandbox_id", &v.sandbox_id);
  num("generation", &v.generation);
  for (auto [name, out] : {std::pair{"args_digest", &v.args_digest}, {"image", &v.image},
                           {"kernel", &v.kernel}, {"firmware", &v.firmware},
                           {"initramfs", &v.initramfs}, {"seccomp", &v.seccomp}}) {
    str(name, out);
  }
  num("cpu_millis", &v.cpu_millis);
  num("memory_bytes", &v.memory_bytes);
  if (s.ok()) {
    absl::StatusOr<std::vector<std::string>> cmd = d.Strings("command");
    if (cmd.ok()) v.command = *std::move(cmd); else s = cmd.status();
  }
  if (s.ok()) {
    absl::StatusOr<std::vector<std::string>> env = d.Strings("env");
    if (!env.ok()) s = env.status();
    for (size_t i = 0; s.ok() && i < env->size(); ++i) {
      const size_t eq = (*env)[i].find('=');
      if (eq == std::string::npos || eq == 0) s = d.MemberMalformed("env", "an entry is not K=V");
      else v.env[(*env)[i].substr(0, eq)] = (*env)[i].substr(eq + 1);
    }
  }
  if (s.ok()) s = d.Finish();
  if (s.ok() && !IsSandboxId(v.sandbox_id)) s = d.MemberMalformed("sandbox_id", "not a uuid");
  if (!s.ok()) return s;
  return v;
}

namespace {
// The last `n` bytes of the console log (qemu's own errors are its last lines), one line.
std::string ConsoleTail(const std::string& path, size_t n) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return absl::StrCat("no console log: ", std::strerror(errno));
  struct stat st;
  std::string out;
  if (fstat(fd, &st) == 0) {
    const off_t from = st.st_size > static_cast<off_t>(n) ? st.st_size - n : 0;
    out.resize(st.st_size - from);
    const ssize_t r = pread(fd, out.data(), out.size(), from);
    out.resize(r > 0 ? r : 0);
  }
  close(fd);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = '|';
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}
}  // namespace

std::string VmStore::VmDir(const std::string& id) const {
  return absl::StrCat(o_.root, "/vms/", id);
}

std::string VmStore::CgroupLeaf(const std::string& id) const {
  if (o_.cpu_cgroup_parent.empty()) return "";
  return absl::StrCat(o_.cpu_cgroup_parent, "/", o_.cgroup_leaf_prefix, id);
}

// Made as root (privhelper has no CAP_DAC_OVERRIDE: it writes only what root owns), then given
// to the VM's uid: the overlay first, its directory last.
absl::Status VmStore::MakeOverlay(const VmDefinition& def) {
  const std::string run = VmDir(def.sandbox_id) + "/run";
  if (mkdir(run.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus(errno, "mkdir " + run);
  const std::string disk = run + "/disk.qcow2";
  // The guest's disk is disk_bytes; the guest agent grows the image's ext4 to it at boot.
  ASSIGN_OR_RETURN(int rc, RunToEnd({o_.qemu_img, "create", "-q", "-f", "qcow2", "-F", "raw",
                                     "-b", def.image, disk, absl::StrCat(o_.disk_bytes)}));
  if (rc != 0) return absl::InternalError(absl::StrCat("qemu-img create exited with ", rc));
  if (chown(disk.c_str(), o_.vm_uid, o_.vm_gid) != 0) return ErrnoStatus(errno, "chown " + disk);
  if (chown(run.c_str(), o_.vm_uid, o_.vm_gid) != 0) return ErrnoStatus(errno, "chown " + run);
  return absl::OkStatus();
}

absl::Status VmStore::StartSupervisor(const VmDefinition& def) {
  const std::string dir = VmDir(def.sandbox_id);
  const std::string socket = dir + "/" + kAgentSocket;
  if (socket.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the VM's socket path ", socket, " is longer than a unix socket allows: the store's "
        "root must be shorter"));
  }
  VmFiles files{def.kernel, def.firmware, def.initramfs, dir + "/run/disk.qcow2"};
  VmShape shape{o_.accel, def.cpu_millis, def.memory_bytes, o_.host_cpus};
  ASSIGN_OR_RETURN(std::vector<std::string> qemu, QemuArgv(o_.qemu, files, shape));
  if (def.seccomp.empty() || def.seccomp[0] != '/') {
    return absl::InvalidArgumentError("the VM's seccomp policy path must be absolute");
  }
  std::vector<std::string> argv = {o_.supervisor, "--vm-dir=" + dir,
                                   absl::StrCat("--uid=", o_.vm_uid),
                                   absl::StrCat("--gid=", o_.vm_gid),
                                   absl::StrCat("--console-bytes=", o_.console_bytes),
                                   "--agent-socket=" + socket,
                                   absl::StrCat("--data-limit=", QemuDataLimitBytes(shape)),
                                   "--seccomp-policy=" + def.seccomp};
  if (const std::string leaf = CgroupLeaf(def.sandbox_id); !leaf.empty()) {
    argv.push_back("--cpu-cgroup=" + leaf);
    argv.push_back(absl::StrCat("--cpu-millis=", def.cpu_millis));
  }
  argv.push_back("--");
  argv.insert(argv.end(), qemu.begin(), qemu.end());
  ASSIGN_OR_RETURN(int rc, RunToEnd(argv));
  if (rc != 0) return absl::UnavailableError(absl::StrCat("the VM supervisor exited with ", rc));
  return absl::OkStatus();
}

absl::Status VmStore::StartMainProcess(const std::string& sandbox_id, absl::Time deadline) {
  ASSIGN_OR_RETURN(VmEntry e, Find(sandbox_id));
  const VmDefinition& def = e.definition;
  // Once the guest agent answers (the boot deadline bounds a guest that never does).
  deadline = std::min(deadline, absl::Now() + o_.boot_deadline);
  ASSIGN_OR_RETURN(std::unique_ptr<GuestChannel> channel, Connect(def.sandbox_id, deadline));
  if (def.command.empty()) return absl::OkStatus();
  guest::v1::ToGuest start;
  for (const std::string& a : def.command) start.mutable_start()->add_argv(a);
  for (const auto& [k, v] : def.env) (*start.mutable_start()->mutable_env())[k] = v;
  ASSIGN_OR_RETURN(guest::v1::FromGuest answer, channel->Call(start, deadline));
  if (answer.answer_case() != guest::v1::FromGuest::kDone) {
    return absl::FailedPreconditionError("the guest could not start the main process");
  }
  return absl::OkStatus();
}

absl::Status VmStore::Create(const VmDefinition& def) {
  RETURN_IF_ERROR(Define(def));
  RETURN_IF_ERROR(StartVm(def.sandbox_id));
  return StartMainProcess(def.sandbox_id, absl::Now() + o_.boot_deadline);
}

absl::Status VmStore::Resume(const std::string& sandbox_id) {
  ASSIGN_OR_RETURN(VmEntry e, Find(sandbox_id));
  if (e.state == VmState::kRunning) return absl::OkStatus();
  RETURN_IF_ERROR(StartVm(sandbox_id));
  return StartMainProcess(sandbox_id, absl::Now() + o_.boot_deadline);
}

absl::Status VmStore::Remove(const std::string& sandbox_id, absl::Time deadline) {
  if (!IsSandboxId(sandbox_id)) return absl::InvalidArgumentError("not a sandbox id");
  RETURN_IF_ERROR(Stop(sandbox_id, deadline));
  return RemoveStopped(sandbox_id);
}

absl::Status VmStore::StartVm(const std::string& sandbox_id) {
  ASSIGN_OR_RETURN(VmEntry e, Find(sandbox_id));
  if (e.state == VmState::kRunning) return absl::OkStatus();
  return StartSupervisor(e.definition);
}

absl::Status VmStore::Define(const VmDefinition& def) {
  if (!IsSandboxId(def.sandbox_id)) return absl::InvalidArgumentError("not a sandbox id");
  // Refused before anything is written: a disk smaller than its image could not hold it.
  struct stat image;
  if (stat(def.image.c_str(), &image) != 0) return ErrnoStatus(errno, "stat " + def.image);
  if (image.st_size > o_.disk_bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the image is ", image.st_size, " bytes, larger than a sandbox's disk (microvm.disk_bytes ",
        o_.disk_bytes, ")"));
  }
  const std::string vms = o_.root + "/vms";
  RETURN_IF_ERROR(MakeDirs(vms, 0755));
  const std::string dir = VmDir(def.sandbox_id);
  if (mkdir(dir.c_str(), 0755) != 0) {
    if (errno == EEXIST) return absl::AlreadyExistsError(def.sandbox_id);
    return ErrnoStatus(errno, "mkdir " + dir);
  }
  // Exactly 0755 whatever the umask (the privhelper unit's is 0077): qemu, as the VM's uid,
  // traverses it to its run/ directory.
  if (chmod(dir.c_str(), 0755) != 0) return ErrnoStatus(errno, "chmod " + dir);
  RETURN_IF_ERROR(SyncDirectory(vms));
  // The definition first: from here on the inventory lists this sandbox (retained until the
  // supervisor's record says it runs).
  RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + kDefinition, EncodeVmDefinition(def), 0644));
  return MakeOverlay(def);
}

absl::Status VmStore::Stop(const std::string& sandbox_id, absl::Time deadline) {
  ASSIGN_OR_RETURN(std::optional<LiveVm> live, FindLiveVm(VmDir(sandbox_id)));
  if (!live.has_value()) return absl::OkStatus();
  // The guest flushes its filesystems and powers off; qemu then exits and so does the
  // supervisor. Failing that within the grace (or the call's deadline, if sooner), SIGKILL of
  // the supervisor takes qemu with it.
  deadline = std::min(deadline, absl::Now() + o_.power_off_grace);
  absl::StatusOr<std::unique_ptr<GuestChannel>> c = Connect(sandbox_id, deadline);
  if (c.ok()) {
    guest::v1::ToGuest off;
    off.mutable_poweroff();
    (void)(*c)->Call(off, deadline);
  }
  pollfd p{live->pidfd(), POLLIN, 0};
  for (;;) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) break;
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000))) > 0) return absl::OkStatus();
  }
  syscall(SYS_pidfd_send_signal, live->pidfd(), SIGKILL, nullptr, 0);
  p.revents = 0;
  poll(&p, 1, 5000);
  return absl::OkStatus();
}

absl::Status VmStore::RemoveStopped(const std::string& sandbox_id) {
  if (!IsSandboxId(sandbox_id)) return absl::InvalidArgumentError("not a sandbox id");
  struct stat st;
  if (lstat(VmDir(sandbox_id).c_str(), &st) != 0 && errno == ENOENT) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::optional<LiveVm> live, FindLiveVm(VmDir(sandbox_id)));
  if (live.has_value()) return absl::FailedPreconditionError("the VM still runs");
  // run/ is the VM's uid's (0700): given back to root first, so that root without
  // CAP_DAC_OVERRIDE can list and unlink what qemu left in it. lchown: a link qemu put in its
  // place is not followed.
  const std::string run = VmDir(sandbox_id) + "/run";
  if (lchown(run.c_str(), 0, 0) != 0 && errno != ENOENT) return ErrnoStatus(errno, "chown " + run);
  // A supervisor killed before it removed the VM's cgroup left it (empty: qemu died with it).
  if (const std::string leaf = CgroupLeaf(sandbox_id); !leaf.empty()) {
    RETURN_IF_ERROR(RemoveVmCgroup(leaf));
  }
  std::error_code ec;
  std::filesystem::remove_all(VmDir(sandbox_id), ec);
  if (ec) return absl::UnavailableError(absl::StrCat("removing the VM: ", ec.message()));
  return SyncDirectory(o_.root + "/vms");
}

absl::StatusOr<VmEntry> VmStore::Find(const std::string& sandbox_id) {
  if (!IsSandboxId(sandbox_id)) return absl::InvalidArgumentError("not a sandbox id");
  // Its own directory first: one definition and one pidfd, whatever else the store holds (as
  // Docker's lookup inspects a container by name). Only its absence needs the complete
  // listing, the one proof of absence.
  const std::string dir = VmDir(sandbox_id);
  struct stat st;
  if (lstat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return absl::UnavailableError(absl::StrCat("VM ", sandbox_id, " is not a directory"));
    }
    absl::StatusOr<VmDefinition> def = ReadDefinition(dir);
    if (!def.ok() || def->sandbox_id != sandbox_id) {
      return absl::UnavailableError(absl::StrCat("VM ", sandbox_id, " has no readable definition"));
    }
    ASSIGN_OR_RETURN(std::optional<LiveVm> live, FindLiveVm(dir));
    return VmEntry{*std::move(def), live.has_value() ? VmState::kRunning : VmState::kRetained};
  }
  if (errno != ENOENT) return ErrnoStatus(errno, "stat " + dir);
  ASSIGN_OR_RETURN(std::vector<VmEntry> all, Inventory());
  for (VmEntry& e : all) {
    if (e.definition.sandbox_id == sandbox_id) return std::move(e);
  }
  return absl::NotFoundError(sandbox_id);
}

namespace {

// The names in the store's vms/ directory, complete or Unavailable; none when it is not there.
absl::StatusOr<std::vector<std::string>> ListVms(const std::string& vms) {
  DIR* d = opendir(vms.c_str());
  if (d == nullptr && errno == ENOENT) return std::vector<std::string>();
  if (d == nullptr) return absl::UnavailableError(absl::StrCat("listing ", vms, ": ", std::strerror(errno)));
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
  }
  const int err = errno;
  closedir(d);
  if (err != 0) return absl::UnavailableError("listing the VMs failed");
  return names;
}

// The virtual size in a qcow2 header (magic "QFI\xfb", then the size as a big-endian 64-bit
// integer at byte 24), read from the VM's own file without following a link or blocking on
// anything but a regular file; nullopt when there is no such header.
std::optional<int64_t> Qcow2VirtualBytes(const std::string& path, int64_t* allocated) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return std::nullopt;
  struct stat st;
  unsigned char h[32];
  const bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                  pread(fd, h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h));
  close(fd);
  if (!ok) return std::nullopt;
  *allocated = static_cast<int64_t>(st.st_blocks) * 512;
  if (std::memcmp(h, "QFI\xfb", 4) != 0) return std::nullopt;
  uint64_t size = 0;
  for (int i = 24; i < 32; ++i) size = (size << 8) | h[i];
  return static_cast<int64_t>(std::min<uint64_t>(size, uint64_t{1} << 40));
}

}  // namespace

absl::StatusOr<int64_t> VmStore::OverlayGrowthBytes() {
  const std::string vms = o_.root + "/vms";
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListVms(vms));
  int64_t growth = 0;
  for (const std::string& n : names) {
    const std::string disk = vms + "/" + n + "/run/disk.qcow2";
    struct stat st;
    if (lstat(disk.c_str(), &st) != 0 && errno == ENOENT) continue;  // no overlay: nothing grows
    int64_t allocated = 0;
    const int64_t virtual_bytes = Qcow2VirtualBytes(disk, &allocated).value_or(o_.disk_bytes);
    growth += std::max<int64_t>(OverlayCeilingBytes(virtual_bytes) - allocated, 0);
  }
  return growth;
}

absl::StatusOr<std::vector<VmEntry>> VmStore::Inventory() {
  const std::string vms = o_.root + "/vms";
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListVms(vms));
  std::vector<VmEntry> out;
  for (const std::string& n : names) {
    // Anything that is not a VM of ours makes the listing unknown, never smaller.
    if (!IsSandboxId(n)) return absl::UnavailableError(absl::StrCat("a foreign entry in ", vms, ": ", n));
    absl::StatusOr<VmDefinition> def = ReadDefinition(VmDir(n));
    if (!def.ok() || def->sandbox_id != n) {
      return absl::UnavailableError(absl::StrCat("VM ", n, " has no readable definition"));
    }
    ASSIGN_OR_RETURN(std::optional<LiveVm> live, FindLiveVm(VmDir(n)));
    out.push_back({*std::move(def), live.has_value() ? VmState::kRunning : VmState::kRetained});
  }
  return out;
}

absl::StatusOr<std::unique_ptr<GuestChannel>> VmStore::Connect(const std::string& sandbox_id,
                                                               absl::Time deadline) {
  const std::string dir = VmDir(sandbox_id);
  // A VM that exited (qemu refused its arguments, could not read a file as the VM's uid, the
  // guest panicked) ends the wait at once, with the end of its console as the reason.
  absl::Time next_check = absl::InfinitePast();
  auto still_running = [&]() -> absl::Status {
    if (absl::Now() < next_check) return absl::OkStatus();
    next_check = absl::Now() + absl::Milliseconds(200);
    std::string why;
    absl::StatusOr<std::optional<LiveVm>> live = FindLiveVm(dir, &why);
    if (!live.ok() || live->has_value()) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(
        "the VM is not running (", why, "; its console ends: \"",
        ConsoleTail(dir + "/console.log", 400), "\")"));
  };
  return GuestChannel::ConnectAndHandshake(dir + "/" + kAgentSocket, deadline, nullptr,
                                           still_running);
}

}  // namespace sn::microvm
