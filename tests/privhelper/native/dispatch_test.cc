// The native helper's pre-I/O checks against declaration tables.
#include "privhelper/native/dispatch.h"

#include <string>
#include <vector>

#include "common/wire/limits.h"
#include "gtest/gtest.h"

namespace sn::native {
namespace {

namespace pb = ::sn::privhelper::v1;

constexpr char kSandbox[] = "0000bbbb-0000-4000-8000-000000000002";

pb::ExecuteRequest Exec(int64_t generation = 1, int64_t budget = 1000) {
  pb::ExecuteRequest r;
  r.set_generation(generation);
  r.set_budget_ms(budget);
  r.mutable_exec()->set_sandbox_id(kSandbox);
  r.mutable_exec()->add_argv("true");
  r.mutable_exec()->set_output_limit_bytes(1024);
  return r;
}

pb::ExecuteRequest ReadFile(int64_t max_bytes) {
  pb::ExecuteRequest r;
  r.set_generation(1);
  r.set_budget_ms(1000);
  r.mutable_read_file()->set_sandbox_id(kSandbox);
  r.mutable_read_file()->set_path("/tmp/f");
  r.mutable_read_file()->set_max_bytes(max_bytes);
  return r;
}

std::optional<pb::ErrorCode> Early(const pb::ExecuteRequest& r) {
  std::optional<pb::ExecuteResponse> out = EarlyOutcome(AllOperationDeclarations(), "docker", 1, r);
  if (!out.has_value()) return std::nullopt;
  return out->error_code();
}

TEST(DispatchTest, UnsupportedOperationAnswersExactOperationAndAuthoredReason) {
  const std::vector<OperationDeclaration> table = {
      {"docker", "exec", false, "exec is not offered on this host"},
  };
  std::optional<pb::ExecuteResponse> r = EarlyOutcome(table, "docker", 1, Exec());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->error_code(), pb::ERROR_CODE_UNSUPPORTED);
  EXPECT_EQ(r->unsupported().operation(), "exec");
  EXPECT_EQ(r->unsupported().reason(), "exec is not offered on this host");
  EXPECT_FALSE(r->native_call_started());
}

TEST(DispatchTest, UndeclaredOperationIsUnsupported) {
  const std::vector<OperationDeclaration> table = {{"docker", "inspect", true, ""}};
  std::optional<pb::ExecuteResponse> r = EarlyOutcome(table, "docker", 1, Exec());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->error_code(), pb::ERROR_CODE_UNSUPPORTED);
  EXPECT_EQ(r->unsupported().operation(), "exec");
}

TEST(DispatchTest, SupportedOperationOnItsGenerationRuns) {
  EXPECT_FALSE(EarlyOutcome(AllOperationDeclarations(), "docker", 1, Exec()).has_value());
}

TEST(DispatchTest, OtherGenerationOrNoBudgetIsUnconfirmed) {
  EXPECT_EQ(EarlyOutcome(AllOperationDeclarations(), "docker", 2, Exec())->error_code(),
            pb::ERROR_CODE_UNCONFIRMED);
  EXPECT_EQ(EarlyOutcome(AllOperationDeclarations(), "docker", 1, Exec(1, 0))->error_code(),
            pb::ERROR_CODE_UNCONFIRMED);
}

TEST(DispatchTest, NoOperationIsInvalid) {
  pb::ExecuteRequest r;
  r.set_generation(1);
  r.set_budget_ms(1);
  EXPECT_EQ(EarlyOutcome(AllOperationDeclarations(), "docker", 1, r)->error_code(),
            pb::ERROR_CODE_INVALID);
}

TEST(DispatchTest, EveryOperationCaseHasItsSpecName) {
  const std::vector<std::string> names = {"create", "resume", "kill", "kill_compute",
                                          "delete_retained", "inspect", "exec", "write_file",
                                          "read_file"};
  std::vector<pb::ExecuteRequest> reqs(9);
  reqs[0].mutable_create();
  reqs[1].mutable_resume();
  reqs[2].mutable_kill();
  reqs[3].mutable_kill_compute();
  reqs[4].mutable_delete_retained();
  reqs[5].mutable_inspect();
  reqs[6].mutable_exec();
  reqs[7].mutable_write_file();
  reqs[8].mutable_read_file();
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(OperationName(reqs[i]), names[i]);
}

// Finding 3: the helper keeps at most the spec's bounds in memory, so it refuses larger bounds
// itself, before any native I/O, whatever privhelper let through.
TEST(DispatchTest, OutputLimitBeyondTheSpecIsInvalidInTheHelper) {
  pb::ExecuteRequest r = Exec();
  r.mutable_exec()->set_output_limit_bytes(wire::kMaxOutputLimitBytes);
  EXPECT_EQ(Early(r), std::nullopt);
  r.mutable_exec()->set_output_limit_bytes(wire::kMaxOutputLimitBytes + 1);
  EXPECT_EQ(Early(r), pb::ERROR_CODE_INVALID);
  r.mutable_exec()->set_output_limit_bytes(-1);
  EXPECT_EQ(Early(r), pb::ERROR_CODE_INVALID);
}

TEST(DispatchTest, ReadMaxBytesBeyondTheSpecIsInvalidInTheHelper) {
  EXPECT_EQ(Early(ReadFile(wire::kMaxReadFileBytes)), std::nullopt);
  EXPECT_EQ(Early(ReadFile(wire::kMaxReadFileBytes + 1)), pb::ERROR_CODE_INVALID);
  EXPECT_EQ(Early(ReadFile(150'000'000)), pb::ERROR_CODE_INVALID);
}

