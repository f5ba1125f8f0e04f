// The VM store on real qemu (TCG): create boots the repository's kernel and guest agent with
// the image's disk and runs the main process, qemu held by the repository's seccomp policy (a
// call it does not allow kills qemu); kill_compute keeps the sandbox's state, resume boots
// from it, a second store object (a restarted helper) finds the running VM, remove leaves
// nothing; the inventory is complete or unknown, never partial. Needs root (qemu runs
// as uid 65534), qemu, mke2fs, qemu-img and busybox-static; skips loudly without them unless
// CI=true.
#include "privhelper/native/microvm/vm_store.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "privhelper/native/microvm/vm_cgroup.h"
#include "privhelper/native/microvm/vm_process.h"
#include "tests/privhelper/native/microvm/guest_fixture.h"

namespace sn::microvm {
namespace {

constexpr char kId[] = "0b7e1c52-6a7d-4d3e-9b0a-3f1d2c4e5a60";

class VmStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      const char* ci = std::getenv("CI");
      if (ci != nullptr && std::string(ci) == "true") FAIL() << "needs root (CI=true)";
      GTEST_SKIP() << "SKIPPED LOUDLY: qemu's uid drop needs root";
    }
    if (std::string why = testing::MissingTool(); !why.empty()) GTEST_SKIP() << why;
    if (HasFailure()) return;
    // Under /tmp, not TEST_TMPDIR: the VM's socket path has at most 107 bytes.
    char tmpl[] = "/tmp/sn-vms-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    const std::string tmp = tmp_;
    chmod(tmp.c_str(), 0755);
    ASSERT_TRUE(testing::MakeBusyboxImage(tmp, tmp + "/image.ext4"));
    options_.root = tmp + "/store";
    ASSERT_EQ(mkdir(options_.root.c_str(), 0755), 0);
    options_.vm_uid = 65534;
    options_.vm_gid = 65534;
    options_.supervisor = std::string(std::getenv("TEST_SRCDIR")) +
                          "/sandbox_node/privhelper/native/microvm/supervisor/vm_supervisor";
    options_.host_cpus = 1;
    options_.boot_deadline = absl::Seconds(120);
    // Each VM in its cgroup with its CPU quota, as privhelper starts them.
    absl::StatusOr<CpuHierarchy> cpu = FindCpuHierarchy();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cgroup_version_ = cpu->version;
    absl::StatusOr<std::string> parent = MakeVmCgroupParent(*cpu);
    ASSERT_TRUE(parent.ok()) << parent.status();
    options_.cpu_cgroup_parent = *parent;
    options_.cgroup_leaf_prefix = absl::StrCat("vm-store-test-", getpid(), "-");
    leaf_ = absl::StrCat(*parent, "/", options_.cgroup_leaf_prefix, kId);
    def_.sandbox_id = kId;
    def_.generation = 3;
    def_.args_digest = "sha256:00";
    def_.image = tmp + "/image.ext4";
    // qemu runs as uid 65534: it must reach every file it opens. Bazel's runfiles may sit
    // under a directory it cannot traverse (/root/.cache/bazel), so the test holds copies,
    // as a host's store does (readable by the VM's uid, owned by root).
    def_.kernel = tmp + "/vmlinux";
    def_.initramfs = tmp + "/initramfs.cpio";
    ASSERT_TRUE(std::filesystem::copy_file(testing::KernelPath(), def_.kernel));
    ASSERT_TRUE(std::filesystem::copy_file(testing::InitramfsPath(), def_.initramfs));
    def_.seccomp = tmp + "/qemu-seccomp.json";  // the supervisor reads it as root
    ASSERT_TRUE(std::filesystem::copy_file(testing::SeccompPolicyPath(), def_.seccomp));
    def_.firmware = testing::kFirmware;
    def_.cpu_millis = 500;
    def_.memory_bytes = 16 << 20;  // below the kernel's minimum: raised to 64 MiB
    def_.command = {"sh", "-c", "echo started > /root/mark; exec sleep 100000"};
  }

  void TearDown() override {
    if (!options_.root.empty()) {
      VmStore store(options_);
      (void)store.Remove(kId, absl::Now() + absl::Seconds(30));
    }
    if (!tmp_.empty()) std::filesystem::remove_all(tmp_);
    if (!leaf_.empty()) rmdir(leaf_.c_str());
  }

  // The running VM's supervisor record (its qemu's pid).
  SupervisorRecord Running() {
    absl::StatusOr<std::optional<LiveVm>> vm = FindLiveVm(options_.root + "/vms/" + kId);
    EXPECT_TRUE(vm.ok() && vm->has_value()) << "no live VM";
    return vm.ok() && vm->has_value() ? (*vm)->record() : SupervisorRecord{};
  }

  std::string Exec(VmStore& store, std::vector<std::string> argv) {
    absl::StatusOr<std::unique_ptr<GuestChannel>> c =
        store.Connect(kId, absl::Now() + absl::Seconds(60));
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return "";
    guest::v1::ToGuest r;
    for (const std::string& a : argv) r.mutable_exec()->add_argv(a);
    r.mutable_exec()->set_output_limit_bytes(4096);
    r.mutable_exec()->set_timeout_ms(30000);
    absl::StatusOr<guest::v1::FromGuest> a = (*c)->Call(r, absl::Now() + absl::Seconds(60));
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? a->exec().stdout() : "";
  }

  VmState StateOf(VmStore& store) {
    absl::StatusOr<VmEntry> e = store.Find(kId);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? e->state : VmState::kRetained;
  }

  std::string tmp_;
  std::string leaf_;
  int cgroup_version_ = 0;
  VmStoreOptions options_;
  VmDefinition def_;
};

