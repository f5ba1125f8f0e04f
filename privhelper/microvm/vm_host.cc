#include "privhelper/microvm/vm_host.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"
#include "privhelper/microvm/image_store.h"
#include "privhelper/native/microvm/qemu_seccomp.h"
#include "privhelper/native/outcomes.h"
#include "privhelper/store/prep_failure.h"
#include "privhelper/store/safe_dir.h"

namespace sn::microvm {
namespace {

namespace v1 = ::sn::privhelper::v1;
using privhelper::store::PrepFailure;

// A boot file the generation cannot give: its release has no artifact of the kind, or its
// stored file is gone. Unavailable (the helper answers "nothing was started") with
// runtime_missing: the store's check finds a stored file gone and a repair is queued; a
// release without the kind stays an unready placeholder (docs/protocol.md 24g).
absl::Status MissingBootFile(std::string_view why) {
  return PrepFailure(absl::StatusCode::kUnavailable, Diagnostic::kRuntimeMissing, why);
}

// A boot that failed once it acted (the VM's record made, its supervisor run) is no refusal:
// Internal, which the helper answers uncertain (microvm_ops.cc, ActionCode), whatever the
// step's own code said.
absl::Status AfterActing(const absl::Status& s) {
  return s.ok() ? s : absl::InternalError(s.message());
}

}  // namespace

std::map<std::string_view, std::string*> BootFiles::ByKind() {
  return {{"kernel", &kernel},
          {"firmware", &firmware},
          {"guest_agent", &initramfs},
          {"seccomp", &seccomp}};
}

void BootFiles::Into(VmDefinition* def) const {
  def->kernel = kernel;
  def->firmware = firmware;
  def->initramfs = initramfs;
  def->seccomp = seccomp;
}

VmHost::VmHost(VmHostOptions options, ArtifactsFor artifacts_for)
    : o_(std::move(options)),
      artifacts_for_(std::move(artifacts_for)),
      store_options_([this] {
        VmStoreOptions s;
        s.root = o_.config.store_dir;
        s.vm_uid = o_.config.vm_uid;
        s.vm_gid = o_.config.vm_gid;
        s.qemu = o_.config.qemu;
        s.qemu_img = o_.config.qemu_img;
        s.supervisor = o_.supervisor;
        s.accel = o_.accel;
        s.host_cpus = o_.host_cpus;
        s.disk_bytes = o_.config.disk_bytes;
        s.cpu_cgroup_parent = o_.cpu_cgroup_parent;
        return s;
      }()),
      store_(store_options_) {}

absl::Status VmHost::Act(const v1::ExecuteRequest& req, const privhelper::ResolvedCall& resolved,
                         const v1::VmRequest& vm) {
  if (o_.cpu_cgroup_parent.empty() && !vm.has_remove()) {
    // No cgroup to give the VM its CPU quota in (the start's probe failed): nothing boots.
    return PrepFailure(absl::StatusCode::kUnavailable, Diagnostic::kProviderUnavailable,
                       "no cgroup hierarchy with the cpu controller: a VM's CPU quota cannot "
                       "be set");
  }
  if (req.has_create()) return Boot(req, resolved);
  // resume and remove act on a recorded VM: only one of the call's own generation (a helper
  // of another generation, e.g. a Runtime helper of a newer release, never reaches it).
  absl::StatusOr<VmEntry> recorded = store_.Find(vm.sandbox_id());
  if (vm.has_remove() && absl::IsNotFound(recorded.status())) return absl::OkStatus();
  if (!recorded.ok()) return recorded.status();
  if (recorded->definition.generation != req.generation()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the VM belongs to generation ", recorded->definition.generation, ", not the call's ",
        req.generation()));
  }
  if (vm.has_remove()) return store_.RemoveStopped(vm.sandbox_id());
  // resume: the VM's own recorded definition, whose boot files are staged again when a
  // collection of another generation that shared them removed them.
  RETURN_IF_ERROR(StageBootFiles(req.generation()).status());
  absl::MutexLock lock(&boot_mu_);
  RETURN_IF_ERROR(CheckFreeSpace(0));  // its overlay is counted with the others
  return AfterActing(store_.StartVm(vm.sandbox_id()));
}

