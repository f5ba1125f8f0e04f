// Outcome classification of the Docker operations against a scripted engine: doubt is never
// absence, and a mutation whose fate is unknown is uncertain.
#include "privhelper/native/docker/docker_ops.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/wire/limits.h"
#include "gtest/gtest.h"
#include "privhelper/docker/inventory.h"
#include "privhelper/native/sandbox_profile.h"
#include "privhelper/native/docker/tar.h"
#include "tests/privhelper/test_util.h"

namespace sn::native::docker {
namespace {

using ::sn::docker::TransportError;
using ::sn::docker::TransportFailure;
using sn::testing::FakeEngine;
namespace profile = ::sn::native::profile;

constexpr char kInst[] = "0000aaaa-0000-4000-8000-000000000001";
constexpr char kSb[] = "0000bbbb-0000-4000-8000-000000000002";

std::string Container(const std::string& state, int generation = 1, const std::string& inst = kInst) {
  return std::string(R"([{"Id":"c1","State":")") + state + R"(","Labels":{"sn.installation":")" +
         inst + R"(","sn.sandbox":")" + kSb + R"(","sn.generation":")" + std::to_string(generation) +
         R"("}}])";
}

// GET /containers/sn-<inst>-<sb>/json's answer when nothing has that name.
void NoSuchName(FakeEngine& e) {
  e.PushOk(404, std::string(R"({"message":"No such container: sn-)") + kInst + "-" + kSb + "\"}");
}

// GET /containers/{name}/json's answer: a container named `name` with these labels.
std::string Named(const std::string& state, int generation = 1, const std::string& inst = kInst,
                  const std::string& sandbox = kSb,
                  const std::string& name = std::string("/sn-") + kInst + "-" + kSb) {
  nlohmann::json c = {{"Id", "c1"},
                      {"Name", name},
                      {"State", {{"Status", state}, {"Running", state == "running"}}},
                      {"Config",
                       {{"Labels",
                         {{"sn.installation", inst},
                          {"sn.sandbox", sandbox},
                          {"sn.generation", std::to_string(generation)}}}}}};
  return c.dump();
}

pb::ExecuteRequest Inspect() {
  pb::ExecuteRequest r;
  r.mutable_inspect()->set_sandbox_id(kSb);
  return r;
}

pb::ExecuteRequest Kill() {
  pb::ExecuteRequest r;
  r.mutable_kill()->set_sandbox_id(kSb);
  return r;
}

pb::ExecuteRequest Create() {
  pb::ExecuteRequest r;
  r.set_request_id("req-1");
  r.mutable_create()->set_sandbox_id(kSb);
  r.mutable_create()->set_image("img");
  r.mutable_create()->set_cpu_millis(100);
  r.mutable_create()->set_memory_bytes(64 << 20);
  return r;
}

Resolved Defaults() {
  Resolved r;
  r.native_image = "sha256:" + std::string(64, 'a');
  r.max_active = 16;
  r.max_retained = 64;
  return r;
}

pb::ExecuteResponse RunOn(FakeEngine& e, const pb::ExecuteRequest& r,
                          const Resolved& resolved = Defaults()) {
  DockerOperations ops(&e, kInst, 1);
  CallControl ctl;
  ctl.deadline = absl::Now() + absl::Seconds(30);
  return ops.Run(r, resolved, &ctl);
}