TEST_F(VmStoreTest, TheSandboxsStateOutlivesKillComputeAndResume) {
  VmStore store(options_);
  const absl::Time start = absl::Now();
  const absl::Status created = store.Create(def_);
  ASSERT_TRUE(created.ok()) << created;
  std::printf("create to running main process: %.0f ms\n",
              absl::ToDoubleMilliseconds(absl::Now() - start));
  EXPECT_EQ(StateOf(store), VmState::kRunning);
  // Start answers once the main process is forked; its first line may still be running, and
  // `echo started > /root/mark` creates the file before it writes it: wait for its bytes (-s),
  // not for the name (-e: a cold CI run read it empty once, 2026-12-07).
  EXPECT_EQ(Exec(store, {"sh", "-c", "until [ -s /root/mark ]; do sleep 0.05; done; cat /root/mark"}),
            "started\n");
  EXPECT_EQ(Exec(store, {"cat", "/proc/meminfo"}).substr(0, 9), "MemTotal:");
  Exec(store, {"sh", "-c", "echo kept > /root/state"});
  // The guest discards freed blocks (the drive's discard=unmap): qemu punches holes in the
  // overlay (fallocate), which the policy allows; the VM still answers.
  EXPECT_EQ(Exec(store, {"sh", "-c",
                         "dd if=/dev/zero of=/root/big bs=1M count=8 2>/dev/null; sync; "
                         "busybox rm /root/big; sync; busybox fstrim / >/dev/null && echo trimmed"}),
            "trimmed\n");

  EXPECT_TRUE(absl::IsAlreadyExists(store.Create(def_)));

  // A restarted helper: a new store object over the same directory finds the running VM.
  VmStore again(options_);
  EXPECT_EQ(StateOf(again), VmState::kRunning);

  ASSERT_TRUE(again.Stop(kId, absl::Now() + absl::Seconds(60)).ok());
  EXPECT_EQ(StateOf(again), VmState::kRetained);
  ASSERT_TRUE(again.Resume(kId).ok());
  EXPECT_EQ(StateOf(again), VmState::kRunning);
  EXPECT_EQ(Exec(again, {"cat", "/root/state"}), "kept\n");

  ASSERT_TRUE(again.Remove(kId, absl::Now() + absl::Seconds(60)).ok());
  EXPECT_TRUE(absl::IsNotFound(again.Find(kId).status()));
  struct stat st;
  EXPECT_NE(stat((options_.root + "/vms/" + kId).c_str(), &st), 0);
  EXPECT_NE(stat(leaf_.c_str(), &st), 0) << "the VM's cgroup outlived it";
}