absl::Status VmHost::ProbeBoot(int64_t generation) {
  ASSIGN_OR_RETURN(BootFiles files, StageBootFiles(generation));
  ASSIGN_OR_RETURN(std::vector<privhelper::store::PlannedArtifact> artifacts,
                   artifacts_for_(generation));
  std::string image;
  for (const privhelper::store::PlannedArtifact& a : artifacts) {
    if (a.kind != "image") continue;
    ASSIGN_OR_RETURN(image, MicrovmImageStore(o_.config.store_dir + "/images")
                                .PathOf("sha256:" + a.sha256));
    break;
  }
  if (image.empty()) return absl::FailedPreconditionError("the generation has no image");
  VmStoreOptions po = store_options_;
  po.root = o_.config.store_dir + "/probe";
  // The probe VM's id is the same in every installation: its cgroup is named by the process.
  po.cgroup_leaf_prefix = absl::StrCat("probe-", getpid(), "-");
  po.boot_deadline = absl::Seconds(60);
  VmStore probe(po);
  constexpr char kProbeId[] = "00000000-0000-4000-8000-000000000001";
  absl::MutexLock lock(&probe_mu_);  // one probe VM at a time
  RETURN_IF_ERROR(probe.Remove(kProbeId, absl::Now() + absl::Seconds(10)));  // a crash's leftover
  VmDefinition def;
  def.sandbox_id = kProbeId;
  def.generation = generation;
  def.args_digest = "probe";
  def.image = image;
  files.Into(&def);
  def.cpu_millis = 1000;
  def.memory_bytes = int64_t{64} << 20;
  absl::Status s = probe.Define(def);
  if (s.ok()) s = probe.StartVm(kProbeId);
  if (s.ok()) s = probe.StartMainProcess(kProbeId, absl::Now() + po.boot_deadline);  // handshake
  absl::Status removed = probe.Remove(kProbeId, absl::Now() + absl::Seconds(10));
  if (!s.ok()) return s;
  return removed;
}

absl::StatusOr<BootFiles> VmHost::StageBootFiles(int64_t generation) {
  absl::StatusOr<std::vector<privhelper::store::PlannedArtifact>> artifacts =
      artifacts_for_(generation);
  if (!artifacts.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the generation's artifacts: ", artifacts.status().message()));
  }
  BootFiles f;
  // Exactly one artifact of each boot kind: which of two a VM boots would be a guess.
  std::map<std::string_view, std::string*> kinds = f.ByKind();
  for (const privhelper::store::PlannedArtifact& art : *artifacts) {
    auto it = kinds.find(art.kind);
    if (it == kinds.end()) continue;
    if (!it->second->empty()) {
      return PrepFailure(absl::StatusCode::kFailedPrecondition, Diagnostic::kConfigurationInvalid,
                         absl::StrCat("the generation's release has two ", art.kind,
                                      " artifacts"));
    }
    absl::StatusOr<std::string> staged = Stage(o_.state_dir + "/" + art.path, art.sha256);
    if (absl::IsNotFound(staged.status())) {
      return MissingBootFile(absl::StrCat("the generation's ", art.kind, " artifact is not "
                                          "stored: ", staged.status().message()));
    }
    if (!staged.ok()) return staged.status();
    *it->second = *std::move(staged);
  }
  for (const auto& [kind, path] : kinds) {
    if (path->empty()) {
      return MissingBootFile(absl::StrCat("the generation's release has no ", AV(kind),
                                          " artifact"));
    }
  }
  // The supervisor compiles the policy again before it starts anything; refusing it here
  // keeps a bad policy from reaching even the VM's record.
  if (absl::Status policy = ReadQemuSeccompPolicy(f.seccomp).status(); !policy.ok()) {
    return PrepFailure(absl::StatusCode::kFailedPrecondition, Diagnostic::kConfigurationInvalid,
                       absl::StrCat("the generation's seccomp policy is refused: ",
                                    policy.message()));
  }
  return f;
}