TEST(DockerOpsTest, FailedListIsUnavailableNeverAbsent) {
  FakeEngine e;
  NoSuchName(e);
  e.Push(TransportError(TransportFailure::kSocketMissing, "x"));
  EXPECT_EQ(RunOn(e, Inspect()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
  FakeEngine e500;
  NoSuchName(e500);
  e500.PushOk(500, "{}");
  EXPECT_EQ(RunOn(e500, Kill()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
  FakeEngine garbage;
  NoSuchName(garbage);
  garbage.PushOk(200, "{not a list");
  EXPECT_EQ(RunOn(garbage, Kill()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
}

TEST(DockerOpsTest, EmptyCompleteListIsAbsentAndNotFound) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, "[]");
  pb::ExecuteResponse r = RunOn(e, Inspect());
  EXPECT_EQ(r.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(r.sandbox().state(), pb::SANDBOX_STATE_ABSENT);
  FakeEngine k;
  NoSuchName(k);
  k.PushOk(200, "[]");
  EXPECT_EQ(RunOn(k, Kill()).error_code(), pb::ERROR_CODE_NOT_FOUND);
  EXPECT_FALSE(RunOn(k, Kill()).native_call_started());
}

TEST(DockerOpsTest, ListEntryWithForeignLabelsIsDoubtNotAMatch) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, Container("running", 1, "someone-else"));
  EXPECT_EQ(RunOn(e, Inspect()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
}

TEST(DockerOpsTest, UnclearContainerStateIsUnavailable) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, Container("restarting"));
  EXPECT_EQ(RunOn(e, Inspect()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
}

TEST(DockerOpsTest, SandboxOfAnotherGenerationIsConflict) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, Container("running", 2));
  EXPECT_EQ(RunOn(e, Kill()).error_code(), pb::ERROR_CODE_CONFLICT);
}

TEST(DockerOpsTest, KillTimeoutAfterSendingIsUncertain) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, Container("running"));
  e.Push(TransportError(TransportFailure::kTimeout, "deadline"));
  pb::ExecuteResponse r = RunOn(e, Kill());
  EXPECT_EQ(r.error_code(), pb::ERROR_CODE_UNCERTAIN);
  EXPECT_TRUE(r.native_call_started());
}

TEST(DockerOpsTest, KillWhenDaemonVanishesBeforeConnectIsUnavailable) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, Container("running"));
  e.Push(TransportError(TransportFailure::kConnectionRefused, "stopped"));
  EXPECT_EQ(RunOn(e, Kill()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
}

TEST(DockerOpsTest, CreateResetAfterSendingIsUncertain) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, "[]");  // the installation's containers: the lookup and the capacity count
  e.Push(TransportError(TransportFailure::kIo, "connection reset"));
  pb::ExecuteResponse r = RunOn(e, Create());
  EXPECT_EQ(r.error_code(), pb::ERROR_CODE_UNCERTAIN);
  EXPECT_FALSE(r.has_create_settled());
}

TEST(DockerOpsTest, CreateDaemonErrorIsUncertainButMissingImageIsFailed) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, "[]");  // the installation's containers: the lookup and the capacity count
  e.PushOk(500, R"({"message":"boom"})");
  EXPECT_EQ(RunOn(e, Create()).error_code(), pb::ERROR_CODE_UNCERTAIN);
  FakeEngine m;
  NoSuchName(m);
  m.PushOk(200, "[]");
  m.PushOk(404, R"({"message":"No such image"})");
  EXPECT_EQ(RunOn(m, Create()).error_code(), pb::ERROR_CODE_FAILED);
}

TEST(DockerOpsTest, StartTimeoutAfterConfirmedCreateIsUncertainWithoutReceipt) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, "[]");  // the installation's containers: the lookup and the capacity count
  e.PushOk(201, R"({"Id":"c9"})");
  e.Push(TransportError(TransportFailure::kTimeout, "deadline"));
  pb::ExecuteResponse r = RunOn(e, Create());
  EXPECT_EQ(r.error_code(), pb::ERROR_CODE_UNCERTAIN);
  EXPECT_FALSE(r.has_create_settled());
}

TEST(DockerOpsTest, StartRefusedAfterConfirmedCreateIsFailedWithExactReceipt) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, "[]");  // the installation's containers: the lookup and the capacity count
  e.PushOk(201, R"({"Id":"c9"})");
  e.PushOk(400, R"({"message":"exec: no such file"})");
  pb::ExecuteResponse r = RunOn(e, Create());
  EXPECT_EQ(r.error_code(), pb::ERROR_CODE_FAILED);
  ASSERT_TRUE(r.has_create_settled());
  EXPECT_EQ(r.create_settled().request_id(), "req-1");
  EXPECT_EQ(r.create_settled().sandbox_id(), kSb);
  EXPECT_EQ(r.create_settled().native_id(), "c9");
  EXPECT_EQ(r.create_settled().generation(), 1);
}

