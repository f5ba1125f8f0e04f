// The fixture of the audit tests: the real privhelper executable with generation 1 prepared
// from a signed release (audit_fixture.h), attacked as the agent's uid.
#ifndef SANDBOX_NODE_TESTS_PRIVHELPER_AUDIT_AUDIT_TEST_BASE_H_
#define SANDBOX_NODE_TESTS_PRIVHELPER_AUDIT_AUDIT_TEST_BASE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/docker/inventory.h"
#include "tests/privhelper/audit/audit_fixture.h"

namespace sn::testing {

class RegisteredPrivhelperTest : public ::testing::Test {
 protected:
  void SetUp() override { SN_REQUIRE_ROOT(); }
  void TearDown() override {
    if (ph_ != nullptr) RemoveInstallationContainers(ph_->InstallationId());
  }

  // privhelper with generation 1 prepared (from a signed release whose image archive holds
  // the busybox image; its specification names it "busybox").
  void StartRegistered(PrivhelperProcess::Options options = {}) {
    image_ = BusyboxImageId();
    ASSERT_FALSE(image_.empty()) << "docker import of the busybox image failed";
    ph_ = PrivhelperProcess::Start(options);
    ASSERT_NE(ph_, nullptr);
    installation_ = ph_->InstallationId();
    std::vector<CallResult> steps = ph_->PrepareBusybox(1);
    ASSERT_EQ(steps.size(), 4u) << ph_->Log();
    ASSERT_EQ(steps.back().state, "GENERATION_STATE_READY") << ph_->Log();
  }

  // An Execute request in text format with the envelope filled in.
  std::string Request(const std::string& operation, int64_t generation = 1,
                      int64_t budget_ms = 60000) const {
    return absl::StrCat("request_id: \"", RandomUuid(), "\" generation: ", generation,
                        " budget_ms: ", budget_ms, " installation_id: \"", installation_, "\" ",
                        operation);
  }
  static std::string Create(const std::string& sandbox, const std::string& image = "busybox",
                            int64_t cpu = 100, int64_t memory = 64 << 20) {
    return absl::StrCat("create { sandbox_id: \"", sandbox, "\" image: \"", image,
                        "\" command: \"sleep\" command: \"3600\" cpu_millis: ", cpu,
                        " memory_bytes: ", memory, " }");
  }
  CallResult Execute(const std::string& text, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--method=Execute", "--request=" + text};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<CallResult> r = ph_->Attack(args);
    EXPECT_EQ(r.size(), 1u);
    return r.empty() ? CallResult{} : r[0];
  }
  // This installation's containers, from the daemon itself.
  size_t Containers() const {
    docker::BeastDockerEngine e(kHostDockerSocket);
    docker::RequestOptions o;
    o.timeout = absl::Seconds(30);
    auto all = docker::ListSandboxes(e, installation_, "", o);
    EXPECT_TRUE(all.ok()) << all.status();
    return all.ok() ? all->size() : 0;
  }

  std::unique_ptr<PrivhelperProcess> ph_;
  std::string image_;
  std::string installation_;
};


// Finding 1: arguments are re-checked by privhelper itself, with typed refusals.
}  // namespace sn::testing

#endif  // SANDBOX_NODE_TESTS_PRIVHELPER_AUDIT_AUDIT_TEST_BASE_H_
