// Execute end to end on the real dockerd: privhelper's HelperManager spawns the real
// native_helper, which runs every §5 operation against the Engine API. Skips loudly when
// dockerd is not running (fails under CI=true); never starts dockerd itself.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/docker/docker_provider.h"
#include "privhelper/helpers/helper_manager.h"
#include "privhelper/rpc/server.h"
#include "proto/privhelper.grpc.pb.h"
#include "tests/privhelper/native/docker_e2e_fixture.h"

namespace sn::privhelper::e2e {
namespace {

class ExecuteE2eTest : public DockerE2eFixture {};

TEST_F(ExecuteE2eTest, SandboxLifecycleFollowsTheStateTable) {
  const std::string sb = Uuid(3);
  pb::ExecuteResponse created = Run(Create(sb));
  ASSERT_EQ(created.error_code(), pb::ERROR_CODE_NONE);
  ASSERT_TRUE(created.has_sandbox());
  EXPECT_EQ(created.sandbox().state(), pb::SANDBOX_STATE_RUNNING);
  const std::string native_id = created.sandbox().native_id();
  EXPECT_FALSE(native_id.empty());

  // create again: same arguments -> the existing native_id; different -> conflict.
  pb::ExecuteResponse again = Run(Create(sb));
  EXPECT_EQ(again.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(again.sandbox().native_id(), native_id);
  EXPECT_EQ(Run(Create(sb, {"sleep", "7200"})).error_code(), pb::ERROR_CODE_CONFLICT);

  pb::ExecuteResponse inspected = Run(Op("inspect", sb));
  EXPECT_EQ(inspected.sandbox().state(), pb::SANDBOX_STATE_RUNNING);
  EXPECT_EQ(inspected.sandbox().native_id(), native_id);

  EXPECT_EQ(Run(Op("delete_retained", sb)).error_code(), pb::ERROR_CODE_CONFLICT);
  EXPECT_EQ(Run(Op("kill_compute", sb)).error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(Run(Op("inspect", sb)).sandbox().state(), pb::SANDBOX_STATE_RETAINED);
  EXPECT_EQ(Run(Op("kill_compute", sb)).error_code(), pb::ERROR_CODE_NONE);  // idempotent
  EXPECT_EQ(Run(Exec(sb, {"true"})).error_code(), pb::ERROR_CODE_CONFLICT);
  EXPECT_EQ(Run(Create(sb)).error_code(), pb::ERROR_CODE_CONFLICT);

  pb::ExecuteResponse reconciled = Run(Resume(sb, true));
  EXPECT_EQ(reconciled.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(reconciled.sandbox().state(), pb::SANDBOX_STATE_RETAINED);
  pb::ExecuteResponse resumed = Run(Resume(sb, false));
  EXPECT_EQ(resumed.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(resumed.sandbox().state(), pb::SANDBOX_STATE_RUNNING);
  EXPECT_EQ(resumed.sandbox().native_id(), native_id);

  EXPECT_EQ(Run(Op("kill", sb)).error_code(), pb::ERROR_CODE_NONE);
  pb::ExecuteResponse gone = Run(Op("inspect", sb));
  EXPECT_EQ(gone.sandbox().state(), pb::SANDBOX_STATE_ABSENT);
  EXPECT_EQ(gone.sandbox().native_id(), "");
  EXPECT_EQ(Run(Op("kill", sb)).error_code(), pb::ERROR_CODE_NOT_FOUND);
}

TEST_F(ExecuteE2eTest, UnknownSandboxIsNotFoundOrAbsent) {
  const std::string sb = Uuid(4);
  EXPECT_EQ(Run(Op("inspect", sb)).sandbox().state(), pb::SANDBOX_STATE_ABSENT);
  EXPECT_EQ(Run(Op("kill", sb)).error_code(), pb::ERROR_CODE_NOT_FOUND);
  EXPECT_EQ(Run(Op("kill_compute", sb)).error_code(), pb::ERROR_CODE_NOT_FOUND);
  EXPECT_EQ(Run(Op("delete_retained", sb)).error_code(), pb::ERROR_CODE_NOT_FOUND);
  EXPECT_EQ(Run(Resume(sb, false)).error_code(), pb::ERROR_CODE_NOT_FOUND);
  EXPECT_EQ(Run(Exec(sb, {"true"})).error_code(), pb::ERROR_CODE_NOT_FOUND);
}

TEST_F(ExecuteE2eTest, ExecReturnsOutputsExitCodeAndBoundsOutput) {
  const std::string sb = Uuid(5);
  ASSERT_EQ(Run(Create(sb)).error_code(), pb::ERROR_CODE_NONE);
  pb::ExecuteResponse r = Run(Exec(sb, {"sh", "-c", "echo out; echo err >&2; echo $GREETING; exit 3"}));
  ASSERT_EQ(r.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(r.exec().exit_code(), 3);
  EXPECT_EQ(r.exec().stdout(), "out\nhi\n");
  EXPECT_EQ(r.exec().stderr(), "err\n");
  EXPECT_FALSE(r.exec().truncated());

  pb::ExecuteResponse in = Run(Exec(sb, {"cat"}, "from stdin"));
  EXPECT_EQ(in.exec().stdout(), "from stdin");
  EXPECT_EQ(in.exec().exit_code(), 0);

  pb::ExecuteResponse cut = Run(Exec(sb, {"sh", "-c", "echo 0123456789"}, "", 4));
  EXPECT_EQ(cut.exec().stdout(), "0123");
  EXPECT_TRUE(cut.exec().truncated());
}

// The container is killed while the command runs (a daemon shutdown does the same to every
// container). The outcome is the daemon's own exec record: the command died of SIGKILL (137),
// or, when the daemon has not recorded the exit yet, uncertain. Never a clean result, never
// another code.
TEST_F(ExecuteE2eTest, ExecWhoseContainerIsKilledMeanwhileIsKilledOrUncertain) {
  const std::string sb = Uuid(9);
  pb::ExecuteResponse created = Run(Create(sb));
  ASSERT_EQ(created.error_code(), pb::ERROR_CODE_NONE);
  const std::string native = created.sandbox().native_id();
  pb::ExecuteResponse r;
  std::thread t([&] { r = Run(Exec(sb, {"sleep", "30"})); });
  docker::BeastDockerEngine e(kDockerSocket);
  bool running = false;
  // Until the exec's process runs (<= 30 s): listed in ExecIDs is not enough, a kill between
  // the exec's creation and its start makes the daemon record 126 (could not execute).
  for (int i = 0; i < 3000 && !running; ++i) {
    auto c = e.Request("GET", "/v1.41/containers/" + native + "/json", "", {});
    nlohmann::json doc = c.ok() ? nlohmann::json::parse(c->body, nullptr, false) : nlohmann::json();
    if (doc.is_object() && doc["ExecIDs"].is_array() && !doc["ExecIDs"].empty()) {
      auto x = e.Request("GET", "/v1.41/exec/" + doc["ExecIDs"][0].get<std::string>() + "/json",
                         "", {});
      nlohmann::json ex = x.ok() ? nlohmann::json::parse(x->body, nullptr, false) : nlohmann::json();
      running = ex.is_object() && ex["Running"] == true && ex["Pid"].is_number() && ex["Pid"] != 0;
    }
    if (!running) usleep(10000);
  }
  ASSERT_TRUE(running) << "the exec never started";
  auto k = e.Request("POST", "/v1.41/containers/" + native + "/kill", "", {});
  ASSERT_TRUE(k.ok() && k->status == 204) << (k.ok() ? k->body : k.status().ToString());
  t.join();
  EXPECT_TRUE(r.native_call_started());
  if (r.error_code() == pb::ERROR_CODE_NONE) {
    ASSERT_TRUE(r.has_exec());
    EXPECT_EQ(r.exec().exit_code(), 137);
  } else {
    EXPECT_EQ(r.error_code(), pb::ERROR_CODE_UNCERTAIN);
    EXPECT_FALSE(r.has_exec());
  }
}

TEST_F(ExecuteE2eTest, WriteThenReadFileRoundTripsAndTruncates) {
  const std::string sb = Uuid(6);
  ASSERT_EQ(Run(Create(sb)).error_code(), pb::ERROR_CODE_NONE);
  pb::ExecuteRequest w;
  w.mutable_write_file()->set_sandbox_id(sb);
  w.mutable_write_file()->set_path("/tmp/greeting.txt");
  w.mutable_write_file()->set_content("hello, sandbox");
  w.mutable_write_file()->set_mode(0640);
  pb::ExecuteResponse wr = Run(w);
  ASSERT_EQ(wr.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(wr.write_file().size(), 14);

  pb::ExecuteRequest r;
  r.mutable_read_file()->set_sandbox_id(sb);
  r.mutable_read_file()->set_path("/tmp/greeting.txt");
  r.mutable_read_file()->set_max_bytes(1 << 20);
  pb::ExecuteResponse rr = Run(r);
  ASSERT_EQ(rr.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(rr.read_file().content(), "hello, sandbox");
  EXPECT_EQ(rr.read_file().size(), 14);
  EXPECT_FALSE(rr.read_file().truncated());

  r.mutable_read_file()->set_max_bytes(5);
  pb::ExecuteResponse part = Run(r);
  EXPECT_EQ(part.read_file().content(), "hello");
  EXPECT_EQ(part.read_file().size(), 14);
  EXPECT_TRUE(part.read_file().truncated());

  pb::ExecuteResponse mode = Run(Exec(sb, {"ls", "-l", "/tmp/greeting.txt"}));
  EXPECT_EQ(mode.exec().stdout().substr(0, 10), "-rw-r-----") << mode.exec().stdout();

  r.mutable_read_file()->set_path("/tmp/missing.txt");
  EXPECT_EQ(Run(r).error_code(), pb::ERROR_CODE_FAILED);
  r.mutable_read_file()->set_path("/tmp/../etc");
  EXPECT_EQ(Run(r).error_code(), pb::ERROR_CODE_INVALID);
}

TEST_F(ExecuteE2eTest, SymlinkToHostPathStaysInsideTheSandbox) {
  const std::string sb = Uuid(7);
  ASSERT_EQ(Run(Create(sb)).error_code(), pb::ERROR_CODE_NONE);
  // /tmp/escape -> /etc/hostname-probe: a path that exists on the host but not in the image.
  ASSERT_EQ(Run(Exec(sb, {"sh", "-c", "ln -s /../../../../etc/os-release /tmp/escape"})).exec().exit_code(), 0);
  pb::ExecuteRequest r;
  r.mutable_read_file()->set_sandbox_id(sb);
  r.mutable_read_file()->set_path("/tmp/escape");
  r.mutable_read_file()->set_max_bytes(1 << 20);
  EXPECT_EQ(Run(r).error_code(), pb::ERROR_CODE_FAILED);  // no /etc/os-release in the image
}

TEST_F(ExecuteE2eTest, CapacityLimitRefusesCreateBeyondMaxActive) {
  ASSERT_EQ(Run(Create(Uuid(8)), nullptr, /*max_active=*/1).error_code(), pb::ERROR_CODE_NONE);
  EXPECT_EQ(Run(Create(Uuid(9)), nullptr, /*max_active=*/1).error_code(),
            pb::ERROR_CODE_CAPACITY);
}

TEST_F(ExecuteE2eTest, MissingImageFails) {
  pb::ExecuteRequest missing = Create(Uuid(10));
  missing.mutable_create()->set_image("sn-test-no-such-image:0");
  pb::ExecuteResponse r = Run(missing);
  EXPECT_EQ(r.error_code(), pb::ERROR_CODE_FAILED);
  EXPECT_FALSE(r.has_create_settled());
}

// The sandbox profile runs an init process (docker-init) as PID 1, so the daemon starts a
// sandbox whose command does not exist: create answers running with the native id, then the
// init cannot run the command and exits, leaving the sandbox retained (compute stopped), never
// absent. (A start the daemon refuses answers failed with the create_settled receipt:
// docker_ops_test.)
TEST_F(ExecuteE2eTest, MissingCommandStartsTheInitThenTheSandboxIsRetained) {
  const std::string sb = Uuid(11);
  pb::ExecuteResponse created = Run(Create(sb, {"/no/such/binary"}));
  ASSERT_EQ(created.error_code(), pb::ERROR_CODE_NONE);
  EXPECT_TRUE(created.native_call_started());
  EXPECT_FALSE(created.sandbox().native_id().empty());
  pb::SandboxState state = pb::SANDBOX_STATE_RUNNING;
  for (int i = 0; i < 200 && state == pb::SANDBOX_STATE_RUNNING; ++i) {  // <= 20 s
    state = Run(Op("inspect", sb)).sandbox().state();
    if (state == pb::SANDBOX_STATE_RUNNING) usleep(100000);
  }
  EXPECT_EQ(state, pb::SANDBOX_STATE_RETAINED);
}

TEST_F(ExecuteE2eTest, AnotherInstallationsSandboxesAreInvisible) {
  const std::string sb = Uuid(13);
  ASSERT_EQ(Run(Create(sb)).error_code(), pb::ERROR_CODE_NONE);
  const std::string other = Uuid(14);
  auto other_helpers = MakeManager(other);
  EXPECT_EQ(Run(Op("inspect", sb), other_helpers.get()).sandbox().state(), pb::SANDBOX_STATE_ABSENT);
  EXPECT_EQ(Run(Op("kill", sb), other_helpers.get()).error_code(), pb::ERROR_CODE_NOT_FOUND);
  EXPECT_EQ(Run(Op("inspect", sb)).sandbox().state(), pb::SANDBOX_STATE_RUNNING);
  other_helpers.reset();
  RemoveInstallation(other);
}

TEST_F(ExecuteE2eTest, HelperCountsLiveUntilReapedAndOneHelperServesAGeneration) {
  EXPECT_EQ(helpers_->live_helpers(), 0);
  Run(Op("inspect", Uuid(15)));
  pid_t pid = helpers_->helper_pid(1);
  EXPECT_GT(pid, 0);
  EXPECT_EQ(helpers_->live_helpers(), 1);
  Run(Op("inspect", Uuid(16)));
  EXPECT_EQ(helpers_->helper_pid(1), pid);
  std::weak_ptr<HelperManager> weak = helpers_;
  helpers_.reset();  // closes the socket and waits for waitpid
  EXPECT_TRUE(weak.expired());
  EXPECT_NE(kill(pid, 0), 0);  // reaped: the pid no longer exists
}

TEST_F(ExecuteE2eTest, BudgetExpiryAnswersAtOnceAndTheHelperStaysCounted) {
  const std::string sb = Uuid(19);
  ASSERT_EQ(Run(Create(sb)).error_code(), pb::ERROR_CODE_NONE);
  pb::ExecuteRequest slow = Exec(sb, {"sleep", "30"});
  slow.set_request_id(Uuid(20));
  slow.set_generation(1);
  slow.set_budget_ms(300);
  absl::Time start = absl::Now();
  absl::StatusOr<pb::ExecuteResponse> r = helpers_->Execute(slow, Resolve(slow), [] { return false; });
  // Whichever clock fires first: privhelper's (DeadlineExceeded) or the helper's, which then
  // answers uncertain because the exec had started. Never a success, never late.
  if (r.ok()) {
    EXPECT_EQ(r->error_code(), pb::ERROR_CODE_UNCERTAIN);
    EXPECT_TRUE(r->native_call_started());
  } else {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(helpers_->live_helpers(), 1);
  // The helper still serves after the cancelled call.
  EXPECT_EQ(Run(Op("inspect", sb)).sandbox().state(), pb::SANDBOX_STATE_RUNNING);
}

TEST_F(ExecuteE2eTest, HelperKilledMidCallFailsTheCallAndIsReapedThenReplaced) {
  const std::string sb = Uuid(21);
  ASSERT_EQ(Run(Create(sb)).error_code(), pb::ERROR_CODE_NONE);
  pid_t pid = helpers_->helper_pid(1);
  ASSERT_GT(pid, 0);
  pb::ExecuteRequest slow = Exec(sb, {"sleep", "30"});
  slow.set_request_id(Uuid(22));
  slow.set_generation(1);
  slow.set_budget_ms(60000);
  absl::StatusOr<pb::ExecuteResponse> result;
  std::thread caller([&] { result = helpers_->Execute(slow, Resolve(slow), [] { return false; }); });
  // Kill only once the call holds this helper: killed earlier, the call would (rightly) start
  // a new helper and succeed there, which is not what this test is about.
  const bool holding = helpers_->WaitForCallsInFlight(1, 1, absl::Seconds(30));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  caller.join();
  ASSERT_TRUE(holding);
  EXPECT_FALSE(result.ok());  // aborted in flight, or never delivered: never a success
  EXPECT_TRUE(helpers_->WaitUntilNoLiveHelpers(absl::Seconds(10)));
  EXPECT_EQ(Run(Op("inspect", sb)).sandbox().state(), pb::SANDBOX_STATE_RUNNING);
  EXPECT_NE(helpers_->helper_pid(1), pid);
}

TEST_F(ExecuteE2eTest, ThirtyTwoConcurrentCallsAllComplete) {
  const std::string sb = Uuid(23);
  ASSERT_EQ(Run(Create(sb)).error_code(), pb::ERROR_CODE_NONE);
  std::vector<std::thread> callers;
  std::vector<absl::StatusOr<pb::ExecuteResponse>> results(32);
  for (int i = 0; i < 32; ++i) {
    callers.emplace_back([&, i] {
      pb::ExecuteRequest req = (i % 2 == 0) ? Op("inspect", sb) : Exec(sb, {"echo", std::to_string(i)});
      req.set_request_id(Uuid(24));
      req.set_generation(1);
      req.set_budget_ms(120000);
      results[i] = helpers_->Execute(req, Resolve(req), [] { return false; });
    });
  }
  for (std::thread& t : callers) t.join();
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status();
    EXPECT_EQ(results[i]->error_code(), pb::ERROR_CODE_NONE) << i;
    if (i % 2 == 1) {
      EXPECT_EQ(results[i]->exec().stdout(), std::to_string(i) + "\n");
    }
  }
}

}  // namespace
}  // namespace sn::privhelper::e2e