// Finding 2: every create carries the whole sandbox profile.
TEST(DockerOpsTest, CreateBodyCarriesTheSandboxProfile) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, "[]");  // the installation's containers: the lookup and the capacity count
  e.PushOk(201, R"({"Id":"c9"})");
  e.PushOk(204, "");    // start
  ASSERT_EQ(RunOn(e, Create()).error_code(), pb::ERROR_CODE_NONE);
  ASSERT_EQ(e.bodies.size(), 4u);
  nlohmann::json body = nlohmann::json::parse(e.bodies[2], nullptr, false);
  ASSERT_TRUE(body.is_object()) << e.bodies[2];
  EXPECT_EQ(body["HostConfig"], profile::SandboxHostConfig(100, 64 << 20));
  const nlohmann::json& hc = body["HostConfig"];
  EXPECT_EQ(hc["NanoCpus"], 100000000);
  EXPECT_EQ(hc["Memory"], 64 << 20);
  EXPECT_EQ(hc["MemorySwap"], 64 << 20);
  EXPECT_EQ(hc["PidsLimit"], profile::kPidsLimit);
  EXPECT_EQ(hc["NetworkMode"], "none");
  EXPECT_EQ(hc["RestartPolicy"]["Name"], "no");
  EXPECT_EQ(hc["Init"], true);
  EXPECT_EQ(hc["SecurityOpt"], nlohmann::json::array({"no-new-privileges:true"}));
  EXPECT_EQ(hc["CapDrop"], nlohmann::json::array({"ALL"}));
  EXPECT_EQ(hc["CapAdd"].size(), std::size(profile::kCapabilities));
  EXPECT_EQ(hc["LogConfig"]["Type"], "none");
  EXPECT_EQ(hc["Ulimits"].size(), 2u);
  EXPECT_FALSE(hc.contains("Privileged") && hc["Privileged"] == true);
}

// Finding 3: bounds beyond the spec are refused by the helper's operations themselves, before
// any Engine request.
TEST(DockerOpsTest, OutputAndReadBoundsBeyondTheSpecAreInvalidWithoutNativeIo) {
  FakeEngine e;
  pb::ExecuteRequest exec;
  exec.mutable_exec()->set_sandbox_id(kSb);
  exec.mutable_exec()->add_argv("true");
  exec.mutable_exec()->set_output_limit_bytes(wire::kMaxOutputLimitBytes + 1);
  EXPECT_EQ(RunOn(e, exec).error_code(), pb::ERROR_CODE_INVALID);
  pb::ExecuteRequest read;
  read.mutable_read_file()->set_sandbox_id(kSb);
  read.mutable_read_file()->set_path("/tmp/f");
  read.mutable_read_file()->set_max_bytes(wire::kMaxReadFileBytes + 1);
  EXPECT_EQ(RunOn(e, read).error_code(), pb::ERROR_CODE_INVALID);
  EXPECT_TRUE(e.targets.empty());
}

TEST(DockerOpsTest, CreateAtMaxActiveIsCapacityBeforeAnyMutation) {
  FakeEngine e;
  NoSuchName(e);
  // The installation's containers: another sandbox's, running.
  e.PushOk(200, R"([{"Id":"c2","State":"running","Labels":{"sn.installation":")" +
                    std::string(kInst) + R"(","sn.sandbox":"other","sn.generation":"1"}}])");
  Resolved one = Defaults();
  one.max_active = 1;
  pb::ExecuteResponse resp = RunOn(e, Create(), one);
  EXPECT_EQ(resp.error_code(), pb::ERROR_CODE_CAPACITY);
  EXPECT_FALSE(resp.native_call_started());
  EXPECT_EQ(e.targets.size(), 2u);
}

// One entry of the installation's list: `sandbox`'s container in `state`.
std::string Entry(const std::string& id, const std::string& state, const std::string& sandbox) {
  return R"({"Id":")" + id + R"(","State":")" + state + R"(","Labels":{"sn.installation":")" +
         std::string(kInst) + R"(","sn.sandbox":")" + sandbox + R"(","sn.generation":"1"}})";
}

constexpr char kOtherA[] = "0000cccc-0000-4000-8000-000000000003";
constexpr char kOtherB[] = "0000dddd-0000-4000-8000-000000000004";

// The other creates and starting resumes in flight count beside the inventory
// (docs/protocol.md 22a): one running, one in flight and this one make 3 > 2.
TEST(DockerOpsTest, CreateCountsTheCallsInFlightBesideTheInventory) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, "[" + Entry("c2", "running", kOtherB) + "]");
  Resolved r = Defaults();
  r.max_active = 2;
  r.in_flight_sandbox_ids = {kOtherA};
  pb::ExecuteResponse resp = RunOn(e, Create(), r);
  EXPECT_EQ(resp.error_code(), pb::ERROR_CODE_CAPACITY);
  EXPECT_FALSE(resp.native_call_started());
  EXPECT_EQ(e.targets.size(), 2u) << "nothing created";
}

// A call in flight whose sandbox the inventory already shows running counts once.
TEST(DockerOpsTest, AnInFlightSandboxTheInventoryShowsCountsOnce) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, "[" + Entry("c2", "running", kOtherA) + "]");
  e.PushOk(201, R"({"Id":"c9"})");
  e.PushOk(204, "");
  Resolved r = Defaults();
  r.max_active = 2;
  r.in_flight_sandbox_ids = {kOtherA};
  EXPECT_EQ(RunOn(e, Create(), r).error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(e.targets.size(), 4u);
}

