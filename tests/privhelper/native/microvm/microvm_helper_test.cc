// The microVM provider below the agent, every piece real: privhelper's HelperManager starts the
// real native helper (provider "microvm", under its seccomp filters and Landlock) through the
// real sandboxed spawn; the helper asks privhelper's VM host (vm_host.h, run here as privhelper
// runs it) to boot and remove VMs by VmRequest; qemu (TCG) boots the repository's kernel and
// guest agent over a busybox image held in the store. The operations as Core would send them:
// create and its idempotent repeat, exec, write_file / read_file, kill_compute keeping the
// state, inspect, resume, delete_retained refused while running, kill, and not_found / absent
// only from the complete inventory. Needs root (qemu runs as uid 65534) and qemu; skips loudly
// without them unless CI=true.
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/error_cause.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "privhelper/capabilities.h"
#include "privhelper/helpers/helper_manager.h"
#include "privhelper/microvm/backend.h"
#include "privhelper/microvm/image_store.h"
#include "privhelper/microvm/vm_host.h"
#include "privhelper/native/microvm/vm_cgroup.h"
#include "privhelper/native/microvm/vm_process.h"
#include "tests/privhelper/native/microvm/guest_fixture.h"
#include "tests/privhelper/test_util.h"

namespace sn::microvm {
namespace {

namespace pb = ::sn::privhelper::v1;

constexpr char kInstallation[] = "0000aaaa-0000-4000-8000-00000000000f";
constexpr char kSandbox[] = "0b7e1c52-6a7d-4d3e-9b0a-3f1d2c4e5a61";
constexpr char kOther[] = "0b7e1c52-6a7d-4d3e-9b0a-3f1d2c4e5a62";
constexpr int64_t kGeneration = 4;

std::string Runfile(const std::string& rel) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/sandbox_node/", rel);
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int request_counter = 0;

pb::ExecuteRequest Request() {
  pb::ExecuteRequest r;
  r.set_request_id(absl::StrFormat("0000cccc-0000-4000-8000-%012d", ++request_counter));
  r.set_installation_id(kInstallation);
  r.set_generation(kGeneration);
  r.set_budget_ms(180000);
  return r;
}

class MicrovmHelperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SN_REQUIRE_ROOT();  // the helper's spawn and qemu's uid drop
    if (std::string why = testing::MissingTool(); !why.empty()) GTEST_SKIP() << why;
    if (HasFailure()) return;
    // As privhelper runs with provider "microvm": every capability dropped, the bounding set
    // included, but CAP_SETPCAP (the helper's spawn) and the backend's CAP_CHOWN, CAP_SETUID,
    // CAP_SETGID — so nothing here leans on CAP_DAC_OVERRIDE or a full set regained by exec.
    // Once, while the test process has one thread.
    // The VMs' cgroup parent is made first, as privhelper's start makes it (ProbeHost) before
    // it drops capabilities: on a fresh boot nothing has made it yet, and making it in a
    // cgroup v1 hierarchy's root (0555) needs CAP_DAC_OVERRIDE. (Made after the drop, the
    // test failed whenever it ran before any other test had made it: EACCES.)
    static const absl::StatusOr<std::string> cgroup_parent =
        []() -> absl::StatusOr<std::string> {
      absl::StatusOr<CpuHierarchy> cpu = FindCpuHierarchy();
      if (!cpu.ok()) return cpu.status();
      return MakeVmCgroupParent(*cpu);
    }();
    static const absl::Status dropped = privhelper::DropCapabilitiesAfterStartup(
        (uint64_t{1} << CAP_CHOWN) | (uint64_t{1} << CAP_SETUID) | (uint64_t{1} << CAP_SETGID));
    ASSERT_TRUE(dropped.ok()) << dropped;
    // Under /tmp: a VM's socket path has at most 107 bytes.
    char tmpl[] = "/tmp/sn-mvh-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    ASSERT_EQ(chmod(tmp_.c_str(), 0755), 0);
    store_ = tmp_ + "/store";
    ASSERT_EQ(mkdir(store_.c_str(), 0755), 0);
    // The generation's boot artifacts in a release store of privhelper's (root, 0700).
    state_ = tmp_ + "/state";
    const std::string& state = state_;
    ASSERT_TRUE(std::filesystem::create_directories(state + "/releases/r1"));
    ASSERT_EQ(chmod(state.c_str(), 0700), 0);
    for (const auto& [kind, from] : {std::pair<std::string, std::string>{"kernel", testing::KernelPath()},
                                     {"firmware", testing::kFirmware},
                                     {"guest_agent", testing::InitramfsPath()},
                                     {"seccomp", testing::SeccompPolicyPath()}}) {
      const std::string rel = "releases/r1/" + kind;
      ASSERT_TRUE(std::filesystem::copy_file(from, state + "/" + rel));
      ASSERT_EQ(chmod((state + "/" + rel).c_str(), 0400), 0);
      privhelper::store::PlannedArtifact a;
      a.name = kind;
      a.kind = kind;
      a.sha256 = Sha256Hex(ReadBytes(state + "/" + rel));
      a.path = rel;
      artifacts_.push_back(a);
    }
    // The image, loaded into the store as a preparation would.
    ASSERT_TRUE(testing::MakeBusyboxImage(tmp_, tmp_ + "/image.ext4"));
    const std::string bytes = ReadBytes(tmp_ + "/image.ext4");
    MicrovmImageStore images(store_ + "/images");
    size_t at = 0;
    ASSERT_TRUE(images
                    .Load([&](char* buf, size_t n) -> absl::StatusOr<size_t> {
                      const size_t k = std::min(n, bytes.size() - at);
                      std::memcpy(buf, bytes.data() + at, k);
                      at += k;
                      return k;
                    },
                    bytes.size())
                    .ok());
    // The release's image artifact (the store holds its bytes; its sha256 is its identity).
    privhelper::store::PlannedArtifact image_artifact;
    image_artifact.name = "image.ext4";
    image_artifact.kind = "image";
    image_artifact.sha256 = Sha256Hex(bytes);
    image_artifact.path = "releases/r1/image.ext4";
    artifacts_.push_back(image_artifact);
    absl::StatusOr<std::string> image = images.Resolve("sha256:" + Sha256Hex(bytes));  // identity
    ASSERT_TRUE(image.ok()) << image.status();
    resolved_.native_image = *image;
    resolved_.max_active = 2;
    resolved_.max_retained = 2;