// The guest's disk is disk_bytes, not its image's size: the overlay's virtual size, to which
// the guest agent grows the image's ext4 at boot, so the sandbox writes more than the 64 MiB
// image holds. What the overlay may still take (the free-space floor's reservation,
// OverlayGrowthBytes) shrinks by what it took.
TEST_F(VmStoreTest, TheGuestsDiskIsDiskBytesAndItsFilesystemGrowsToIt) {
  options_.disk_bytes = int64_t{256} << 20;
  VmStore store(options_);
  ASSERT_TRUE(store.Create(def_).ok());
  absl::StatusOr<int64_t> before = store.OverlayGrowthBytes();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_LE(*before, OverlayCeilingBytes(options_.disk_bytes));
  EXPECT_GT(*before, int64_t{200} << 20);
  EXPECT_EQ(Exec(store, {"sh", "-c",
                         "dd if=/dev/zero of=/root/big bs=1M count=96 2>/dev/null && sync && "
                         "echo wrote"}),
            "wrote\n");
  absl::StatusOr<int64_t> after = store.OverlayGrowthBytes();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_LE(*after, *before - (int64_t{90} << 20));
  // Resumed, the filesystem keeps its size and its bytes.
  ASSERT_TRUE(store.Stop(kId, absl::Now() + absl::Seconds(60)).ok());
  ASSERT_TRUE(store.Resume(kId).ok());
  EXPECT_EQ(Exec(store, {"sh", "-c", "wc -c < /root/big"}), "100663296\n");
}

// An image larger than the disk is refused before anything of the VM is written.
TEST_F(VmStoreTest, AnImageLargerThanTheDiskIsRefusedBeforeAnythingIsWritten) {
  options_.disk_bytes = int64_t{32} << 20;  // the image is 64 MiB
  VmStore store(options_);
  const absl::Status created = store.Create(def_);
  EXPECT_TRUE(absl::IsFailedPrecondition(created)) << created;
  struct stat st;
  EXPECT_NE(stat((options_.root + "/vms/" + kId).c_str(), &st), 0);
  EXPECT_TRUE(absl::IsNotFound(store.Find(kId).status()));
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// CPU time (user + system, all threads) of a process, from /proc/<pid>/stat.
absl::Duration CpuTimeOf(pid_t pid) {
  const std::string stat = ReadText(absl::StrCat("/proc/", pid, "/stat"));
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string f;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; fields >> f; ++i) {
    if (i == 14) utime = std::stoull(f);
    if (i == 15) {
      stime = std::stoull(f);
      break;
    }
  }
  return absl::Seconds(static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK));
}

// cpu_millis is a CPU quota, not only a vCPU count: qemu runs in the VM's own cgroup whose
// bandwidth is exactly cpu_millis, and a guest spinning on its one vCPU gets no more than that
// share of a host CPU (an upper bound: a loaded machine only lowers it). kill_compute removes the
// cgroup with the VM; resume makes it again.
TEST_F(VmStoreTest, QemuGetsExactlyItsCpuQuota) {
  def_.cpu_millis = 250;
  VmStore store(options_);
  ASSERT_TRUE(store.Create(def_).ok());
  const SupervisorRecord r = Running();
  const std::string name = options_.cgroup_leaf_prefix + kId;
  EXPECT_NE(ReadText(absl::StrCat("/proc/", r.qemu_pid, "/cgroup")).find(name), std::string::npos)
      << ReadText(absl::StrCat("/proc/", r.qemu_pid, "/cgroup"));
  EXPECT_EQ(ReadText(leaf_ + "/cgroup.procs"), absl::StrCat(r.qemu_pid, "\n"));
  if (cgroup_version_ == 2) {
    EXPECT_EQ(ReadText(leaf_ + "/cpu.max"), "25000 100000\n");
  } else {
    EXPECT_EQ(ReadText(leaf_ + "/cpu.cfs_quota_us"), "25000\n");
    EXPECT_EQ(ReadText(leaf_ + "/cpu.cfs_period_us"), "100000\n");
  }
  // The guest spins for 3 s of its own clock (which follows the host's).
  const absl::Duration cpu_before = CpuTimeOf(r.qemu_pid);
  const absl::Time start = absl::Now();
  EXPECT_EQ(Exec(store, {"sh", "-c",
                         "end=$(( $(date +%s) + 3 )); while [ $(date +%s) -lt $end ]; do :; done; "
                         "echo spun"}),
            "spun\n");
  const absl::Duration wall = absl::Now() - start;
  const absl::Duration used = CpuTimeOf(r.qemu_pid) - cpu_before;
  std::printf("quota 250 millis: qemu used %.2f s of CPU in %.2f s\n",
              absl::ToDoubleSeconds(used), absl::ToDoubleSeconds(wall));
  // 25% of the window, plus one period's worth and the clock ticks' rounding.
  EXPECT_LE(used, wall * 0.25 + absl::Milliseconds(250)) << "wall " << wall;

  ASSERT_TRUE(store.Stop(kId, absl::Now() + absl::Seconds(60)).ok());
  struct stat st;
  EXPECT_NE(stat(leaf_.c_str(), &st), 0) << "kill_compute left the VM's cgroup";
  ASSERT_TRUE(store.Resume(kId).ok());
  EXPECT_EQ(ReadText(leaf_ + "/cgroup.procs"), absl::StrCat(Running().qemu_pid, "\n"));
}