// The count stays the containers' (docs/protocol.md 12k): two containers carrying one other
// sandbox's labels count twice; only an in-flight sandbox already listed counts once.
TEST(DockerOpsTest, TwoContainersOfOneSandboxBothCount) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, "[" + Entry("c2", "running", kOtherB) + "," + Entry("c3", "running", kOtherB) +
                    "]");
  Resolved r = Defaults();
  r.max_active = 2;
  EXPECT_EQ(RunOn(e, Create(), r).error_code(), pb::ERROR_CODE_CAPACITY);
}

// The same for a starting resume (active slots) and kill_compute (retained slots); neither
// sends its mutation when the union exceeds the bound.
TEST(DockerOpsTest, ResumeAndKillComputeCountTheCallsInFlight) {
  pb::ExecuteRequest resume;
  resume.mutable_resume()->set_sandbox_id(kSb);
  FakeEngine e;
  e.PushOk(200, Named("exited"));
  e.PushOk(200, "[" + Entry("c2", "running", kOtherB) + "," + Entry("c1", "exited", kSb) + "]");
  Resolved r = Defaults();
  r.max_active = 2;
  r.in_flight_sandbox_ids = {kOtherA};
  pb::ExecuteResponse resp = RunOn(e, resume, r);
  EXPECT_EQ(resp.error_code(), pb::ERROR_CODE_CAPACITY);
  EXPECT_EQ(e.targets.size(), 2u) << "no start";
  // Without the call in flight it fits (1 running + this one = 2).
  FakeEngine fits;
  fits.PushOk(200, Named("exited"));
  fits.PushOk(200, "[" + Entry("c2", "running", kOtherB) + "," + Entry("c1", "exited", kSb) + "]");
  fits.PushOk(204, "");
  r.in_flight_sandbox_ids.clear();
  EXPECT_EQ(RunOn(fits, resume, r).error_code(), pb::ERROR_CODE_NONE);

  pb::ExecuteRequest kill_compute;
  kill_compute.mutable_kill_compute()->set_sandbox_id(kSb);
  FakeEngine k;
  k.PushOk(200, Named("running"));
  k.PushOk(200, "[" + Entry("c2", "exited", kOtherB) + "," + Entry("c1", "running", kSb) + "]");
  Resolved kr = Defaults();
  kr.max_retained = 2;
  kr.in_flight_sandbox_ids = {kOtherA};
  resp = RunOn(k, kill_compute, kr);
  EXPECT_EQ(resp.error_code(), pb::ERROR_CODE_CAPACITY);
  EXPECT_FALSE(resp.native_call_started());
  EXPECT_EQ(k.targets.size(), 2u) << "no stop";
}

// When nothing has the sandbox's name, a create makes one list of the installation's
// containers (no sandbox filter), which proves the absence and counts; the container then
// created carries the name and labels.
TEST(DockerOpsTest, CreateListsTheInstallationOnceForLookupAndCapacity) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, R"([{"Id":"c2","State":"exited","Labels":{"sn.installation":")" +
                    std::string(kInst) + R"(","sn.sandbox":"other","sn.generation":"1"}}])");
  e.PushOk(201, R"({"Id":"c9"})");
  e.PushOk(204, "");
  pb::ExecuteResponse r = RunOn(e, Create());
  ASSERT_EQ(r.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(r.sandbox().state(), pb::SANDBOX_STATE_RUNNING);
  ASSERT_EQ(e.targets.size(), 4u);
  EXPECT_NE(e.targets[1].find(std::string("sn.installation%3D") + kInst), std::string::npos);
  EXPECT_EQ(e.targets[1].find("sn.sandbox"), std::string::npos) << e.targets[1];
  EXPECT_NE(e.targets[2].find("/containers/create?name=sn-"), std::string::npos);
}

