// Execute end to end on the real dockerd: privhelper's HelperManager spawns the real
// native_helper, which runs every §5 operation against the Engine API. Skips loudly when
// dockerd is not running (fails under CI=true); never starts dockerd itself.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <signal.h>

#include <cstdio>
#include <thread>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/docker/docker_provider.h"
#include "common/wire/limits.h"
#include "privhelper/helpers/helper_manager.h"
#include "privhelper/helpers/sanitizer_build.h"
#include "privhelper/native/sandbox_profile.h"
#include "privhelper/rpc/server.h"
#include "proto/privhelper.grpc.pb.h"
#include "tests/privhelper/test_util.h"

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;
namespace profile = ::sn::native::profile;
constexpr char kDockerSocket[] = "/var/run/docker.sock";
constexpr char kImage[] = "sn-test-busybox:1";

std::string Runfile(const std::string& rel) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  return (srcdir && ws) ? std::string(srcdir) + "/" + ws + "/" + rel : rel;
}

// A random v4 uuid (tests run in PID namespaces, so pids do not tell parallel runs apart).
std::string Uuid(int) {
  unsigned char b[16];
  std::ifstream("/dev/urandom", std::ios::binary).read(reinterpret_cast<char*>(b), sizeof b);
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  char out[37];
  snprintf(out, sizeof out,
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return out;
}

// Peak resident memory of a process (VmHWM, bytes), 0 when unreadable.
int64_t PeakResidentBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return out;
}

bool DockerAnswers(std::string* why) {
  docker::BeastDockerEngine engine(kDockerSocket);
  absl::StatusOr<docker::HttpResponse> ping = engine.Request("GET", "/_ping", "", {});
  if (ping.ok() && ping->status == 200) return true;
  *why = ping.ok() ? "status " + std::to_string(ping->status) : std::string(ping.status().message());
  return false;
}

// Imports a busybox-static image (no registry) once.
bool ImportImage() {
  sn::testing::ShortTempDir dir;
  std::string root = dir.File("rootfs");
  std::string cmd = absl::StrCat(
      "set -e; mkdir -p ", root, "/bin ", root, "/tmp; chmod 1777 ", root, "/tmp; cp /bin/busybox ",
      root, "/bin/; for a in sh sleep cat echo ls head true false; do ln -s busybox ", root,
      "/bin/$a; done; tar -C ", root, " -cf - . | docker import - ", kImage, " >/dev/null");
  return system(cmd.c_str()) == 0;
}

