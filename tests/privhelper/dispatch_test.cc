// The native helper's pre-I/O checks against declaration tables.
#include "privhelper/native/dispatch.h"

#include <vector>

#include "gtest/gtest.h"

namespace sn::native {
namespace {

namespace pb = ::sn::privhelper::v1;

pb::ExecuteRequest Exec(int64_t generation = 1, int64_t budget = 1000) {
  pb::ExecuteRequest r;
  r.set_generation(generation);
  r.set_budget_ms(budget);
  r.mutable_exec()->set_sandbox_id("s");
  return r;
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

}  // namespace
}  // namespace sn::native