    VmHostOptions ho;
    ho.config.store_dir = store_;
    ho.config.vm_uid = 65534;
    ho.config.vm_gid = 65534;
    ho.config.free_space_floor_bytes = 0;
    ho.state_dir = state;
    ho.supervisor = Runfile("privhelper/native/microvm/supervisor/vm_supervisor");
    ho.accel = "tcg";
    ho.host_cpus = 1;
    ASSERT_TRUE(cgroup_parent.ok()) << cgroup_parent.status();
    ho.cpu_cgroup_parent = *cgroup_parent;
    host_options_ = ho;
    MakeHost();
    privhelper::HelperOptions o;
    o.helper_path = Runfile("privhelper/native/native_helper");
    o.provider = "microvm";
    o.provider_flags = {"--microvm_store=" + store_};
    o.installation_id = kInstallation;
    o.idle_reaper_thread = false;
    o.vm_actions = [this](const pb::ExecuteRequest& req, const privhelper::ResolvedCall& r,
                          const pb::VmRequest& vm) {
      ++vm_actions_;
      return host_->Act(req, r, vm);
    };
    helpers_ = std::make_unique<privhelper::HelperManager>(o);
  }

  void TearDown() override {
    helpers_.reset();
    if (!store_.empty()) {
      VmStoreOptions o;
      o.root = store_;
      VmStore store(o);
      for (const char* id : {kSandbox, kOther}) (void)store.Remove(id, absl::Now() + absl::Seconds(30));
    }
    if (!tmp_.empty()) std::filesystem::remove_all(tmp_);
  }

