// The fixture of the end-to-end tests on the real dockerd: privhelper's HelperManager spawns
// the real native_helper (through the sandboxed spawn path), which runs §5 operations against
// the Engine API. Skips loudly when dockerd is not running (fails under CI=true); never starts
// dockerd itself. Imports a busybox-static image (no registry) once per process.
#ifndef SANDBOX_NODE_TESTS_PRIVHELPER_NATIVE_DOCKER_E2E_FIXTURE_H_
#define SANDBOX_NODE_TESTS_PRIVHELPER_NATIVE_DOCKER_E2E_FIXTURE_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/helpers/helper_manager.h"
#include "proto/privhelper.pb.h"
#include "tests/privhelper/test_util.h"

namespace sn::privhelper::e2e {

namespace pb = ::sn::privhelper::v1;
inline constexpr char kDockerSocket[] = "/var/run/docker.sock";
inline constexpr char kImage[] = "sn-test-busybox:1";

std::string Runfile(const std::string& rel);
// A random v4 uuid (tests run in PID namespaces, so pids do not tell parallel runs apart).
std::string Uuid(int);
// Peak resident memory of a process (VmHWM, bytes), 0 when unreadable.
int64_t PeakResidentBytes(pid_t pid);
std::string ReadText(const std::string& path);
bool DockerAnswers(std::string* why);
bool ImportImage();

class DockerE2eFixture : public ::testing::Test {
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
    o.provider_flags = {std::string("--docker_socket=") + kDockerSocket};
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

}  // namespace sn::privhelper::e2e

#endif  // SANDBOX_NODE_TESTS_PRIVHELPER_NATIVE_DOCKER_E2E_FIXTURE_H_
