// The authored operation table (common/operations.def) against its projections: the proto
// oneof privhelper receives, the proto mapping (proto/operation_of.h), the wire names, and the
// provider declarations.
#include "common/operations.h"

#include <set>
#include <string>

#include "common/provider_operations.h"
#include "common/wire/frames.h"
#include "gtest/gtest.h"
#include "proto/operation_of.h"
#include "proto/privhelper.pb.h"

namespace sn {
namespace {

namespace pb = ::sn::privhelper::v1;

TEST(OperationsTest, TheExecuteOneofHasExactlyTheOperationsThatRunInPrivhelper) {
  const google::protobuf::OneofDescriptor* oneof =
      pb::ExecuteRequest::descriptor()->FindOneofByName("operation");
  ASSERT_NE(oneof, nullptr);
  std::set<std::string> fields;
  for (int i = 0; i < oneof->field_count(); ++i) fields.insert(oneof->field(i)->name());
  std::set<std::string> privileged;
  for (const OperationFacts& f : kOperationFacts) {
    if (f.runs_in_privhelper) privileged.insert(std::string(f.name));
  }
  EXPECT_EQ(fields, privileged);
}

TEST(OperationsTest, OperationOfMapsEveryOneofFieldToTheOperationOfItsName) {
  const google::protobuf::OneofDescriptor* oneof =
      pb::ExecuteRequest::descriptor()->FindOneofByName("operation");
  for (int i = 0; i < oneof->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = oneof->field(i);
    pb::ExecuteRequest r;
    r.GetReflection()->MutableMessage(&r, field);  // selects this member of the oneof
    std::optional<Operation> op = privhelper::OperationOf(r);
    ASSERT_TRUE(op.has_value()) << field->name();
    EXPECT_EQ(OperationName(*op), field->name());
  }
  EXPECT_FALSE(privhelper::OperationOf(pb::ExecuteRequest()).has_value());
}

TEST(OperationsTest, TheMutationRuleIsTheSameOnBothSides) {
  for (const OperationFacts& f : kOperationFacts) {
    EXPECT_EQ(ParseOperation(f.name), f.op);
    if (!f.runs_in_privhelper) continue;
    for (bool reconciliation_only : {false, true}) {
      pb::ExecuteRequest r;
      const google::protobuf::FieldDescriptor* field =
          pb::ExecuteRequest::descriptor()->FindFieldByName(std::string(f.name));
      ASSERT_NE(field, nullptr) << f.name;
      r.GetReflection()->MutableMessage(&r, field);
      if (r.has_resume()) r.mutable_resume()->set_reconciliation_only(reconciliation_only);
      wire::Arguments args = wire::SandboxArgs{};
      if (f.op == Operation::kResume) args = wire::ResumeArgs{"", reconciliation_only};
      EXPECT_EQ(privhelper::IsMutationRequest(r), wire::IsMutationRequest(f.op, args))
          << f.name << " reconciliation_only=" << reconciliation_only;
    }
  }
  // Spelled out once, so a change to the table is a visible decision.
  EXPECT_TRUE(IsMutation(Operation::kResume, false));
  EXPECT_FALSE(IsMutation(Operation::kResume, true));
  EXPECT_FALSE(IsMutation(Operation::kInspect));
  EXPECT_FALSE(IsMutation(Operation::kReadFile));
  EXPECT_FALSE(IsMutation(Operation::kObserve));
  EXPECT_FALSE(HasResult(Operation::kKill));
}

TEST(OperationsTest, EveryProviderDeclaresExactlyTheTablesOperations) {
  for (const OperationDeclaration& d : AllOperationDeclarations()) {
    EXPECT_TRUE(ParseOperation(d.operation).has_value()) << d.operation;
  }
  EXPECT_TRUE(ValidateDeclarations(AllOperationDeclarations(), "docker").ok());
}

}  // namespace
}  // namespace sn