  // privhelper's VM host from host_options_ (again, when a test changes them).
  void MakeHost() {
    host_ = std::make_unique<VmHost>(
        host_options_,
        [this](int64_t g) -> absl::StatusOr<std::vector<privhelper::store::PlannedArtifact>> {
          if (g != kGeneration) return absl::NotFoundError("not held");
          return artifacts_;
        });
  }

  pb::ExecuteResponse Run(const pb::ExecuteRequest& r) {
    absl::StatusOr<pb::ExecuteResponse> out = helpers_->Execute(r, resolved_, [] { return false; });
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : pb::ExecuteResponse();
  }

  pb::ExecuteRequest Create(const std::string& id, const std::string& command) {
    pb::ExecuteRequest r = Request();
    pb::CreateArgs* c = r.mutable_create();
    c->set_sandbox_id(id);
    c->set_image("base");
    c->add_command("sh");
    c->add_command("-c");
    c->add_command(command);
    (*c->mutable_env())["GREETING"] = "hello";
    c->set_cpu_millis(1000);
    c->set_memory_bytes(int64_t{64} << 20);
    return r;
  }

  pb::ExecuteResponse Exec(const std::string& id, std::vector<std::string> argv,
                           const std::string& stdin_bytes = "") {
    pb::ExecuteRequest r = Request();
    r.mutable_exec()->set_sandbox_id(id);
    for (const std::string& a : argv) r.mutable_exec()->add_argv(a);
    r.mutable_exec()->set_stdin(stdin_bytes);
    r.mutable_exec()->set_output_limit_bytes(4096);
    return Run(r);
  }

  pb::ExecuteResponse OnSandbox(const std::string& id, const std::string& op) {
    pb::ExecuteRequest r = Request();
    pb::SandboxArgs* a = op == "kill"          ? r.mutable_kill()
                         : op == "kill_compute" ? r.mutable_kill_compute()
                         : op == "delete_retained" ? r.mutable_delete_retained()
                                                   : r.mutable_inspect();
    a->set_sandbox_id(id);
    return Run(r);
  }

  pb::ExecuteResponse Resume(const std::string& id) {
    pb::ExecuteRequest r = Request();
    r.mutable_resume()->set_sandbox_id(id);
    return Run(r);
  }

  // Replaces the generation's `kind` artifact by `bytes` stored under `name`.
  void ReplaceArtifact(const std::string& kind, const std::string& name, const std::string& bytes) {
    const std::string path = state_ + "/releases/r1/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    ASSERT_EQ(chmod(path.c_str(), 0400), 0);
    for (privhelper::store::PlannedArtifact& a : artifacts_) {
      if (a.kind != kind) continue;
      a.path = "releases/r1/" + name;
      a.sha256 = Sha256Hex(bytes);
    }
  }

  // Nothing of a VM was made: no VM directory, no probe VM, no qemu of this store.
  void ExpectNoVm() {
    EXPECT_FALSE(std::filesystem::exists(store_ + "/vms/" + kSandbox));
    EXPECT_TRUE(!std::filesystem::exists(store_ + "/probe/vms") ||
                std::filesystem::is_empty(store_ + "/probe/vms"));
    EXPECT_EQ(OnSandbox(kSandbox, "inspect").sandbox().state(), pb::SANDBOX_STATE_ABSENT);
  }

  std::string tmp_, store_, state_;
  VmHostOptions host_options_;
  std::vector<privhelper::store::PlannedArtifact> artifacts_;
  privhelper::ResolvedCall resolved_;
  std::unique_ptr<VmHost> host_;
  std::unique_ptr<privhelper::HelperManager> helpers_;
  std::atomic<int> vm_actions_{0};
};

// The usability probe boots a throwaway guest of the generation to its agent's handshake and
// leaves nothing: no VM in the inventory, none in the probe's own directory, no qemu.
TEST_F(MicrovmHelperTest, TheUsabilityProbeBootsAGuestAndLeavesNothing) {
  const absl::Time start = absl::Now();
  const absl::Status probed = host_->ProbeBoot(kGeneration);
  ASSERT_TRUE(probed.ok()) << probed;
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));
  EXPECT_TRUE(std::filesystem::is_empty(store_ + "/probe/vms"));
  EXPECT_FALSE(std::filesystem::exists(store_ + "/vms"));
  EXPECT_FALSE(host_->ProbeBoot(kGeneration + 1).ok());  // a generation privhelper does not hold
}

