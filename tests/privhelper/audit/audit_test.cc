// The audit, as an attacker with the agent's uid performs it against the real privhelper
// executable (docs/security.md "Findings ... and the tests that reproduce them"). Each test
// names the finding of issue 8 it reproduces and asserts the refusal and the bound.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/docker/inventory.h"
#include "privhelper/helpers/sanitizer_build.h"
#include "nlohmann/json.hpp"
#include "privhelper/native/sandbox_profile.h"
#include "privhelper/rpc/admission.h"
#include "tests/privhelper/audit/audit_fixture.h"
#include "tests/privhelper/audit/audit_test_base.h"

namespace sn::testing {
namespace {

using AuditTest = RegisteredPrivhelperTest;

TEST_F(AuditTest, Finding1ArgumentsBreakingTheSpecAreRefusedTypedAndCreateNothing) {
  SN_REQUIRE_DOCKERD();
  StartRegistered();
  const std::string sb = RandomUuid();
  struct Case {
    const char* what;
    std::string op;
    std::vector<std::string> extra;
  } cases[] = {
      {"cpu_millis 0", Create(sb, "busybox", 0), {}},
      {"memory_bytes 0", Create(sb, "busybox", 100, 0), {}},
      {"sandbox id not a uuid", Create("not-a-uuid"), {}},
      {"image given as a tag", Create(sb, "sn-audit-busybox:1"), {}},
      {"image id given directly", Create(sb, image_), {}},
      {"limits smuggled as field 4", Create(sb), {"--unknown_field=4"}},
      {"exec output limit 300 MB",
       absl::StrCat("exec { sandbox_id: \"", sb, "\" argv: \"true\" output_limit_bytes: 314572800 }"),
       {}},
      {"read_file max 150 MB",
       absl::StrCat("read_file { sandbox_id: \"", sb, "\" path: \"/etc/x\" max_bytes: 157286400 }"),
       {}},
      {"path with ..", absl::StrCat("read_file { sandbox_id: \"", sb,
                                    "\" path: \"/tmp/../etc\" max_bytes: 10 }"),
       {}},
      {"mode beyond 0777",
       absl::StrCat("write_file { sandbox_id: \"", sb, "\" path: \"/tmp/x\" mode: 4095 }"), {}},
      {"argv empty", absl::StrCat("exec { sandbox_id: \"", sb, "\" output_limit_bytes: 10 }"), {}},
      {"env key with '='",
       absl::StrCat("create { sandbox_id: \"", sb, "\" image: \"busybox\" env { key: \"A=B\" "
                    "value: \"1\" } cpu_millis: 100 memory_bytes: 67108864 }"),
       {}},
      {"NUL inside an argument",
       absl::StrCat("exec { sandbox_id: \"", sb, "\" argv: \"a\\000b\" output_limit_bytes: 1 }"),
       {}},
  };
  for (const Case& c : cases) {
    CallResult r = Execute(Request(c.op), c.extra);
    EXPECT_EQ(r.status, 0) << c.what;
    EXPECT_EQ(r.error_code, "ERROR_CODE_INVALID") << c.what;
    EXPECT_EQ(r.refusal, "REFUSAL_ARGUMENTS") << c.what;
  }
  // Envelope members too: a budget beyond the spec and a request id that is not a uuid.
  CallResult budget = Execute(Request(Create(sb), 1, 3600001));
  EXPECT_EQ(budget.refusal, "REFUSAL_ARGUMENTS");
  EXPECT_EQ(Containers(), 0u);
  EXPECT_TRUE(ph_->Alive());
  // The connection stayed up for every refusal: none of them was a violation.
  EXPECT_EQ(ph_->CountLog("permit-table violation"), 0);
}

// Finding 1: capacity comes from privhelper's configuration, never from the request.
TEST_F(AuditTest, Finding1MaxActiveIsPrivhelpersOwnConfiguration) {
  SN_REQUIRE_DOCKERD();
  PrivhelperProcess::Options o;
  o.max_active = 1;
  StartRegistered(o);
  EXPECT_EQ(Execute(Request(Create(RandomUuid()))).error_code, "ERROR_CODE_NONE") << ph_->Log();
  CallResult second = Execute(Request(Create(RandomUuid())));
  EXPECT_EQ(second.error_code, "ERROR_CODE_CAPACITY");
  EXPECT_EQ(Containers(), 1u);
  std::vector<CallResult> probe = ph_->Attack({"--method=Probe"});
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_NE(probe[0].response.find("max_active: 1 "), std::string::npos) << probe[0].response;
}

// Finding 9: a generation privhelper does not hold is refused, typed, and starts no helper.
TEST_F(AuditTest, Finding9UnheldGenerationsAreUnconfirmedAndStartNoHelper) {
  SN_REQUIRE_DOCKERD();
  StartRegistered();
  for (int g = 2; g <= 12; ++g) {
    CallResult r = Execute(Request(absl::StrCat("inspect { sandbox_id: \"", RandomUuid(), "\" }"), g));
    EXPECT_EQ(r.error_code, "ERROR_CODE_UNCONFIRMED") << g;
    EXPECT_EQ(r.refusal, "REFUSAL_GENERATION_NOT_HELD") << g;
  }
  EXPECT_TRUE(ChildrenOf(ph_->pid()).empty()) << "a helper was started for an unheld generation";
}

// Finding 13: a call the permit table does not allow in this phase drops the connection.
TEST_F(AuditTest, Finding13ExecuteBeforeRegistrationIsAViolationThatDropsTheConnection) {
  ph_ = PrivhelperProcess::Start({});
  ASSERT_NE(ph_, nullptr);
  installation_ = ph_->InstallationId();
  CallResult r = Execute(Request(absl::StrCat("inspect { sandbox_id: \"", RandomUuid(), "\" }")));
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(ph_->CountLog("permit-table violation"), 1) << ph_->Log();
  EXPECT_TRUE(ph_->Alive());
  // A new connection is served (Probe is permitted before registration).
  std::vector<CallResult> probe = ph_->Attack({"--method=Probe"});
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_EQ(probe[0].status, 0);
}

// Finding 13: a method that is not in the table at all is a violation too.
TEST_F(AuditTest, Finding13UnknownMethodIsLoggedOnceAndDropsTheConnection) {
  ph_ = PrivhelperProcess::Start({});
  ASSERT_NE(ph_, nullptr);
  std::vector<CallResult> r = ph_->Attack(
      {"--method=/sn.privhelper.v1.PrivHelper/Shell", "--request=x", "--calls=3"});
  ASSERT_EQ(r.size(), 3u);
  for (const CallResult& c : r) EXPECT_NE(c.status, 0);
  EXPECT_GE(ph_->CountLog("permit-table violation"), 1);
  EXPECT_LE(ph_->CountLog("permit-table violation"), 3);  // once per connection
  EXPECT_EQ(ph_->CountLog("Shell"), ph_->CountLog("permit-table violation"));
  EXPECT_TRUE(ph_->Alive());
}

// Issue 26: privhelper's figures reach the agent only inside Probe's read-only answer (a
// fixed-size message: privhelper serves no metrics of its own). As the agent's uid: after
// permit-table violations the answer counts them (each violating call), names every
// refusal kind once, and carries privhelper's own process figures.
TEST_F(AuditTest, ProbeCarriesPrivhelpersFiguresCountingViolations) {
  ph_ = PrivhelperProcess::Start({});
  ASSERT_NE(ph_, nullptr);
  std::vector<CallResult> r = ph_->Attack(
      {"--method=/sn.privhelper.v1.PrivHelper/Shell", "--request=x", "--calls=2"});
  ASSERT_EQ(r.size(), 2u);
  const int violations = ph_->CountLog("permit-table violation");
  ASSERT_GE(violations, 1);
  std::vector<CallResult> probe = ph_->Attack({"--method=Probe"});
  ASSERT_EQ(probe.size(), 1u);
  ASSERT_EQ(probe[0].status, 0);
  const std::string& text = probe[0].response;
  // Counted per violating call (privhelper logs once per connection): between the two.
  const size_t v = text.find("violations: ");
  ASSERT_NE(v, std::string::npos) << text;
  const int counted = std::atoi(text.c_str() + v + std::strlen("violations: "));
  EXPECT_GE(counted, violations) << text;
  EXPECT_LE(counted, 2) << text;
  for (const char* kind : {"REFUSAL_ARGUMENTS", "REFUSAL_GENERATION_NOT_HELD", "REFUSAL_ADMISSION",
                           "REFUSAL_INSTALLATION", "REFUSAL_GENERATION_NOT_READY",
                           "REFUSAL_CAPACITY", "REFUSAL_SANDBOX_BUSY"}) {
    const std::string entry = absl::StrCat("refusal: ", kind, " ");
    const size_t at = text.find(entry);
    EXPECT_NE(at, std::string::npos) << kind << ": " << text;
    EXPECT_EQ(text.find(entry, at + 1), std::string::npos) << kind << " twice";
  }
  EXPECT_NE(text.find("resident_bytes: "), std::string::npos) << text;
  EXPECT_NE(text.find("open_fds: "), std::string::npos) << text;
  EXPECT_TRUE(ph_->Alive());
}

// Finding 4: concurrent calls beyond the bound are refused typed (unavailable on the wire),
// and privhelper's threads stay bounded.
TEST_F(AuditTest, Finding4ConcurrentExecutesBeyondTheBoundAreRefusedAndThreadsStayBounded) {
  SN_REQUIRE_DOCKERD();
  StartRegistered();
  const std::string sb = RandomUuid();
  ASSERT_EQ(Execute(Request(Create(sb))).error_code, "ERROR_CODE_NONE") << ph_->Log();
  const std::string slow = Request(absl::StrCat(
      "exec { sandbox_id: \"", sb, "\" argv: \"sleep\" argv: \"8\" output_limit_bytes: 1024 }"));
  std::vector<CallResult> results;
  std::thread attack([&] {
    results = ph_->Attack({"--method=Execute", "--request=" + slow, "--calls=150", "--parallel",
                           "--channels=2"});
  });
  // Sample the real process while the attack runs (nothing else signals its peak).
  int64_t max_threads = 0;
  for (int i = 0; i < 400 && results.empty(); ++i) {
    max_threads = std::max(max_threads, ReadProcStatus(ph_->pid()).threads);
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  attack.join();
  ASSERT_EQ(results.size(), 150u);
  // Each call is run (at most kMaxConcurrentExecute at once), refused typed by admission, or —
  // when a flood outruns gRPC's thread quota before a handler could even refuse it — refused by
  // gRPC itself with RESOURCE_EXHAUSTED (no handler ran, so nothing started). Which of the two
  // refusals a call gets depends on scheduling; neither lets privhelper grow.
  int ok = 0, refused = 0, quota = 0;
  for (const CallResult& r : results) {
    if (r.status == 8) {  // grpc::StatusCode::RESOURCE_EXHAUSTED
      ++quota;
      continue;
    }
    EXPECT_EQ(r.status, 0) << "a call failed at the transport, not typed";
    if (r.error_code == "ERROR_CODE_NONE") ++ok;
    if (r.refusal == "REFUSAL_ADMISSION") {
      ++refused;
      EXPECT_EQ(r.error_code, "ERROR_CODE_UNAVAILABLE");
    }
  }
  EXPECT_EQ(ok + refused + quota, 150);
  EXPECT_GT(refused, 0) << "admission refused nothing typed";
  EXPECT_LE(ok, privhelper::kMaxConcurrentExecute);
  EXPECT_GE(refused + quota, 150 - privhelper::kMaxConcurrentExecute);
  EXPECT_LE(max_threads, privhelper::kMaxServerThreads + 16) << "threads grew with the calls";
  EXPECT_TRUE(ph_->Alive());
}

// Finding 4: payloads beyond the spec are refused before a byte of them is read, and a liar
// that sends one giant message is bounded by gRPC's memory quota; privhelper keeps serving.
TEST_F(AuditTest, Finding4OversizedPayloadsAreRefusedAndMemoryStaysBounded) {
  SN_REQUIRE_DOCKERD();
  StartRegistered();
  const std::string sb = RandomUuid();
  ASSERT_EQ(Execute(Request(Create(sb))).error_code, "ERROR_CODE_NONE");
  const int64_t before = ReadProcStatus(ph_->pid()).vm_hwm_kib;
  const std::string write = Request(absl::StrCat(
      "write_file { sandbox_id: \"", sb, "\" path: \"/tmp/big\" mode: 420 }"));
  // 79 MB declared honestly: refused typed before any payload is read.
  std::vector<CallResult> declared = ph_->Attack({"--method=Execute", "--request=" + write,
                                                  "--fill_content=82837504", "--calls=10",
                                                  "--parallel"});
  ASSERT_EQ(declared.size(), 10u);
  for (const CallResult& r : declared) {
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.refusal, "REFUSAL_ARGUMENTS");
  }
  EXPECT_LT(ReadProcStatus(ph_->pid()).vm_hwm_kib - before, 16 * 1024);
  // A liar declaring 1 MiB and sending 79 MB in one message, 30 times at once: gRPC refuses
  // each message beyond kMaxRequestMessageBytes; what it buffers meanwhile is bounded by the
  // server's memory quota.
  std::vector<CallResult> liar = ph_->Attack(
      {"--method=Execute", "--request=" + write, "--fill_content=82837504",
       "--declare_payload=1048576", "--chunk_bytes=82837504", "--calls=30", "--parallel",
       "--channels=2"});
  ASSERT_EQ(liar.size(), 30u);
  for (const CallResult& r : liar) EXPECT_NE(r.status, 0);
  const int64_t peak = ReadProcStatus(ph_->pid()).vm_hwm_kib;
  printf("privhelper VmHWM after the liars: %lld KiB\n", static_cast<long long>(peak));
  // A sanitizer build's allocator keeps freed memory in quarantine and adds shadow memory: the
  // bound is a property of the release allocator, asserted there (the tests phase of CI).
  if (!privhelper::kSanitizerBuild) {
    EXPECT_LT(peak, static_cast<int64_t>(3 * privhelper::kServerMemoryQuota / 1024))
        << "privhelper peaked at " << peak << " KiB";
  }
  // Honest maximal writes beyond the admitted payload bytes are refused typed, never failed
  // by the transport.
  std::vector<CallResult> honest = ph_->Attack({"--method=Execute", "--request=" + write,
                                                "--fill_content=50331648", "--calls=6",
                                                "--parallel"});
  ASSERT_EQ(honest.size(), 6u);
  int ok = 0;
  for (const CallResult& r : honest) {
    EXPECT_EQ(r.status, 0);
    if (r.error_code == "ERROR_CODE_NONE") ++ok;
    else EXPECT_EQ(r.refusal, "REFUSAL_ADMISSION");
  }
  EXPECT_GE(ok, 1);
  EXPECT_TRUE(ph_->Alive());
}

// Finding 13: an argument refusal next to an in-flight call leaves that call running; a
// violation on the same connection drops it (and only that connection).
TEST_F(AuditTest, Finding13RefusalsKeepTheConnectionButAViolationDropsItsInFlightCalls) {
  SN_REQUIRE_DOCKERD();
  StartRegistered();
  const std::string sb = RandomUuid();
  ASSERT_EQ(Execute(Request(Create(sb))).error_code, "ERROR_CODE_NONE");
  const std::string container = absl::StrCat("sn-", installation_, "-", sb);
  auto run_with = [&](const std::string& then_method, const std::string& then_request,
                      const std::string& marker) {
    const std::string trigger = ph_->File(marker + ".go");
    const std::string slow = Request(absl::StrCat(
        "exec { sandbox_id: \"", sb, "\" argv: \"sh\" argv: \"-c\" argv: \"touch /tmp/", marker,
        "; sleep 4\" output_limit_bytes: 64 }"));
    std::vector<CallResult> results;
    std::thread attack([&] {
      results = ph_->Attack({"--method=Execute", "--request=" + slow,
                             "--then_method=" + then_method, "--then_request=" + then_request,
                             "--then_after_file=" + trigger, "--deadline_ms=30000"});
    });
    // The slow call is in flight once its command has started in the sandbox.
    const std::string check = absl::StrCat("docker exec ", container, " test -f /tmp/", marker);
    bool started = false;
    for (int i = 0; i < 600 && !started; ++i) {
      started = system(check.c_str()) == 0;
      if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(started);
    { std::ofstream(trigger) << "go"; }
    attack.join();
    return results;
  };

  std::vector<CallResult> refused = run_with(
      "Execute", Request(Create(sb, "busybox", 0)), "m1");
  ASSERT_EQ(refused.size(), 2u);
  for (const CallResult& r : refused) {
    if (r.call == -1) {
      EXPECT_EQ(r.refusal, "REFUSAL_ARGUMENTS");
    } else {
      EXPECT_EQ(r.status, 0);
      EXPECT_EQ(r.error_code, "ERROR_CODE_NONE") << "the honest call was disturbed";
    }
  }

  std::vector<CallResult> violated = run_with("/sn.privhelper.v1.PrivHelper/Shell", "x", "m2");
  ASSERT_EQ(violated.size(), 2u);
  for (const CallResult& r : violated) {
    EXPECT_NE(r.status, 0) << "call " << r.call << " ms " << r.ms << " " << r.error_code;
  }
  EXPECT_EQ(ph_->CountLog("permit-table violation"), 1);
  EXPECT_TRUE(ph_->Alive());
}

// Finding 12: health counts this installation's sandboxes, never another installation's.
TEST_F(AuditTest, Finding12ProbeCountsOnlyThisInstallationsSandboxes) {
  SN_REQUIRE_DOCKERD();
  StartRegistered();
  const std::string running = RandomUuid(), retained = RandomUuid();
  ASSERT_EQ(Execute(Request(Create(running))).error_code, "ERROR_CODE_NONE");
  ASSERT_EQ(Execute(Request(Create(retained))).error_code, "ERROR_CODE_NONE");
  ASSERT_EQ(Execute(Request(absl::StrCat("kill_compute { sandbox_id: \"", retained, "\" }")))
                .error_code,
            "ERROR_CODE_NONE");
  // Another installation's container on the same daemon.
  const std::string foreign = RandomUuid();
  const std::string cmd = absl::StrCat("docker run -d --network none --label sn.installation=",
                                       foreign, " --label sn.sandbox=", RandomUuid(), " ", image_,
                                       " sleep 600 >/dev/null");
  ASSERT_EQ(system(cmd.c_str()), 0);
  std::vector<CallResult> probe = ph_->Attack({"--method=Probe"});
  RemoveInstallationContainers(foreign);
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_NE(probe[0].response.find("sandboxes_counted: true"), std::string::npos)
      << probe[0].response;
  EXPECT_NE(probe[0].response.find("sandboxes_active: 1 "), std::string::npos)
      << probe[0].response;
  EXPECT_NE(probe[0].response.find("sandboxes_retained: 1 "), std::string::npos)
      << probe[0].response;
}

// Finding 2: a sandbox created by the agent's uid gets the whole profile, whatever it asked.
TEST_F(AuditTest, Finding2EverySandboxRunsUnderTheProfile) {
  SN_REQUIRE_DOCKERD();
  StartRegistered();
  const std::string sb = RandomUuid();
  ASSERT_EQ(Execute(Request(Create(sb, "busybox", 500, 64 << 20))).error_code, "ERROR_CODE_NONE");
  docker::BeastDockerEngine e(kHostDockerSocket);
  docker::RequestOptions o;
  o.timeout = absl::Seconds(30);
  auto r = e.Request("GET", absl::StrCat("/v1.41/containers/sn-", installation_, "-", sb, "/json"),
                     "", o);
  ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
  nlohmann::json doc = nlohmann::json::parse(r->body);
  const nlohmann::json& hc = doc["HostConfig"];
  EXPECT_EQ(hc["PidsLimit"], native::profile::kPidsLimit);
  EXPECT_EQ(hc["Memory"], 64 << 20);
  EXPECT_EQ(hc["MemorySwap"], 64 << 20);
  EXPECT_EQ(hc["NanoCpus"], 500000000);
  EXPECT_EQ(hc["NetworkMode"], "none");
  EXPECT_EQ(hc["LogConfig"]["Type"], native::profile::kLogDriver);
  EXPECT_EQ(hc["Init"], true);
  EXPECT_EQ(hc["CapDrop"], nlohmann::json::array({"ALL"}));
  EXPECT_EQ(hc["CapAdd"].size(), std::size(native::profile::kCapabilities));
  EXPECT_NE(hc["SecurityOpt"].dump().find("no-new-privileges"), std::string::npos) << hc.dump();
  EXPECT_NE(hc["Ulimits"].dump().find("nofile"), std::string::npos) << hc.dump();
}

// Findings 3 and 8: the native helper privhelper starts for the agent runs without any
// privilege, and an exec printing 300 MB keeps it within the output limit's memory.
TEST_F(AuditTest, Finding3And8TheHelperIsUnprivilegedAndStaysWithinTheOutputBound) {
  SN_REQUIRE_DOCKERD();
  StartRegistered();
  const std::string sb = RandomUuid();
  ASSERT_EQ(Execute(Request(Create(sb))).error_code, "ERROR_CODE_NONE");
  std::vector<pid_t> helpers = ChildrenOf(ph_->pid());
  ASSERT_EQ(helpers.size(), 1u) << "one helper for the one held generation";
  const pid_t helper = helpers[0];
  std::ifstream status_file(absl::StrCat("/proc/", helper, "/status"));
  std::string status((std::istreambuf_iterator<char>(status_file)), {});
  EXPECT_NE(status.find("NoNewPrivs:\t1"), std::string::npos) << status;
  EXPECT_NE(status.find("Seccomp:\t2"), std::string::npos) << status;
  for (const char* cap : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    EXPECT_NE(status.find(absl::StrCat(cap, ":\t0000000000000000")), std::string::npos) << cap;
  }
  std::ifstream environ_file(absl::StrCat("/proc/", helper, "/environ"));
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(environ_file)), {}), "");
  // It inherited its socketpair, stdio and its generation's lease (fd 4) only; anything else it
  // holds is a socket it opened itself (kept Docker connections) or one of its own epoll sets
  // (its threads wait for calls in them), never a file of privhelper's.
  bool lease = false;
  for (const auto& e : std::filesystem::directory_iterator(absl::StrCat("/proc/", helper, "/fd"))) {
    const std::string fd = e.path().filename();
    if (fd == "0" || fd == "1" || fd == "2" || fd == "3") continue;
    const std::string target = std::filesystem::read_symlink(e.path());
    if (fd == "4" && absl::EndsWith(target, "/node/generations/1.lease")) {
      lease = true;
      continue;
    }
    EXPECT_TRUE(target.rfind("socket:", 0) == 0 || target == "anon_inode:[eventpoll]")
        << "fd " << fd << " -> " << target;
  }
  EXPECT_TRUE(lease) << "the helper holds its generation's lease";

  const int64_t before = ReadProcStatus(helper).vm_hwm_kib;
  CallResult r = Execute(Request(absl::StrCat(
      "exec { sandbox_id: \"", sb, "\" argv: \"sh\" argv: \"-c\" argv: \"yes 0123456789abcdef"
      " | head -c 314572800\" output_limit_bytes: 33554432 }")));
  EXPECT_EQ(r.error_code, "ERROR_CODE_NONE");
  const int64_t grew = ReadProcStatus(helper).vm_hwm_kib - before;
  printf("helper VmHWM grew by %lld KiB for a 32 MiB output limit\n",
         static_cast<long long>(grew));
  if (!privhelper::kSanitizerBuild) {  // as above: asserted for the release allocator
    EXPECT_LT(grew, 48 * 1024) << "the helper grew by " << grew << " KiB for a 32 MiB limit";
  }
}

}  // namespace
}  // namespace sn::testing