// The one list still decides presence: our sandbox under another name is a conflict, two
// containers labelled with it or an entry in an unknown state are doubt, never a create.
TEST(DockerOpsTest, CreatesListShowingTheSandboxOrDoubtNeverCreates) {
  const std::string mine =
      std::string(R"({"Id":"c1","State":"running","Labels":{"sn.installation":")") + kInst +
      R"(","sn.sandbox":")" + kSb + R"(","sn.generation":"1"}})";
  FakeEngine renamed;
  NoSuchName(renamed);
  renamed.PushOk(200, "[" + mine + "]");
  EXPECT_EQ(RunOn(renamed, Create()).error_code(), pb::ERROR_CODE_CONFLICT);
  EXPECT_EQ(renamed.targets.size(), 2u);
  FakeEngine twice;
  NoSuchName(twice);
  twice.PushOk(200, "[" + mine + "," + mine + "]");
  EXPECT_EQ(RunOn(twice, Create()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
  EXPECT_EQ(twice.targets.size(), 2u);
  FakeEngine odd;
  NoSuchName(odd);
  odd.PushOk(200, R"([{"Id":"c2","State":"levitating","Labels":{"sn.installation":")" +
                      std::string(kInst) + R"(","sn.sandbox":"other"}}])");
  EXPECT_EQ(RunOn(odd, Create()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
  EXPECT_EQ(odd.targets.size(), 2u);
  // Its own container in a transitional state is doubt too.
  for (const char* state : {"removing", "dead", "paused", "restarting"}) {
    FakeEngine own;
    NoSuchName(own);
    own.PushOk(200, std::string(R"([{"Id":"c1","State":")") + state +
                        R"(","Labels":{"sn.installation":")" + kInst + R"(","sn.sandbox":")" +
                        kSb + R"(","sn.generation":"1"}}])");
    EXPECT_EQ(RunOn(own, Create()).error_code(), pb::ERROR_CODE_UNAVAILABLE) << state;
    EXPECT_EQ(own.targets.size(), 2u) << state;
  }
}

// Another sandbox's container being removed, or stuck dead, does not make the node refuse
// every create (the soak's finding 2): it counts as running, the conservative side of
// max_active.
TEST(DockerOpsTest, AnotherSandboxsRemovingOrDeadContainerCountsAsRunningAndNeverBlocksCreates) {
  for (const char* state : {"removing", "dead", "paused", "restarting"}) {
    const std::string other = std::string(R"([{"Id":"c2","State":")") + state +
                              R"(","Labels":{"sn.installation":")" + kInst +
                              R"(","sn.sandbox":"other","sn.generation":"1"}}])";
    FakeEngine e;
    NoSuchName(e);
    e.PushOk(200, other);
    e.PushOk(201, R"({"Id":"c9"})");
    e.PushOk(204, "");
    pb::ExecuteResponse r = RunOn(e, Create());
    EXPECT_EQ(r.error_code(), pb::ERROR_CODE_NONE) << state;
    ASSERT_EQ(e.targets.size(), 4u) << state;
    EXPECT_NE(e.targets[2].find("/containers/create?name=sn-"), std::string::npos) << state;

    Resolved one = Defaults();
    one.max_active = 1;  // the other sandbox's container takes the only place
    FakeEngine full;
    NoSuchName(full);
    full.PushOk(200, other);
    pb::ExecuteResponse c = RunOn(full, Create(), one);
    EXPECT_EQ(c.error_code(), pb::ERROR_CODE_CAPACITY) << state;
    EXPECT_FALSE(c.native_call_started()) << state;
    EXPECT_EQ(full.targets.size(), 2u) << state;
  }
}

// The installation-wide list a create reads (lookup and capacity at once) is the inventory's
// one reader: an entry the label filter should have excluded is doubt, as in the probe's
// count, never skipped and never counted.
TEST(DockerOpsTest, CreatesListWithAForeignEntryIsDoubtNeverCreates) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, R"([{"Id":"c2","State":"running","Labels":{"sn.installation":"someone-else",)"
                R"("sn.sandbox":"other","sn.generation":"1"}}])");
  EXPECT_EQ(RunOn(e, Create()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
  EXPECT_EQ(e.targets.size(), 2u) << "nothing created";
}

// A generation label is read strictly, the same for a listed and an inspected container:
// "1x", "+1", " 1" or "-1" is no generation (0), so the sandbox is another generation's.
TEST(DockerOpsTest, AGenerationLabelThatIsNotAPlainDecimalIsNoGeneration) {
  for (const char* label : {"1x", "+1", " 1", "-1", "01x", "99999999999999999999"}) {
    FakeEngine listed;
    NoSuchName(listed);
    listed.PushOk(200, std::string(R"([{"Id":"c1","State":"running","Labels":{"sn.installation":")") +
                           kInst + R"(","sn.sandbox":")" + kSb + R"(","sn.generation":")" + label +
                           R"("}}])");
    EXPECT_EQ(RunOn(listed, Kill()).error_code(), pb::ERROR_CODE_CONFLICT) << label;
    nlohmann::json named = nlohmann::json::parse(Named("running"));
    named["Config"]["Labels"]["sn.generation"] = label;
    FakeEngine inspected;
    inspected.PushOk(200, named.dump());
    EXPECT_EQ(RunOn(inspected, Kill()).error_code(), pb::ERROR_CODE_CONFLICT) << label;
  }
  EXPECT_EQ(::sn::docker::ParseGenerationLabel("1"), 1);
  EXPECT_EQ(::sn::docker::ParseGenerationLabel("9223372036854775807"), 9223372036854775807);
  EXPECT_EQ(::sn::docker::ParseGenerationLabel("0"), 0);
  EXPECT_EQ(::sn::docker::ParseGenerationLabel(""), 0);
}

