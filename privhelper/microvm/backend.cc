#include "privhelper/microvm/backend.h"

#include <linux/capability.h>
#include <unistd.h>

#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/atomic_file.h"
#include "common/error_cause.h"
#include "common/log.h"
#include "privhelper/microvm/image_store.h"
#include "privhelper/microvm/kvm_probe.h"
#include "privhelper/microvm/vm_host.h"
#include "privhelper/native/microvm/vm_cgroup.h"
#include "privhelper/native/microvm/vm_store.h"
#include "privhelper/program_path.h"
#include "privhelper/store/generations.h"

namespace sn::microvm {
namespace {

// What the host offers a VM: qemu's version, the accelerator the probe chose, and the cgroup
// directory VMs get their CPU quota in (vm_cgroup.h).
struct Host {
  absl::StatusOr<std::string> version = absl::UnavailableError("not probed");
  absl::StatusOr<std::string> accel = absl::UnavailableError("not probed");
  absl::StatusOr<std::string> cpu_cgroup = absl::UnavailableError("not probed");
};

absl::StatusOr<std::string> VmCgroupParent() {
  absl::StatusOr<CpuHierarchy> h = FindCpuHierarchy();
  if (!h.ok()) return h.status();
  return MakeVmCgroupParent(*h);
}

Host ProbeHost(const privhelper::MicrovmConfig& c) {
  Host h;
  h.version = QemuVersion(c.qemu);
  // The KVM probe runs a vCPU (a child process); "tcg" never needs it.
  const KvmProbe kvm = c.accel == "tcg" ? KvmProbe{false, "tcg configured", absl::ZeroDuration()}
                                        : ProbeKvm(kKvmDevice);
  h.accel = ChooseAccel(c.accel, kvm);
  h.cpu_cgroup = VmCgroupParent();
  LogInfo("microvm host probed",
          {{"qemu", h.version.ok() ? *h.version : h.version.status().ToString()},
           {"accel", h.accel.ok() ? *h.accel : h.accel.status().ToString()},
           {"kvm", kvm.usable ? "usable" : kvm.reason},
           {"cpu_cgroup", h.cpu_cgroup.ok() ? *h.cpu_cgroup : h.cpu_cgroup.status().ToString()}});
  return h;
}

// The usability probe's hook, set once the generation store is open (make_vm_actions): boots
// a guest of the newest held generation (VmHost::ProbeBoot); NotFound when none is held.
struct BootProbe {
  absl::Mutex mu;
  std::function<absl::Status()> run ABSL_GUARDED_BY(mu);
};

// Readiness: qemu answers its version, the configured accelerator runs guests, the store's
// inventory is complete (its counts are the provider's), and a guest of the newest held
// generation booted to its agent's handshake. A failed check runs again on the next report
// (qemu installed meanwhile, /dev/kvm given); a passed one is kept, so the KVM probe and the
// boot (about a CPU-second under TCG) run at start and after a failure only, never per health
// report — and again before a repaired generation is READY (ProbeForReadiness).
class MicrovmProvider final : public privhelper::Provider {
 public:
  MicrovmProvider(privhelper::MicrovmConfig config, Host host, std::shared_ptr<BootProbe> boot)
      : config_(std::move(config)), host_(std::move(host)), boot_(std::move(boot)),
        store_([this] {
          VmStoreOptions o;
          o.root = config_.store_dir;
          return o;
        }()) {}

  std::string_view name() const override { return "microvm"; }