TEST_F(MicrovmHelperTest, EveryOperationThroughTheHelperAndPrivhelpersVmHost) {
  // Absent from the complete (empty) inventory.
  pb::ExecuteResponse inspect = OnSandbox(kSandbox, "inspect");
  EXPECT_EQ(inspect.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(inspect.sandbox().state(), pb::SANDBOX_STATE_ABSENT);
  EXPECT_EQ(OnSandbox(kSandbox, "kill").error_code(), pb::ERROR_CODE_NOT_FOUND);

  // create boots the VM (privhelper) and starts the main process (the helper).
  const pb::ExecuteRequest create = Create(kSandbox, "echo \"$GREETING\" > /root/mark; exec sleep 100000");
  pb::ExecuteResponse created = Run(create);
  ASSERT_EQ(created.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(created.sandbox().state(), pb::SANDBOX_STATE_RUNNING);
  EXPECT_EQ(created.sandbox().native_id(), absl::StrCat("vm-", kSandbox));
  EXPECT_EQ(vm_actions_.load(), 1);
  // qemu's private memory is bounded: 64 MiB of guest RAM + 256 MiB + 16 MiB for its vCPU
  // + 4 I/O threads' 8 MiB stacks + 64 coroutine stacks of 1 MiB.
  absl::StatusOr<SupervisorRecord> record = DecodeSupervisorRecord(
      ReadBytes(absl::StrCat(store_, "/vms/", kSandbox, "/supervisor.json")));
  ASSERT_TRUE(record.ok()) << record.status();
  const std::string limits = ReadBytes(absl::StrCat("/proc/", record->qemu_pid, "/limits"));
  EXPECT_NE(limits.find(absl::StrCat("Max data size             ", (64 + 256 + 16 + 32 + 64) << 20)),
            std::string::npos)
      << limits;
  // ... and its CPU by the quota of its own cgroup (vm_cgroup.h).
  const std::string cgroup = ReadBytes(absl::StrCat("/proc/", record->qemu_pid, "/cgroup"));
  EXPECT_NE(cgroup.find(absl::StrCat("/sandbox-node-vms/", kSandbox, "\n")), std::string::npos)
      << cgroup;
  // The same create again: the existing sandbox, nothing booted; other arguments: conflict.
  pb::ExecuteRequest again = create;
  again.set_request_id("0000cccc-0000-4000-8000-0000000000ff");
  EXPECT_EQ(Run(again).sandbox().state(), pb::SANDBOX_STATE_RUNNING);
  pb::ExecuteRequest different = Create(kSandbox, "exec sleep 1");
  EXPECT_EQ(Run(different).error_code(), pb::ERROR_CODE_CONFLICT);
  EXPECT_EQ(vm_actions_.load(), 1);

  // exec in the guest: the main process ran with its env (it runs concurrently with this exec:
  // the guest waits for its mark); stdin reaches the command.
  pb::ExecuteResponse mark =
      Exec(kSandbox, {"sh", "-c", "while [ ! -s /root/mark ]; do sleep 0.05; done; cat /root/mark"});
  ASSERT_EQ(mark.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(mark.exec().stdout(), "hello\n");
  EXPECT_EQ(Exec(kSandbox, {"cat"}, "through stdin").exec().stdout(), "through stdin");
  EXPECT_EQ(Exec(kSandbox, {"sh", "-c", "exit 7"}).exec().exit_code(), 7);

  // Files, in the sandbox's root.
  pb::ExecuteRequest w = Request();
  w.mutable_write_file()->set_sandbox_id(kSandbox);
  w.mutable_write_file()->set_path("/root/note");
  w.mutable_write_file()->set_content("kept across kill_compute");
  w.mutable_write_file()->set_mode(0644);
  ASSERT_EQ(Run(w).error_code(), pb::ERROR_CODE_NONE);
  pb::ExecuteRequest rd = Request();
  rd.mutable_read_file()->set_sandbox_id(kSandbox);
  rd.mutable_read_file()->set_path("/root/note");
  rd.mutable_read_file()->set_max_bytes(1024);
  pb::ExecuteResponse read = Run(rd);
  ASSERT_EQ(read.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(read.read_file().content(), "kept across kill_compute");

  // A running VM is not deleted as retained.
  EXPECT_EQ(OnSandbox(kSandbox, "delete_retained").error_code(), pb::ERROR_CODE_CONFLICT);

  // Collection of the generation is held while any VM of it exists, running or retained.
  const privhelper::RetirementHooks retirement = RetirementHooksFor(store_);
  EXPECT_TRUE(absl::IsUnavailable(retirement.in_use(kGeneration)));
  EXPECT_TRUE(retirement.in_use(kGeneration + 1).ok());

  // kill_compute keeps the overlay; the sandbox is retained; resume boots it with its state.
  ASSERT_EQ(OnSandbox(kSandbox, "kill_compute").error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(OnSandbox(kSandbox, "inspect").sandbox().state(), pb::SANDBOX_STATE_RETAINED);
  EXPECT_EQ(Exec(kSandbox, {"true"}).error_code(), pb::ERROR_CODE_CONFLICT);
  EXPECT_TRUE(absl::IsUnavailable(retirement.in_use(kGeneration)));
  // The staged boot files, removed as another generation's collection sharing them would: the
  // resume stages them again from this generation's release.
  for (const auto& a : artifacts_) {
    if (a.kind == "image") continue;  // images are the image store's
    EXPECT_TRUE(std::filesystem::exists(store_ + "/files/sha256-" + a.sha256)) << a.kind;
  }
  ASSERT_TRUE(retirement.forget_files(artifacts_).ok());
  EXPECT_TRUE(std::filesystem::is_empty(store_ + "/files"));
  pb::ExecuteResponse resumed = Resume(kSandbox);
  ASSERT_EQ(resumed.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(resumed.sandbox().state(), pb::SANDBOX_STATE_RUNNING);
  EXPECT_EQ(vm_actions_.load(), 2);
  EXPECT_EQ(Run(rd).read_file().content(), "kept across kill_compute");

  // privhelper acts only on a VM of the call's own generation, whatever a helper asks: a
  // remove or a resume's boot for a call of another generation is refused, nothing changes.
  pb::ExecuteRequest other = Request();
  other.set_generation(kGeneration + 1);
  other.mutable_kill()->set_sandbox_id(kSandbox);
  pb::VmRequest remove;
  remove.set_sandbox_id(kSandbox);
  remove.mutable_remove();
  EXPECT_TRUE(absl::IsFailedPrecondition(host_->Act(other, resolved_, remove)));
  other.mutable_resume()->set_sandbox_id(kSandbox);
  pb::VmRequest boot;
  boot.set_sandbox_id(kSandbox);
  boot.mutable_boot();
  EXPECT_TRUE(absl::IsFailedPrecondition(host_->Act(other, resolved_, boot)));
  EXPECT_EQ(OnSandbox(kSandbox, "inspect").sandbox().state(), pb::SANDBOX_STATE_RUNNING);

  // kill removes it (privhelper removes the stopped VM's directory); then not_found / absent.
  ASSERT_EQ(OnSandbox(kSandbox, "kill").error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(vm_actions_.load(), 3);
  EXPECT_FALSE(std::filesystem::exists(store_ + "/vms/" + kSandbox));
  EXPECT_EQ(OnSandbox(kSandbox, "inspect").sandbox().state(), pb::SANDBOX_STATE_ABSENT);
  EXPECT_EQ(Exec(kSandbox, {"true"}).error_code(), pb::ERROR_CODE_NOT_FOUND);
  EXPECT_TRUE(retirement.in_use(kGeneration).ok());
}

// A guest that never starts its agent (here: a guest agent artifact that is no initramfs, so the
// kernel finds no init and the VM ends): the create fails at once with its receipt, not at the
// budget; the VM is stopped and retained (a resume is the retry, and fails the same way); kill
// removes it. Nothing keeps running.
TEST_F(MicrovmHelperTest, AGuestThatNeverStartsFailsItsCreateAndIsStoppedNotLeftRunning) {
  ReplaceArtifact("guest_agent", "broken-agent", std::string(1 << 16, '\x5a'));
  // The usability probe fails the same way (readiness is withheld).
  EXPECT_FALSE(host_->ProbeBoot(kGeneration).ok());
  EXPECT_TRUE(std::filesystem::is_empty(store_ + "/probe/vms"));
  const absl::Time start = absl::Now();
  pb::ExecuteResponse created = Run(Create(kSandbox, "exec sleep 100000"));
  EXPECT_EQ(created.error_code(), pb::ERROR_CODE_FAILED);
  EXPECT_EQ(created.create_settled().native_id(), absl::StrCat("vm-", kSandbox));
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));  // the VM's end, not the budget (180 s)
  EXPECT_EQ(OnSandbox(kSandbox, "inspect").sandbox().state(), pb::SANDBOX_STATE_RETAINED);
  EXPECT_NE(Resume(kSandbox).error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(OnSandbox(kSandbox, "inspect").sandbox().state(), pb::SANDBOX_STATE_RETAINED);
  ASSERT_EQ(OnSandbox(kSandbox, "kill").error_code(), pb::ERROR_CODE_NONE);
  EXPECT_FALSE(std::filesystem::exists(store_ + "/vms/" + kSandbox));
}

// Missing seccomp bytes leave an unready placeholder: a generation whose release has no
// `seccomp` artifact, or whose stored policy is gone, boots nothing. The usability probe fails
// with runtime_missing (the provider's readiness diagnostic), a create is refused `unavailable`
// (nothing was started), and no VM directory, probe VM or qemu is left.
TEST_F(MicrovmHelperTest, WithoutItsSeccompPolicyAGenerationBootsNothingAndIsRuntimeMissing) {
  std::vector<privhelper::store::PlannedArtifact> with_policy = artifacts_;
  std::erase_if(artifacts_, [](const auto& a) { return a.kind == "seccomp"; });
  const absl::Status probed = host_->ProbeBoot(kGeneration);
  EXPECT_TRUE(absl::IsUnavailable(probed)) << probed;
  ASSERT_TRUE(CauseOf(probed).has_value()) << probed;
  EXPECT_EQ(CauseOf(probed)->code, Diagnostic::kRuntimeMissing);
  EXPECT_NE(probed.message().find("has no seccomp artifact"), std::string::npos) << probed;
  EXPECT_EQ(Run(Create(kSandbox, "exec sleep 100000")).error_code(), pb::ERROR_CODE_UNAVAILABLE);
  EXPECT_EQ(vm_actions_.load(), 1);  // asked, and refused before anything was made
  ExpectNoVm();

  // Declared but its stored bytes gone (and never staged): the same, until a repair stores it.
  artifacts_ = with_policy;
  ASSERT_EQ(unlink((state_ + "/releases/r1/seccomp").c_str()), 0);
  const absl::Status gone = host_->ProbeBoot(kGeneration);
  ASSERT_TRUE(CauseOf(gone).has_value()) << gone;
  EXPECT_EQ(CauseOf(gone)->code, Diagnostic::kRuntimeMissing);
  EXPECT_EQ(Run(Create(kSandbox, "exec sleep 100000")).error_code(), pb::ERROR_CODE_UNAVAILABLE);
  ExpectNoVm();
  ASSERT_TRUE(std::filesystem::copy_file(testing::SeccompPolicyPath(),
                                         state_ + "/releases/r1/seccomp"));
  const absl::Status repaired = host_->ProbeBoot(kGeneration);
  EXPECT_TRUE(repaired.ok()) << repaired;
}

// No cgroup to give a VM its CPU quota in (privhelper's start found no cpu controller): no VM
// boots, the create is refused before anything is written, with provider_unavailable.
TEST_F(MicrovmHelperTest, WithoutACpuCgroupNoVmBoots) {
  VmHostOptions without = host_options_;
  without.cpu_cgroup_parent = "";
  host_ = std::make_unique<VmHost>(
      without, [this](int64_t) -> absl::StatusOr<std::vector<privhelper::store::PlannedArtifact>> {
        return artifacts_;
      });
  const pb::ExecuteResponse refused = Run(Create(kSandbox, "exec sleep 100000"));
  EXPECT_EQ(refused.error_code(), pb::ERROR_CODE_UNAVAILABLE);
  EXPECT_EQ(vm_actions_.load(), 1);
  ExpectNoVm();
}

// A policy that does not parse is refused by privhelper when it stages it, before any VM
// process or record: the probe says configuration_invalid, a create fails and leaves nothing.
TEST_F(MicrovmHelperTest, ABadSeccompPolicyIsRefusedBeforeAnyVmProcessStarts) {
  ReplaceArtifact("seccomp", "no-execve.json",
                  "{\"format\":\"sandbox-node-qemu-seccomp/1\",\"allow\":[\"read\"]}");
  const absl::Status probed = host_->ProbeBoot(kGeneration);
  ASSERT_TRUE(CauseOf(probed).has_value()) << probed;
  EXPECT_EQ(CauseOf(probed)->code, Diagnostic::kConfigurationInvalid);
  EXPECT_NE(probed.message().find("must name execve"), std::string::npos) << probed;
  EXPECT_EQ(Run(Create(kSandbox, "exec sleep 100000")).error_code(), pb::ERROR_CODE_FAILED);
  ExpectNoVm();
}

// The capacity bound counts the store's running VMs with the other calls in flight.
TEST_F(MicrovmHelperTest, CreateBeyondMaxActiveIsRefusedBeforeAnyBoot) {
  resolved_.max_active = 1;
  ASSERT_EQ(Run(Create(kSandbox, "exec sleep 100000")).error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(Run(Create(kOther, "exec sleep 100000")).error_code(), pb::ERROR_CODE_CAPACITY);
  EXPECT_EQ(vm_actions_.load(), 1);
  EXPECT_FALSE(std::filesystem::exists(store_ + "/vms/" + kOther));
}

// The free-space floor reserves what every overlay can still grow to: with room above the
// floor for one disk and a half, the first create boots and the second is refused capacity
// before anything of it is made (the first VM's guest could fill its disk); once the first is
// killed, its reservation is gone and the second boots.
TEST_F(MicrovmHelperTest, TheFreeSpaceFloorReservesEveryOverlaysGrowth) {
  // 1 GiB disks (sparse: they cost nothing here) leave half a ceiling, 512 MiB, of margin on
  // either side of the floor, far more than other tests write to or remove from /tmp while
  // this one boots.
  host_options_.config.disk_bytes = int64_t{1} << 30;
  const int64_t ceiling = OverlayCeilingBytes(host_options_.config.disk_bytes);
  struct statvfs fs;
  ASSERT_EQ(statvfs(store_.c_str(), &fs), 0);
  const int64_t free_bytes = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  ASSERT_GT(free_bytes, 3 * ceiling) << "the test needs " << 3 * ceiling << " bytes free in /tmp";
  host_options_.config.free_space_floor_bytes = free_bytes - ceiling - ceiling / 2;
  MakeHost();
  ASSERT_EQ(Run(Create(kSandbox, "exec sleep 100000")).error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(Run(Create(kOther, "exec sleep 100000")).error_code(), pb::ERROR_CODE_CAPACITY);
  EXPECT_FALSE(std::filesystem::exists(store_ + "/vms/" + kOther));
  ASSERT_EQ(OnSandbox(kSandbox, "kill").error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(Run(Create(kOther, "exec sleep 100000")).error_code(), pb::ERROR_CODE_NONE);
}

}  // namespace
}  // namespace sn::microvm