TEST(DispatchTest, EveryArgumentRuleIsRecheckedInTheHelper) {
  pb::ExecuteRequest bad_id = Exec();
  bad_id.mutable_exec()->set_sandbox_id("not-a-uuid");
  EXPECT_EQ(Early(bad_id), pb::ERROR_CODE_INVALID);

  pb::ExecuteRequest no_argv = Exec();
  no_argv.mutable_exec()->clear_argv();
  EXPECT_EQ(Early(no_argv), pb::ERROR_CODE_INVALID);

  pb::ExecuteRequest big_stdin = Exec();
  big_stdin.mutable_exec()->set_stdin(std::string(wire::kMaxStdinBytes + 1, 'x'));
  EXPECT_EQ(Early(big_stdin), pb::ERROR_CODE_INVALID);

  pb::ExecuteRequest create;
  create.set_generation(1);
  create.set_budget_ms(1000);
  pb::CreateArgs* c = create.mutable_create();
  c->set_sandbox_id(kSandbox);
  c->set_image("img");
  c->set_cpu_millis(wire::kMinCpuMillis);
  c->set_memory_bytes(wire::kMinMemoryBytes);
  EXPECT_EQ(Early(create), std::nullopt);
  c->set_cpu_millis(0);
  EXPECT_EQ(Early(create), pb::ERROR_CODE_INVALID);
  c->set_cpu_millis(wire::kMinCpuMillis);
  c->set_memory_bytes(0);
  EXPECT_EQ(Early(create), pb::ERROR_CODE_INVALID);
  c->set_memory_bytes(wire::kMinMemoryBytes);
  (*c->mutable_env())["1BAD"] = "v";
  EXPECT_EQ(Early(create), pb::ERROR_CODE_INVALID);

  pb::ExecuteRequest write;
  write.set_generation(1);
  write.set_budget_ms(1000);
  write.mutable_write_file()->set_sandbox_id(kSandbox);
  write.mutable_write_file()->set_path("/tmp/../etc/passwd");
  EXPECT_EQ(Early(write), pb::ERROR_CODE_INVALID);
  write.mutable_write_file()->set_path("/tmp/f");
  write.mutable_write_file()->set_mode(wire::kMaxFileMode + 1);
  EXPECT_EQ(Early(write), pb::ERROR_CODE_INVALID);
  write.mutable_write_file()->set_mode(0644);
  EXPECT_EQ(Early(write), std::nullopt);
}

// The in-flight sandbox ids privhelper sends (docs/protocol.md 22a): only with the operations
// that take a slot, fewer than the bound, uuids, distinct, never the call's own sandbox.
TEST(DispatchTest, InFlightIdsKeepTheirRulesOrTheCallIsRefused) {
  const std::string a = "0000cccc-0000-4000-8000-000000000003";
  const std::string b = "0000dddd-0000-4000-8000-000000000004";
  pb::ExecuteRequest create;
  create.mutable_create()->set_sandbox_id(kSandbox);
  EXPECT_TRUE(InFlightIdsWellFormed(create, {}, 2, 1));
  EXPECT_TRUE(InFlightIdsWellFormed(create, {a}, 2, 1));
  EXPECT_FALSE(InFlightIdsWellFormed(create, {a, b}, 2, 1)) << "as many as the bound";
  EXPECT_TRUE(InFlightIdsWellFormed(create, {a, b}, 3, 0));
  EXPECT_FALSE(InFlightIdsWellFormed(create, {a}, 1, 64)) << "a bound of 1 admits one call";
  EXPECT_FALSE(InFlightIdsWellFormed(create, {a}, 0, 64)) << "a bound of 0 admits one call";
  EXPECT_FALSE(InFlightIdsWellFormed(create, {"not-a-uuid"}, 3, 1));
  EXPECT_FALSE(InFlightIdsWellFormed(create, {a, a}, 3, 1)) << "duplicates";
  EXPECT_FALSE(InFlightIdsWellFormed(create, {kSandbox}, 3, 1)) << "its own sandbox";
  pb::ExecuteRequest resume;
  resume.mutable_resume()->set_sandbox_id(kSandbox);
  EXPECT_TRUE(InFlightIdsWellFormed(resume, {a}, 2, 1));
  EXPECT_FALSE(InFlightIdsWellFormed(resume, {a}, 1, 2)) << "resume counts against max_active";
  resume.mutable_resume()->set_reconciliation_only(true);
  EXPECT_FALSE(InFlightIdsWellFormed(resume, {a}, 2, 1)) << "reconciliation takes no slot";
  EXPECT_TRUE(InFlightIdsWellFormed(resume, {}, 2, 1));
  pb::ExecuteRequest kill_compute;
  kill_compute.mutable_kill_compute()->set_sandbox_id(kSandbox);
  EXPECT_TRUE(InFlightIdsWellFormed(kill_compute, {a}, 1, 2));
  EXPECT_FALSE(InFlightIdsWellFormed(kill_compute, {a}, 2, 1)) << "against max_retained";
  pb::ExecuteRequest kill;
  kill.mutable_kill()->set_sandbox_id(kSandbox);
  EXPECT_TRUE(InFlightIdsWellFormed(kill, {}, 2, 2));
  EXPECT_FALSE(InFlightIdsWellFormed(kill, {a}, 2, 2)) << "kill takes no slot";
  EXPECT_FALSE(InFlightIdsWellFormed(Exec(), {a}, 2, 2));
}

}  // namespace
}  // namespace sn::native