TEST(DockerOpsTest, ListQueryFiltersByThisInstallationsLabel) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, "[]");
  RunOn(e, Inspect());
  ASSERT_EQ(e.targets.size(), 2u);
  EXPECT_NE(e.targets[1].find(std::string("sn.installation%3D") + kInst), std::string::npos)
      << e.targets[1];
  EXPECT_NE(e.targets[1].find("all=1"), std::string::npos);
}

// Presence by name (docs/protocol.md 12k): one inspect of sn-<installation>-<sandbox>, no list.
TEST(DockerOpsTest, ContainerUnderOurNameWithOurLabelsIsFoundWithoutAList) {
  FakeEngine e;
  e.PushOk(200, Named("running"));
  pb::ExecuteResponse r = RunOn(e, Inspect());
  ASSERT_EQ(r.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(r.sandbox().state(), pb::SANDBOX_STATE_RUNNING);
  EXPECT_EQ(r.sandbox().native_id(), "c1");
  ASSERT_EQ(e.targets.size(), 1u);
  EXPECT_EQ(e.targets[0], std::string("/v1.41/containers/sn-") + kInst + "-" + kSb + "/json");
  FakeEngine x;
  x.PushOk(200, Named("exited"));
  EXPECT_EQ(RunOn(x, Inspect()).sandbox().state(), pb::SANDBOX_STATE_RETAINED);
}

// What dockerd 20.10 really answers for a running sandbox (4.7 KiB: host configuration, mounts,
// networks...), captured from the node's own create with the ids replaced by kInst and kSb.
std::string RealInspect() {
  std::ifstream in("tests/testdata/docker/inspect_running_20.10.json", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The by-name answer is read member by member; everything but Id, Name, Config.Labels (ours) and
// State.Status is skipped. A real answer reads exactly as the DOM read it.
TEST(DockerOpsTest, ARealDaemonsInspectAnswerIsReadWithoutItsOtherMembers) {
  const std::string body = RealInspect();
  ASSERT_GT(body.size(), 4000u);
  FakeEngine e;
  e.PushOk(200, body);
  pb::ExecuteResponse r = RunOn(e, Inspect());
  ASSERT_EQ(r.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(r.sandbox().state(), pb::SANDBOX_STATE_RUNNING);
  EXPECT_EQ(r.sandbox().native_id(), nlohmann::json::parse(body)["Id"].get<std::string>());
  EXPECT_EQ(e.targets.size(), 1u);
}

// Whatever makes the answer ambiguous or not one JSON object is doubt (unavailable), never a
// match and never absence (no list follows).
TEST(DockerOpsTest, AnAmbiguousOrBrokenInspectAnswerIsUnavailable) {
  const std::string good = Named("running");
  const std::string name = std::string("/sn-") + kInst + "-" + kSb;
  const std::string labels = std::string(R"("Labels":{"sn.installation":")") + kInst +
                             R"(","sn.sandbox":")" + kSb + R"(","sn.generation":"1"})";
  const std::vector<std::string> bodies = {
      good.substr(0, good.size() - 1),                         // truncated
      good + "x",                                               // something after the object
      "[" + good + "]",                                         // not an object
      R"({"Id":"c1","Id":"c2","Name":")" + name + R"(","State":{"Status":"running"},"Config":{)" +
          labels + "}}",                                        // two ids
      R"({"Id":"c1","Name":")" + name + R"(","State":{"Status":"running"},"Config":{)" + labels +
          R"(,"Labels":{}}})",                                  // two label sets
      R"({"Id":"c1","Name":")" + name + R"(","State":{"Status":"running"},"Config":{"Labels":{"sn.installation":")" +
          kInst + R"(","sn.installation":"other","sn.sandbox":")" + kSb +
          R"(","sn.generation":"1"}}})",                        // one of our labels twice
      R"({"Id":"c1","Name":")" + name + R"(","State":{"Status":"running","Status":"exited"},"Config":{)" +
          labels + "}}",                                        // two states
      R"({"Id":"c1","Name":")" + name + R"(","State":{"Status":1},"Config":{)" + labels + "}}",
      R"({"Id":"","Name":")" + name + R"(","State":{"Status":"running"},"Config":{)" + labels +
          "}}",                                                 // empty id
      R"({"Id":"c1","Name":")" + name + R"(","State":{"Status":"running"}})",  // no Config
      R"({"Id":"c1","Name":")" + name + R"(","Config":{)" + labels + "}}",      // no State
      R"({"Id":"c1","Name":")" + name + R"(","State":{"Status":"running"},"Config":{"Labels":{"sn.installation":")" +
          kInst + R"(","sn.sandbox":7}}})",                     // our label not a string
      R"({"Id":"c1","Name":")" + name + R"(","State":{"Status":"paused"},"Config":{)" + labels +
          "}}",                                                 // a state we do not map
      R"({"Id":"c1","Name":")" + name + "\xff" + R"(","State":{"Status":"running"},"Config":{)" +
          labels + "}}",                                        // not UTF-8
  };
  for (size_t i = 0; i < bodies.size(); ++i) {
    FakeEngine e;
    e.PushOk(200, bodies[i]);
    EXPECT_EQ(RunOn(e, Inspect()).error_code(), pb::ERROR_CODE_UNAVAILABLE) << "body " << i;
    EXPECT_EQ(e.targets.size(), 1u) << "body " << i;
  }
  // Members of ours in other places, and other labels, change nothing.
  FakeEngine e;
  e.PushOk(200, R"({"Name":")" + name + R"(","HostConfig":{"Id":"x","Labels":{"sn.sandbox":"y"}},)" +
                    R"("Config":{"Labels":{"other":"z",)" + labels.substr(10) + "}" +
                    R"(,"State":{"Status":"exited"},"Id":"c9"})");
  pb::ExecuteResponse r = RunOn(e, Inspect());
  ASSERT_EQ(r.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(r.sandbox().native_id(), "c9");
  EXPECT_EQ(r.sandbox().state(), pb::SANDBOX_STATE_RETAINED);
}