// A guest that ignores the power-off (hung, or hostile: here qemu is stopped outright) costs
// kill_compute the grace, not its deadline: the supervisor is killed, qemu with it, the
// overlay and the definition stay (retained), and the cgroup the killed supervisor could not
// remove goes with the VM.
TEST_F(VmStoreTest, AGuestThatIgnoresThePowerOffIsKilledAfterTheGrace) {
  options_.power_off_grace = absl::Seconds(2);
  VmStore store(options_);
  ASSERT_TRUE(store.Create(def_).ok());
  const SupervisorRecord r = Running();
  ASSERT_EQ(kill(r.qemu_pid, SIGSTOP), 0);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(store.Stop(kId, absl::Now() + absl::Seconds(120)).ok());
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Seconds(2));
  EXPECT_LT(took, absl::Seconds(60));
  EXPECT_EQ(StateOf(store), VmState::kRetained);
  struct stat st;
  EXPECT_EQ(stat((options_.root + "/vms/" + kId + "/run/disk.qcow2").c_str(), &st), 0);
  ASSERT_TRUE(store.RemoveStopped(kId).ok());
  EXPECT_NE(stat(leaf_.c_str(), &st), 0);
}

TEST_F(VmStoreTest, AVmThatCannotStartFailsWithItsConsoleNotAtTheDeadline) {
  // A kernel the VM's uid cannot read: qemu (uid 65534) exits at once. Create reports that the
  // VM does not run, with qemu's own words, instead of waiting out the boot deadline.
  ASSERT_EQ(chmod(def_.kernel.c_str(), 0600), 0);
  VmStore store(options_);
  const absl::Status created = store.Create(def_);
  EXPECT_TRUE(absl::IsUnavailable(created)) << created;
  EXPECT_NE(created.message().find("the VM is not running"), std::string::npos) << created;
  EXPECT_NE(created.message().find("vmlinux"), std::string::npos) << created;
  EXPECT_EQ(StateOf(store), VmState::kRetained);
}

// The release's policy holds qemu: the repository's policy without eventfd2, which qemu makes
// while it sets up its main loop, long before the guest runs. qemu dies of SIGSYS (the
// supervisor's last console line says so), the guest never answers, and the create fails with
// that line at once, not at the boot deadline.
TEST_F(VmStoreTest, QemuMakingACallItsPolicyDoesNotAllowIsKilledBySigsysAndNeverAnswers) {
  std::ifstream in(def_.seccomp);
  std::stringstream full;
  full << in.rdbuf();
  std::string policy = full.str();
  const size_t at = policy.find("\"eventfd2\", ");
  ASSERT_NE(at, std::string::npos) << policy;
  policy.erase(at, std::string("\"eventfd2\", ").size());
  def_.seccomp = tmp_ + "/without-eventfd2.json";
  std::ofstream(def_.seccomp) << policy;
  VmStore store(options_);
  const absl::Time start = absl::Now();
  const absl::Status created = store.Create(def_);
  EXPECT_TRUE(absl::IsUnavailable(created)) << created;
  EXPECT_NE(created.message().find("the VM is not running"), std::string::npos) << created;
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  std::ifstream log(options_.root + "/vms/" + kId + "/console.log");
  std::string line, last;
  while (std::getline(log, line)) {
    if (!line.empty()) last = line;
  }
  EXPECT_EQ(last, "[vm_supervisor: qemu killed by signal 31]");  // SIGSYS
  EXPECT_EQ(StateOf(store), VmState::kRetained);
}

TEST_F(VmStoreTest, AVmWithoutASeccompPolicyIsNeverStarted) {
  def_.seccomp = "";
  VmStore store(options_);
  const absl::Status created = store.Create(def_);
  EXPECT_TRUE(absl::IsInvalidArgument(created)) << created;
  EXPECT_FALSE(std::filesystem::exists(options_.root + "/vms/" + kId + "/console.log"));
  EXPECT_EQ(StateOf(store), VmState::kRetained);
}