absl::Status ForgetStagedFiles(const std::string& store_dir,
                               const std::vector<privhelper::store::PlannedArtifact>& files) {
  const std::string dir = store_dir + "/files";
  bool removed = false;
  for (const privhelper::store::PlannedArtifact& f : files) {
    if (BootFiles().ByKind().count(f.kind) == 0) continue;
    if (!wire::IsDigest(f.sha256)) return absl::InvalidArgumentError("not a sha256 digest");
    const std::string path = absl::StrCat(dir, "/sha256-", f.sha256);
    if (unlink(path.c_str()) == 0) {
      removed = true;
    } else if (errno != ENOENT) {
      return ErrnoStatus(errno, "remove " + path);
    }
  }
  return removed ? SyncDirectory(dir) : absl::OkStatus();
}

absl::Status VmHost::CheckFreeSpace(int64_t new_disk) {
  struct statvfs fs;
  if (statvfs(o_.config.store_dir.c_str(), &fs) != 0) {
    return ErrnoStatus(errno, "statvfs " + o_.config.store_dir);
  }
  ASSIGN_OR_RETURN(const int64_t growth, store_.OverlayGrowthBytes());
  const unsigned __int128 free_bytes =
      static_cast<unsigned __int128>(fs.f_bavail) * static_cast<unsigned __int128>(fs.f_frsize);
  const unsigned __int128 needed = static_cast<unsigned __int128>(o_.config.free_space_floor_bytes) +
                                   static_cast<unsigned __int128>(growth) +
                                   static_cast<unsigned __int128>(new_disk);
  if (free_bytes < needed) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the VM store has ", static_cast<uint64_t>(free_bytes), " bytes free; its overlays may "
        "still take ", growth, " and a new disk ", new_disk, ", above the free-space floor of ",
        o_.config.free_space_floor_bytes));
  }
  return absl::OkStatus();
}

absl::Status VmHost::Boot(const v1::ExecuteRequest& req, const privhelper::ResolvedCall& resolved) {
  const v1::CreateArgs& a = req.create();
  if (resolved.native_image.empty()) return absl::FailedPreconditionError("no image resolved");
  ASSIGN_OR_RETURN(BootFiles files, StageBootFiles(req.generation()));
  VmDefinition def;
  files.Into(&def);
  absl::MutexLock lock(&boot_mu_);
  RETURN_IF_ERROR(CheckFreeSpace(OverlayCeilingBytes(o_.config.disk_bytes)));
  def.sandbox_id = a.sandbox_id();
  def.generation = req.generation();
  def.args_digest = native::CreateArgsDigest(a);
  // The identity privhelper resolved for the call, as the store's checked file.
  ASSIGN_OR_RETURN(def.image, MicrovmImageStore(o_.config.store_dir + "/images")
                                  .PathOf(resolved.native_image));
  def.cpu_millis = a.cpu_millis();
  def.memory_bytes = a.memory_bytes();
  def.command.assign(a.command().begin(), a.command().end());
  def.env = std::map<std::string, std::string>(a.env().begin(), a.env().end());
  RETURN_IF_ERROR(store_.Define(def));
  return AfterActing(store_.StartVm(def.sandbox_id));
}

absl::StatusOr<std::string> VmHost::Stage(const std::string& source_path,
                                          const std::string& sha256) {
  if (!wire::IsDigest(sha256)) return absl::InvalidArgumentError("not a sha256 digest");
  const std::string dir = o_.config.store_dir + "/files";
  const std::string path = absl::StrCat(dir, "/sha256-", sha256);
  absl::MutexLock lock(&stage_mu_);
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!IsStoreFile(st)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": not a regular, single-linked 0444 file of privhelper's uid"));
    }
    return path;  // written whole (renamed into place after its hash was checked)
  }
  if (errno != ENOENT) return ErrnoStatus(errno, "stat " + path);
  privhelper::OwnedFd in(open(source_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (in.get() < 0) return ErrnoStatus(errno, "open " + source_path);
  if (fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(source_path + ": not a regular file");
  }
  ContentRules rules;
  rules.what = "boot file";
  rules.expected_sha256 = sha256;
  auto source = [&in](char* buf, size_t n) -> absl::StatusOr<size_t> {
    for (;;) {
      const ssize_t got = read(in.get(), buf, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return ErrnoStatus(errno, "read");
    }
  };
  RETURN_IF_ERROR(WriteContentFile(dir, source, static_cast<uint64_t>(st.st_size), rules).status());
  return path;
}

}  // namespace sn::microvm