  privhelper::ProbeResult Probe() override {
    Host host;
    {
      absl::MutexLock lock(&mu_);
      if (!host_.version.ok() || !host_.accel.ok() || !host_.cpu_cgroup.ok()) {
        host_ = ProbeHost(config_);
      }
      host = host_;
    }
    privhelper::ProbeResult r;
    if (!host.version.ok()) {
      r.diagnostic = Diagnostic::kProviderUnavailable;
      return r;
    }
    if (!host.accel.ok()) {
      r.diagnostic = Diagnostic::kVirtualizationUnavailable;
      r.fingerprint = MicrovmFingerprint(*host.version, "none");
      return r;
    }
    r.fingerprint = MicrovmFingerprint(*host.version, *host.accel);
    if (!host.cpu_cgroup.ok()) {
      // No VM could get its CPU quota: none is started (docs/protocol.md 24n).
      r.diagnostic = Diagnostic::kProviderUnavailable;
      return r;
    }
    absl::StatusOr<std::vector<VmEntry>> vms = store_.Inventory();
    if (!vms.ok()) {
      LogWarning("microvm inventory failed", {{"error", vms.status().ToString()}});
      r.diagnostic = Diagnostic::kProviderUnavailable;
      return r;
    }
    privhelper::SandboxCounts n;
    for (const VmEntry& e : *vms) (e.state == VmState::kRunning ? n.active : n.retained) += 1;
    r.sandboxes = n;
    if (absl::Status booted = BootIfNeeded(); !booted.ok()) {
      LogWarning("microvm usability probe failed: no guest booted", {{"error", booted.ToString()}});
      // The cause when the boot says why (the generation's boot files missing: runtime_missing,
      // its seccomp policy refused: configuration_invalid); a guest that did not come up has
      // no more specific code.
      const std::optional<ErrorCause> cause = CauseOf(booted);
      r.diagnostic = cause.has_value() ? cause->code : Diagnostic::kProviderUnavailable;
      return r;
    }
    r.ready = true;
    return r;
  }

  privhelper::ProbeResult ProbeForReadiness() override {
    {
      absl::MutexLock lock(&mu_);
      boot_passed_ = false;
    }
    return Probe();
  }

  // The accelerator VMs boot with: the probe's choice at start ("tcg" when it failed: a boot
  // then fails like any other, and readiness says why).
  std::string accel() {
    absl::MutexLock lock(&mu_);
    return host_.accel.ok() ? *host_.accel : "tcg";
  }

  // The cgroup directory VMs get their quota in: the start's probe's ("" when it failed: the
  // provider is then not ready, and a boot fails on the supervisor's missing cgroup).
  std::string cpu_cgroup() {
    absl::MutexLock lock(&mu_);
    return host_.cpu_cgroup.ok() ? *host_.cpu_cgroup : "";
  }

 private:
  // Boots a guest unless one booted since the start or the last failure. OK without booting
  // while no generation is held (nothing to boot yet: the next report tries).
  absl::Status BootIfNeeded() {
    {
      absl::MutexLock lock(&mu_);
      if (boot_passed_) return absl::OkStatus();
    }
    std::function<absl::Status()> run;
    {
      absl::MutexLock lock(&boot_->mu);
      run = boot_->run;
    }
    if (!run) return absl::OkStatus();
    const absl::Time start = absl::Now();
    absl::Status s = run();
    if (absl::IsNotFound(s)) return absl::OkStatus();
    if (s.ok()) {
      LogInfo("microvm usability probe: a guest booted",
              {{"ms", absl::ToInt64Milliseconds(absl::Now() - start)}});
    }
    absl::MutexLock lock(&mu_);
    boot_passed_ = s.ok();
    return s;
  }

