// The sandbox profile and the helper's memory bounds on the real dockerd (findings 2, 3, 4):
// every sandbox carries the profile and is held to it, and the native helper never holds more
// than the spec's bounds of a call's bytes. Skips loudly when dockerd is not running (fails
// under CI=true).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/wire/limits.h"
#include "gtest/gtest.h"
#include "privhelper/helpers/sanitizer_build.h"
#include "privhelper/native/sandbox_profile.h"
#include "tests/privhelper/native/docker_e2e_fixture.h"

namespace sn::privhelper::e2e {
namespace {

namespace profile = ::sn::native::profile;

class SandboxE2eTest : public DockerE2eFixture {};

// Finding 3 on the real daemon: an exec printing ~300 MB with the largest output limit keeps
// exactly the limit, reports truncation and the command's own exit code (the rest of the
// stream was drained and discarded), and the helper's peak memory stays within the limit plus
// its baseline: the output is never buffered beyond the limit.
TEST_F(SandboxE2eTest, ExecPrintingHundredsOfMegabytesKeepsTheLimitAndTheHelperStaysSmall) {
  const std::string sb = Uuid(30);
  ASSERT_EQ(Run(Create(sb)).error_code(), pb::ERROR_CODE_NONE);
  ASSERT_EQ(Run(Exec(sb, {"true"})).error_code(), pb::ERROR_CODE_NONE);
  const pid_t pid = helpers_->helper_pid(1);
  ASSERT_GT(pid, 0);
  const int64_t baseline = PeakResidentBytes(pid);
  ASSERT_GT(baseline, 0);

  pb::ExecuteRequest big = Exec(sb, {"sh", "-c", "head -c 300000000 /dev/zero; exit 7"}, "",
                                wire::kMaxOutputLimitBytes);
  big.set_budget_ms(120000);
  pb::ExecuteResponse r = Run(big);
  ASSERT_EQ(r.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(r.exec().exit_code(), 7);
  EXPECT_TRUE(r.exec().truncated());
  EXPECT_EQ(static_cast<int64_t>(r.exec().stdout().size()), wire::kMaxOutputLimitBytes);
  EXPECT_EQ(r.exec().stderr(), "");
  const int64_t peak = PeakResidentBytes(pid);
  printf("helper VmHWM: baseline %lld KiB, after a 300 MB exec %lld KiB\n",
         static_cast<long long>(baseline / 1024), static_cast<long long>(peak / 1024));
  // A sanitizer build's allocator keeps freed memory in quarantine (and adds shadow): the
  // bound is a property of the release allocator, asserted there.
  if (!kSanitizerBuild) {
    EXPECT_LT(peak, baseline + wire::kMaxOutputLimitBytes + (int64_t{8} << 20));
  }
}

// read_file keeps at most max_bytes and stops reading: a 150 MB file read with a 1 MiB bound,
// then with the largest bound, never raises the helper's peak beyond that bound.
TEST_F(SandboxE2eTest, ReadFileOfAHugeFileKeepsAtMostMaxBytes) {
  const std::string sb = Uuid(31);
  ASSERT_EQ(Run(Create(sb)).error_code(), pb::ERROR_CODE_NONE);
  ASSERT_EQ(Run(Exec(sb, {"sh", "-c", "head -c 150000000 /dev/zero > /tmp/big"})).exec().exit_code(), 0);
  const pid_t pid = helpers_->helper_pid(1);
  const int64_t baseline = PeakResidentBytes(pid);

  pb::ExecuteRequest r;
  r.mutable_read_file()->set_sandbox_id(sb);
  r.mutable_read_file()->set_path("/tmp/big");
  r.mutable_read_file()->set_max_bytes(1 << 20);
  pb::ExecuteResponse small = Run(r);
  ASSERT_EQ(small.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(small.read_file().content().size(), size_t{1} << 20);
  EXPECT_EQ(small.read_file().size(), 150000000);
  EXPECT_TRUE(small.read_file().truncated());
  if (!kSanitizerBuild) {
    EXPECT_LT(PeakResidentBytes(pid), baseline + (int64_t{8} << 20));
  }

  r.mutable_read_file()->set_max_bytes(wire::kMaxReadFileBytes);
  pb::ExecuteResponse most = Run(r);
  ASSERT_EQ(most.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(static_cast<int64_t>(most.read_file().content().size()), wire::kMaxReadFileBytes);
  EXPECT_TRUE(most.read_file().truncated());
  const int64_t peak = PeakResidentBytes(pid);
  printf("helper VmHWM: baseline %lld KiB, after a 48 MiB read %lld KiB\n",
         static_cast<long long>(baseline / 1024), static_cast<long long>(peak / 1024));
  if (!kSanitizerBuild) {
    EXPECT_LT(peak, baseline + wire::kMaxReadFileBytes + (int64_t{8} << 20));
  }

  r.mutable_read_file()->set_max_bytes(wire::kMaxReadFileBytes + 1);
  EXPECT_EQ(Run(r).error_code(), pb::ERROR_CODE_INVALID);
}

// Finding 4 (the helper's part): a large write_file crosses privhelper -> helper -> daemon
// without copies: the helper holds the parsed content once (the archive is sent as header, the
// content itself, trailer), so its peak rises by the content's size. 48,000,000 bytes: up to
// 50,000,000 protobuf 3.21 reserves a parsed string at once; the spec's 48 MiB maximum
// (50,331,648) is past that guard, and protobuf then grows the string once, holding it twice
// for a moment (docs/security.md).
TEST_F(SandboxE2eTest, LargeWriteFileCostsItsBytesOnceInTheHelper) {
  const std::string sb = Uuid(34);
  ASSERT_EQ(Run(Create(sb)).error_code(), pb::ERROR_CODE_NONE);
  const pid_t pid = helpers_->helper_pid(1);
  const int64_t baseline = PeakResidentBytes(pid);
  pb::ExecuteRequest w;
  w.mutable_write_file()->set_sandbox_id(sb);
  w.mutable_write_file()->set_path("/tmp/large");
  w.mutable_write_file()->set_mode(0600);
  constexpr int64_t kBytes = 48'000'000;
  w.mutable_write_file()->set_content(std::string(kBytes, 'w'));
  pb::ExecuteResponse r = Run(w);
  ASSERT_EQ(r.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(r.write_file().size(), kBytes);
  const int64_t peak = PeakResidentBytes(pid);
  printf("helper VmHWM: baseline %lld KiB, after a 48 MB write_file %lld KiB\n",
         static_cast<long long>(baseline / 1024), static_cast<long long>(peak / 1024));
  if (!kSanitizerBuild) {
    EXPECT_LT(peak, baseline + kBytes + (int64_t{8} << 20));
  }
  EXPECT_EQ(Run(Exec(sb, {"sh", "-c", "wc -c < /tmp/large"})).exec().stdout(),
            std::to_string(kBytes) + "\n");
}

// Finding 2: the created container carries every field of the sandbox profile, and inside it a
// root process holds only the narrowed capabilities, under no_new_privs, with the ulimits,
// under docker-init as PID 1.
TEST_F(SandboxE2eTest, SandboxRunsWithTheProfile) {
  const std::string sb = Uuid(32);
  pb::ExecuteResponse created = Run(Create(sb));
  ASSERT_EQ(created.error_code(), pb::ERROR_CODE_NONE);
  nlohmann::json c = InspectContainer(created.sandbox().native_id());
  ASSERT_TRUE(c.is_object());
  const nlohmann::json& hc = c["HostConfig"];
  EXPECT_EQ(hc["PidsLimit"], profile::kPidsLimit);
  EXPECT_EQ(hc["Memory"], 64 << 20);
  EXPECT_EQ(hc["MemorySwap"], hc["Memory"]);
  EXPECT_EQ(hc["NanoCpus"], 500000000);
  EXPECT_EQ(hc["NetworkMode"], "none");
  EXPECT_EQ(hc["RestartPolicy"]["Name"], "no");
  EXPECT_EQ(hc["Init"], true);
  EXPECT_EQ(hc["LogConfig"]["Type"], "none");
  EXPECT_EQ(hc["SecurityOpt"], nlohmann::json::array({"no-new-privileges:true"}));
  EXPECT_EQ(hc["CapDrop"], nlohmann::json::array({"ALL"}));
  std::set<std::string> caps, want;
  for (const auto& cap : hc["CapAdd"]) {
    std::string name = cap.get<std::string>();
    caps.insert(name.rfind("CAP_", 0) == 0 ? name.substr(4) : name);
  }
  for (const char* cap : profile::kCapabilities) want.insert(cap);
  EXPECT_EQ(caps, want);
  std::map<std::string, std::pair<int64_t, int64_t>> ulimits;
  for (const auto& u : hc["Ulimits"]) {
    ulimits[u["Name"].get<std::string>()] = {u["Soft"].get<int64_t>(), u["Hard"].get<int64_t>()};
  }
  EXPECT_EQ(ulimits["nofile"], std::make_pair(profile::kOpenFiles, profile::kOpenFiles));
  EXPECT_EQ(ulimits["core"], std::make_pair(int64_t{0}, int64_t{0}));

  pb::ExecuteResponse status = Run(Exec(sb, {"cat", "/proc/self/status"}));
  ASSERT_EQ(status.error_code(), pb::ERROR_CODE_NONE);
  char mask[17];
  snprintf(mask, sizeof mask, "%016llx", static_cast<unsigned long long>(profile::kCapabilityMask));
  const std::string& text = status.exec().stdout();
  EXPECT_NE(text.find(std::string("CapEff:\t") + mask + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find(std::string("CapBnd:\t") + mask + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("NoNewPrivs:\t1\n"), std::string::npos) << text;

  EXPECT_EQ(Run(Exec(sb, {"sh", "-c", "ulimit -n; ulimit -c"})).exec().stdout(),
            std::to_string(profile::kOpenFiles) + "\n0\n");
  const std::string init = Run(Exec(sb, {"cat", "/proc/1/cmdline"})).exec().stdout();
  EXPECT_EQ(init.substr(0, init.find('\0')), "/sbin/docker-init") << init;
}

// Finding 2: a fork bomb in a sandbox stops at the pids limit (the kernel refuses its forks:
// the cgroup's "max" event count rises) and the sandbox is still killed cleanly.
TEST_F(SandboxE2eTest, ForkBombStopsAtThePidsLimit) {
  const std::string sb = Uuid(33);
  pb::ExecuteResponse created = Run(Create(sb));
  ASSERT_EQ(created.error_code(), pb::ERROR_CODE_NONE);
  const std::string id = created.sandbox().native_id();
  std::string cgroup;
  for (const std::string& dir : {"/sys/fs/cgroup/pids/docker/" + id,
                                 "/sys/fs/cgroup/docker/" + id,
                                 "/sys/fs/cgroup/system.slice/docker-" + id + ".scope"}) {
    if (!ReadText(dir + "/pids.max").empty()) cgroup = dir;
  }
  ASSERT_FALSE(cgroup.empty()) << "no pids cgroup found for " << id;
  EXPECT_EQ(ReadText(cgroup + "/pids.max"), std::to_string(profile::kPidsLimit) + "\n");

  pb::ExecuteResponse bomb =
      Run(Exec(sb, {"sh", "-c", "bomb() { bomb | bomb & }; bomb >/dev/null 2>&1 </dev/null"}));
  ASSERT_EQ(bomb.error_code(), pb::ERROR_CODE_NONE);
  int64_t refused = 0, most = 0;
  for (int i = 0; i < 300 && refused == 0; ++i) {  // <= 30 s
    const std::string events = ReadText(cgroup + "/pids.events");  // "max N"
    if (events.rfind("max ", 0) == 0) refused = std::stoll(events.substr(4));
    const std::string current = ReadText(cgroup + "/pids.current");
    if (!current.empty()) most = std::max<int64_t>(most, std::stoll(current));
    if (refused == 0) usleep(100000);
  }
  EXPECT_GT(refused, 0) << "the bomb never reached the limit";
  EXPECT_LE(most, profile::kPidsLimit);
  EXPECT_EQ(Run(Op("kill", sb)).error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(Run(Op("inspect", sb)).sandbox().state(), pb::SANDBOX_STATE_ABSENT);
}

}  // namespace
}  // namespace sn::privhelper::e2e