class ExecuteE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!DockerAnswers(&why)) {
      if (sn::testing::InCi()) FAIL() << "dockerd not answering (CI=true): " << why;
      GTEST_SKIP() << "SKIPPED LOUDLY: dockerd not answering on " << kDockerSocket << ": " << why;
    }
    static bool imported = ImportImage();
    ASSERT_TRUE(imported) << "docker import of the busybox image failed";
    installation_ = Uuid(1);
    helpers_ = MakeManager(installation_);
  }

  void TearDown() override {
    helpers_.reset();
    if (!installation_.empty()) RemoveInstallation(installation_);
  }

  std::shared_ptr<HelperManager> MakeManager(const std::string& installation) {
    HelperOptions o;
    o.helper_path = Runfile("privhelper/native/native_helper");
    o.installation_id = installation;
    o.docker_socket = kDockerSocket;
    return std::make_shared<HelperManager>(o);
  }

  static void RemoveInstallation(const std::string& installation) {
    docker::BeastDockerEngine e(kDockerSocket);
    nlohmann::json filters = {{"label", {std::string("sn.installation=") + installation}}};
    std::string q;
    for (unsigned char c : filters.dump()) {
      char b[4];
      snprintf(b, sizeof b, "%%%02X", c);
      q += b;
    }
    auto r = e.Request("GET", "/v1.41/containers/json?all=1&filters=" + q, "", {});
    if (!r.ok()) return;
    nlohmann::json list = nlohmann::json::parse(r->body, nullptr, false);
    if (!list.is_array()) return;
    for (const auto& c : list) {
      (void)e.Request("DELETE", "/v1.41/containers/" + c["Id"].get<std::string>() + "?force=1", "", {});
    }
  }

  // What privhelper's generation store would resolve: the image name is the native image
  // here, and the capacity is `max_active` (default 16).
  static ResolvedCall Resolve(const pb::ExecuteRequest& req, int64_t max_active = 16) {
    ResolvedCall r;
    if (req.has_create()) r.native_image = req.create().image();
    r.max_active = max_active;
    r.max_retained = 64;
    return r;
  }

  pb::ExecuteResponse Run(pb::ExecuteRequest req, HelperManager* m = nullptr,
                          int64_t max_active = 16) {
    req.set_request_id(Uuid(2));
    req.set_generation(1);
    if (req.budget_ms() == 0) req.set_budget_ms(60000);
    absl::StatusOr<pb::ExecuteResponse> r =
        (m ? m : helpers_.get())->Execute(req, Resolve(req, max_active), [] { return false; });
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : pb::ExecuteResponse();
  }

  pb::ExecuteRequest Create(const std::string& sandbox, std::vector<std::string> command = {"sleep", "3600"}) {
    pb::ExecuteRequest req;
    pb::CreateArgs* c = req.mutable_create();
    c->set_sandbox_id(sandbox);
    c->set_image(kImage);
    for (auto& s : command) c->add_command(s);
    (*c->mutable_env())["GREETING"] = "hi";
    c->set_cpu_millis(500);
    c->set_memory_bytes(64 << 20);
    return req;
  }

  static pb::ExecuteRequest Op(const std::string& op, const std::string& sandbox) {
    pb::ExecuteRequest req;
    pb::SandboxArgs a;
    a.set_sandbox_id(sandbox);
    if (op == "kill") *req.mutable_kill() = a;
    if (op == "kill_compute") *req.mutable_kill_compute() = a;
    if (op == "delete_retained") *req.mutable_delete_retained() = a;
    if (op == "inspect") *req.mutable_inspect() = a;
    return req;
  }

  static pb::ExecuteRequest Exec(const std::string& sandbox, std::vector<std::string> argv,
                                 std::string stdin_bytes = "", int64_t limit = 1 << 20) {
    pb::ExecuteRequest req;
    pb::ExecArgs* e = req.mutable_exec();
    e->set_sandbox_id(sandbox);
    for (auto& s : argv) e->add_argv(s);
    e->set_stdin(stdin_bytes);
    e->set_output_limit_bytes(limit);
    return req;
  }

  static pb::ExecuteRequest Resume(const std::string& sandbox, bool reconciliation_only) {
    pb::ExecuteRequest req;
    req.mutable_resume()->set_sandbox_id(sandbox);
    req.mutable_resume()->set_reconciliation_only(reconciliation_only);
    return req;
  }

  // The daemon's view of a container (GET /containers/{id}/json).
  static nlohmann::json InspectContainer(const std::string& native_id) {
    docker::BeastDockerEngine e(kDockerSocket);
    auto r = e.Request("GET", "/v1.41/containers/" + native_id + "/json", "", {});
    if (!r.ok() || r->status != 200) return nlohmann::json();
    return nlohmann::json::parse(r->body, nullptr, false);
  }

  std::string installation_;
  std::shared_ptr<HelperManager> helpers_;
};

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
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  caller.join();
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

TEST_F(ExecuteE2eTest, ExecuteRpcThroughPrivhelperRunsOnTheHelper) {
  sn::testing::ShortTempDir dir;
  ServerOptions o;
  o.socket_path = dir.File("ph.sock");
  o.agent_uid = geteuid();
  o.helpers = helpers_;
  o.installation_id = installation_;
  auto server = PrivHelperServer::Start(
      o, std::make_unique<DockerProvider>(std::make_unique<docker::BeastDockerEngine>(kDockerSocket)));
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = pb::PrivHelper::NewStub(
      grpc::CreateChannel("unix:" + o.socket_path, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  pb::ExecuteRequest req = Op("inspect", Uuid(17));
  req.set_request_id(Uuid(18));
  req.set_generation(1);
  req.set_budget_ms(30000);
  req.set_installation_id(installation_);
  pb::ExecuteResponse resp;
  grpc::Status s = stub->Execute(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.sandbox().state(), pb::SANDBOX_STATE_ABSENT);

  // A caller naming another installation is refused before any native I/O.
  grpc::ClientContext other_ctx;
  pb::ExecuteRequest other = req;
  other.set_installation_id(Uuid(99));
  EXPECT_EQ(stub->Execute(&other_ctx, other, &resp).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);

  grpc::ClientContext bad_ctx;
  pb::ExecuteRequest bad = req;
  bad.set_budget_ms(0);
  EXPECT_EQ(stub->Execute(&bad_ctx, bad, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  (*server)->Shutdown();
}

// Finding 3 on the real daemon: an exec printing ~300 MB with the largest output limit keeps
// exactly the limit, reports truncation and the command's own exit code (the rest of the
// stream was drained and discarded), and the helper's peak memory stays within the limit plus
// its baseline: the output is never buffered beyond the limit.
TEST_F(ExecuteE2eTest, ExecPrintingHundredsOfMegabytesKeepsTheLimitAndTheHelperStaysSmall) {
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
TEST_F(ExecuteE2eTest, ReadFileOfAHugeFileKeepsAtMostMaxBytes) {
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
TEST_F(ExecuteE2eTest, LargeWriteFileCostsItsBytesOnceInTheHelper) {
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
TEST_F(ExecuteE2eTest, SandboxRunsWithTheProfile) {
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
TEST_F(ExecuteE2eTest, ForkBombStopsAtThePidsLimit) {
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
}  // namespace sn::privhelper