  const privhelper::MicrovmConfig config_;
  absl::Mutex mu_;
  Host host_ ABSL_GUARDED_BY(mu_);
  bool boot_passed_ ABSL_GUARDED_BY(mu_) = false;
  const std::shared_ptr<BootProbe> boot_;
  VmStore store_;
};


}  // namespace

privhelper::RetirementHooks RetirementHooksFor(const std::string& store_dir) {
  privhelper::RetirementHooks h;
  h.in_use = [store_dir](int64_t generation) -> absl::Status {
    VmStoreOptions o;
    o.root = store_dir;
    absl::StatusOr<std::vector<VmEntry>> vms = VmStore(o).Inventory();
    if (!vms.ok()) {
      return absl::UnavailableError(
          absl::StrCat("the VM store's inventory failed: ", vms.status().message()));
    }
    for (const VmEntry& e : *vms) {
      if (e.definition.generation == generation) {
        return absl::UnavailableError(absl::StrCat(
            "VM ", e.definition.sandbox_id, " of the generation exists (",
            e.state == VmState::kRunning ? "running" : "retained", ")"));
      }
    }
    return absl::OkStatus();
  };
  h.forget_files = [store_dir](const std::vector<privhelper::store::PlannedArtifact>& files) {
    return ForgetStagedFiles(store_dir, files);
  };
  return h;
}

std::string SupervisorPath() {
  return privhelper::ProgramPath("vm_supervisor", "native/microvm/supervisor/vm_supervisor");
}

absl::StatusOr<privhelper::Backend> MakeMicrovmBackend(const privhelper::Config& config,
                                                       const std::string& /*installation_id*/) {
  if (!config.microvm.has_value()) {
    return absl::InvalidArgumentError("provider \"microvm\" needs the microvm object");
  }
  const privhelper::MicrovmConfig c = *config.microvm;
  if (absl::Status made = MakeDirs(c.store_dir, 0755); !made.ok()) return made;
  Host host = ProbeHost(c);
  auto boot = std::make_shared<BootProbe>();
  auto provider = std::make_unique<MicrovmProvider>(c, host, boot);
  const std::string accel = provider->accel();
  const std::string cpu_cgroup = provider->cpu_cgroup();

  privhelper::Backend b;
  b.provider = std::move(provider);
  b.importer = std::make_unique<MicrovmImageStore>(c.store_dir + "/images");
  b.helper_flags = {"--microvm_store=" + c.store_dir};
  b.capabilities = (uint64_t{1} << CAP_CHOWN) | (uint64_t{1} << CAP_SETUID) |
                   (uint64_t{1} << CAP_SETGID);
  const std::string state_dir = config.state_dir;
  b.make_vm_actions = [c, accel, cpu_cgroup, state_dir,
                       boot](const privhelper::store::GenerationStore* held) {
    VmHostOptions o;
    o.config = c;
    o.state_dir = state_dir;
    o.supervisor = SupervisorPath();
    o.accel = accel;
    o.cpu_cgroup_parent = cpu_cgroup;
    o.host_cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    auto host = std::make_shared<VmHost>(
        std::move(o),
        [held](int64_t g) -> absl::StatusOr<std::vector<privhelper::store::PlannedArtifact>> {
          std::shared_ptr<const privhelper::store::HeldGeneration> h = held->Find(g);
          if (h == nullptr) return absl::NotFoundError("privhelper does not hold the generation");
          return h->artifacts;
        });
    {
      absl::MutexLock lock(&boot->mu);
      boot->run = [host, held]() -> absl::Status {
        int64_t newest = 0;
        for (const privhelper::store::GenerationStatus& st : held->Statuses()) {
          if (st.generation > newest && held->Find(st.generation) != nullptr) {
            newest = st.generation;
          }
        }
        if (newest == 0) return absl::NotFoundError("no generation is held");
        return host->ProbeBoot(newest);
      };
    }
    return privhelper::VmActions(
        [host](const privhelper::v1::ExecuteRequest& req, const privhelper::ResolvedCall& r,
               const privhelper::v1::VmRequest& vm) { return host->Act(req, r, vm); });
  };
  b.retirement = RetirementHooksFor(c.store_dir);
  b.recover = [dir = c.store_dir]() -> absl::Status {
    if (absl::Status s = RemoveTemporaryFiles(dir + "/images"); !s.ok()) return s;
    return RemoveTemporaryFiles(dir + "/files");
  };
  return b;
}

}  // namespace sn::microvm