TEST(DockerOpsTest, KillByNameRemovesTheInspectedContainer) {
  FakeEngine e;
  e.PushOk(200, Named("running"));
  e.PushOk(204, "");
  ASSERT_EQ(RunOn(e, Kill()).error_code(), pb::ERROR_CODE_NONE);
  ASSERT_EQ(e.targets.size(), 2u);
  EXPECT_EQ(e.targets[1], "/v1.41/containers/c1?force=1&v=1");
}

TEST(DockerOpsTest, AnotherInstallationsContainerUnderOurNameIsUnavailableNeverAbsent) {
  FakeEngine e;
  e.PushOk(200, Named("running", 1, "someone-else"));
  EXPECT_EQ(RunOn(e, Inspect()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
  EXPECT_EQ(e.targets.size(), 1u);  // doubt: no list turns it into absence
  FakeEngine k;
  k.PushOk(200, Named("running", 1, "someone-else"));
  pb::ExecuteResponse r = RunOn(k, Kill());
  EXPECT_EQ(r.error_code(), pb::ERROR_CODE_UNAVAILABLE);
  EXPECT_FALSE(r.native_call_started());
}

TEST(DockerOpsTest, OtherSandboxRenamedToOurNameIsUnavailable) {
  FakeEngine e;
  e.PushOk(200, Named("running", 1, kInst, "0000cccc-0000-4000-8000-000000000003"));
  EXPECT_EQ(RunOn(e, Kill()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
  EXPECT_EQ(e.targets.size(), 1u);
}

TEST(DockerOpsTest, UnlabelledContainerUnderOurNameIsUnavailable) {
  FakeEngine e;
  e.PushOk(200, R"({"Id":"c1","Name":"/sn-)" + std::string(kInst) + "-" + kSb +
                    R"(","State":{"Status":"running"},"Config":{"Labels":null}})");
  EXPECT_EQ(RunOn(e, Inspect()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
}

TEST(DockerOpsTest, ByNameAnswerForAnotherNameIsUnavailable) {
  FakeEngine e;
  e.PushOk(200, Named("running", 1, kInst, kSb, "/somebody-else"));
  EXPECT_EQ(RunOn(e, Inspect()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
}

TEST(DockerOpsTest, ByNameFailureIsUnavailableWithoutAList) {
  for (int i = 0; i < 5; ++i) {
    FakeEngine e;
    switch (i) {
      case 0: e.Push(TransportError(TransportFailure::kTimeout, "deadline")); break;
      case 1: e.PushOk(500, R"({"message":"boom"})"); break;
      case 2: e.PushOk(200, "{not json"); break;
      case 3: e.PushOk(200, R"({"Id":"c1","Name":"/x"})"); break;  // incomplete object
      case 4: e.PushOk(200, Named("restarting")); break;             // unclear state
    }
    pb::ExecuteResponse r = RunOn(e, Inspect());
    EXPECT_EQ(r.error_code(), pb::ERROR_CODE_UNAVAILABLE) << i;
    EXPECT_EQ(e.targets.size(), 1u) << i;
  }
}

TEST(DockerOpsTest, ByNameSandboxOfAnotherGenerationIsConflict) {
  FakeEngine e;
  e.PushOk(200, Named("running", 2));
  EXPECT_EQ(RunOn(e, Inspect()).error_code(), pb::ERROR_CODE_CONFLICT);
  FakeEngine k;
  k.PushOk(200, Named("running", 2));
  EXPECT_EQ(RunOn(k, Kill()).error_code(), pb::ERROR_CODE_CONFLICT);
}

// Our container renamed (or created between the two calls): nothing under our name, but the
// complete list shows it, and the list decides.
TEST(DockerOpsTest, MissingByNameButListedIsPresentNeverAbsent) {
  FakeEngine e;
  NoSuchName(e);
  e.PushOk(200, Container("running"));
  pb::ExecuteResponse r = RunOn(e, Inspect());
  ASSERT_EQ(r.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(r.sandbox().state(), pb::SANDBOX_STATE_RUNNING);
  EXPECT_EQ(r.sandbox().native_id(), "c1");
  FakeEngine k;
  NoSuchName(k);
  k.PushOk(200, Container("running"));
  k.PushOk(204, "");
  ASSERT_EQ(RunOn(k, Kill()).error_code(), pb::ERROR_CODE_NONE);
  ASSERT_EQ(k.targets.size(), 3u);
  EXPECT_EQ(k.targets[2], "/v1.41/containers/c1?force=1&v=1");
  FakeEngine c;
  NoSuchName(c);
  c.PushOk(200, Container("running"));  // the args label differs: not this create's sandbox
  EXPECT_EQ(RunOn(c, Create()).error_code(), pb::ERROR_CODE_CONFLICT);
}

TEST(DockerOpsTest, MissingByNameAndFailedListIsUnavailableNeverAbsent) {
  FakeEngine e;
  NoSuchName(e);
  e.Push(TransportError(TransportFailure::kIo, "reset"));
  EXPECT_EQ(RunOn(e, Inspect()).error_code(), pb::ERROR_CODE_UNAVAILABLE);
}

TEST(DockerOpsTest, CreateOverOurNamedContainerWithOtherArgsIsConflict) {
  FakeEngine e;
  e.PushOk(200, Named("running"));  // no sn.args label matching this create
  pb::ExecuteResponse r = RunOn(e, Create());
  EXPECT_EQ(r.error_code(), pb::ERROR_CODE_CONFLICT);
  EXPECT_FALSE(r.native_call_started());
  EXPECT_EQ(e.targets.size(), 1u);
}

// write_file sends the request's content as one piece of the archive, not a copy of it.
TEST(DockerOpsTest, WriteFileSendsTheArchiveAroundTheContent) {
  FakeEngine e;
  e.PushOk(200, Named("running"));
  e.PushOk(200, "");
  pb::ExecuteRequest w;
  w.mutable_write_file()->set_sandbox_id(kSb);
  w.mutable_write_file()->set_path("/tmp/f.txt");
  w.mutable_write_file()->set_mode(0600);
  w.mutable_write_file()->set_content("hello");
  pb::ExecuteResponse r = RunOn(e, w);
  ASSERT_EQ(r.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(r.write_file().size(), 5);
  ASSERT_EQ(e.bodies.size(), 2u);
  EXPECT_EQ(e.bodies[1], TarOneFile("f.txt", 0600, "hello"));
  TarFirstEntryReader reader(100);
  reader.Feed(e.bodies[1]);
  EXPECT_EQ(reader.content(), "hello");
}

}  // namespace
}  // namespace sn::native::docker