TEST_F(VmStoreTest, AnythingUnknownInTheStoreMakesTheInventoryUnknownNotSmaller) {
  VmStore store(options_);
  ASSERT_TRUE(store.Inventory().ok());
  const std::string vms = options_.root + "/vms";
  ASSERT_EQ(mkdir(vms.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((vms + "/" + kId).c_str(), 0755), 0);
  // A VM directory without its definition (a create interrupted before it): unknown.
  EXPECT_TRUE(absl::IsUnavailable(store.Inventory().status()));
  EXPECT_TRUE(absl::IsUnavailable(store.Find(kId).status()));
  std::ofstream(vms + "/" + kId + "/vm.json") << "{\"schema\":1,";
  EXPECT_TRUE(absl::IsUnavailable(store.Inventory().status()));
  unlink((vms + "/" + kId + "/vm.json").c_str());
  rmdir((vms + "/" + kId).c_str());
  ASSERT_EQ(mkdir((vms + "/not-a-sandbox").c_str(), 0755), 0);
  EXPECT_TRUE(absl::IsUnavailable(store.Inventory().status()));
}

// The overlays are the VM uid's files, which qemu can write: what the free-space floor reads
// of them is bounded. A header claiming more than 1 TiB counts as 1 TiB; a link is not followed
// and a FIFO never blocks the read: each counts as the configured disk. (No qemu needed.)
TEST(OverlayGrowthTest, AHostileOverlayIsReadBoundedNeverFollowedNeverWaitedOn) {
  const std::string root = ::testing::TempDir() + "/growth-" + std::to_string(getpid());
  const std::string vms = root + "/vms";
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_TRUE(std::filesystem::create_directories(vms + "/" + id + "/run"));
  }
  auto header = [](uint64_t size) {
    std::string h("QFI\xfb", 4);
    h.resize(24, '\0');
    for (int i = 7; i >= 0; --i) h.push_back(static_cast<char>((size >> (8 * i)) & 0xff));
    return h;
  };
  const std::string huge = vms + "/a/run/disk.qcow2";
  std::ofstream(huge, std::ios::binary) << header(uint64_t{1} << 50);
  std::ofstream(root + "/small.qcow2", std::ios::binary) << header(1);
  ASSERT_EQ(symlink((root + "/small.qcow2").c_str(), (vms + "/b/run/disk.qcow2").c_str()), 0);
  ASSERT_EQ(mkfifo((vms + "/c/run/disk.qcow2").c_str(), 0600), 0);
  VmStoreOptions o;
  o.root = root;
  o.disk_bytes = int64_t{256} << 20;
  VmStore store(o);
  absl::StatusOr<int64_t> growth = store.OverlayGrowthBytes();
  ASSERT_TRUE(growth.ok()) << growth.status();
  struct stat st;
  ASSERT_EQ(stat(huge.c_str(), &st), 0);
  EXPECT_EQ(*growth, OverlayCeilingBytes(int64_t{1} << 40) - static_cast<int64_t>(st.st_blocks) * 512 +
                         2 * OverlayCeilingBytes(o.disk_bytes));
  std::filesystem::remove_all(root);
}

TEST(VmDefinitionTest, TheDefinitionRoundTripsAndIsReadStrictly) {
  VmDefinition d;
  d.sandbox_id = kId;
  d.generation = 9;
  d.args_digest = "sha256:ab";
  d.image = "/s/i";
  d.kernel = "/s/k";
  d.firmware = "/s/f";
  d.initramfs = "/s/r";
  d.seccomp = "/s/p";
  d.cpu_millis = 1500;
  d.memory_bytes = 1 << 30;
  d.command = {"sh", "-c", "x=1"};
  d.env = {{"A", "b=c"}, {"PATH", "/bin"}};
  absl::StatusOr<VmDefinition> back = DecodeVmDefinition(EncodeVmDefinition(d));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->command, d.command);
  EXPECT_EQ(back->env, d.env);
  EXPECT_EQ(back->memory_bytes, d.memory_bytes);
  EXPECT_EQ(back->seccomp, d.seccomp);
  std::string text = EncodeVmDefinition(d);
  text.insert(1, "\"extra\":1,");
  EXPECT_FALSE(DecodeVmDefinition(text).ok());
  d.sandbox_id = "../escape";
  EXPECT_FALSE(DecodeVmDefinition(EncodeVmDefinition(d)).ok());
}

}  // namespace
}  // namespace sn::microvm
