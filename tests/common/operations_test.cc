// The authored operation table (common/operations.def) against its projections: the proto
// oneof privhelper receives, the proto mapping (proto/operation_of.h), the wire names, and the
// provider declarations.
#include "common/operations.h"

#include <set>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"

#include "common/provider_operations.h"
#include "common/wire/frames.h"
#include "gtest/gtest.h"
#include "proto/operation_of.h"
#include "proto/privhelper.pb.h"

namespace sn {
namespace {

namespace pb = ::sn::privhelper::v1;
namespace gp = ::google::protobuf;

// Every disagreement between the operation tables (common/operations.def,
// common/provider_operations.def) and the ExecuteRequest message of a proto file: a table
// operation that runs in privhelper without its oneof member, a oneof member without its
// table line, a member whose message is not the table's argument shape, an agent-only
// operation present in the proto, a provider declaration of an operation the proto cannot
// carry. Empty when they agree.
std::vector<std::string> Disagreements(const gp::Descriptor* execute_request) {
  std::vector<std::string> out;
  const gp::OneofDescriptor* oneof = execute_request->FindOneofByName("operation");
  if (oneof == nullptr) return {"ExecuteRequest has no oneof `operation`"};
  std::set<std::string> members;
  for (int i = 0; i < oneof->field_count(); ++i) {
    const gp::FieldDescriptor* f = oneof->field(i);
    members.insert(f->name());
    if (!ParseOperation(f->name()).has_value()) {
      out.push_back("oneof member " + f->name() + " has no line in operations.def");
    }
  }
  for (const OperationFacts& op : kOperationFacts) {
    const std::string name(op.name);
    if (!op.runs_in_privhelper) {
      if (members.count(name)) out.push_back(name + " is answered by the agent but in the oneof");
      continue;
    }
    const gp::FieldDescriptor* f = execute_request->FindFieldByName(name);
    if (f == nullptr || f->containing_oneof() != oneof) {
      out.push_back(name + " runs in privhelper but has no oneof member");
      continue;
    }
    const std::string want = std::string(op.args) + "Args";
    if (f->message_type() == nullptr || f->message_type()->name() != want) {
      out.push_back(name + "'s member is not of message " + want);
    }
  }
  for (const OperationDeclaration& d : AllOperationDeclarations()) {
    std::optional<Operation> op = ParseOperation(d.operation);
    if (!op.has_value()) {
      out.push_back("provider " + std::string(d.provider) + " declares unknown " +
                    std::string(d.operation));
    } else if (FactsOf(*op).runs_in_privhelper && !members.count(std::string(d.operation))) {
      out.push_back("provider " + std::string(d.provider) + " declares " +
                    std::string(d.operation) + ", which the proto cannot carry");
    }
  }
  return out;
}

// privhelper.proto as a FileDescriptorProto, changed by `edit` and built in a pool of its own.
class EditedProto {
 public:
  template <typename Edit>
  explicit EditedProto(Edit edit) {
    gp::FileDescriptorProto file;
    pb::ExecuteRequest::descriptor()->file()->CopyTo(&file);
    for (gp::DescriptorProto& m : *file.mutable_message_type()) {
      if (m.name() == "ExecuteRequest") edit(&m);
    }
    file_ = pool_.BuildFile(file);
  }
  const gp::Descriptor* ExecuteRequest() const {
    return file_ == nullptr ? nullptr : file_->FindMessageTypeByName("ExecuteRequest");
  }

 private:
  gp::DescriptorPool pool_;
  const gp::FileDescriptor* file_ = nullptr;
};

TEST(OperationsTest, TheProtoAndTheOperationTablesAgree) {
  EXPECT_EQ(Disagreements(pb::ExecuteRequest::descriptor()), std::vector<std::string>());
}

TEST(OperationsTest, AProtoMissingAnOperationsMemberDisagrees) {
  EditedProto edited([](gp::DescriptorProto* m) {
    auto* fields = m->mutable_field();
    for (int i = 0; i < fields->size(); ++i) {
      if (fields->Get(i).name() == "kill_compute") {
        fields->DeleteSubrange(i, 1);
        break;
      }
    }
  });
  ASSERT_NE(edited.ExecuteRequest(), nullptr);
  EXPECT_EQ(Disagreements(edited.ExecuteRequest()),
            std::vector<std::string>({"kill_compute runs in privhelper but has no oneof member",
                                      "provider docker declares kill_compute, which the proto "
                                      "cannot carry",
                                      "provider microvm declares kill_compute, which the proto "
                                      "cannot carry"}));
}

TEST(OperationsTest, AProtoWithAnExtraOneofMemberDisagrees) {
  EditedProto edited([](gp::DescriptorProto* m) {
    gp::FieldDescriptorProto* f = m->add_field();
    *f = m->field(m->field_size() - 2);  // a member of the oneof (read_file)
    f->set_name("snapshot");
    f->set_json_name("snapshot");
    f->set_number(99);
  });
  ASSERT_NE(edited.ExecuteRequest(), nullptr);
  EXPECT_EQ(Disagreements(edited.ExecuteRequest()),
            std::vector<std::string>({"oneof member snapshot has no line in operations.def"}));
}

TEST(OperationsTest, AProtoMemberOfAnotherArgumentShapeDisagrees) {
  EditedProto edited([](gp::DescriptorProto* m) {
    for (gp::FieldDescriptorProto& f : *m->mutable_field()) {
      if (f.name() == "inspect") f.set_type_name(".sn.privhelper.v1.ReadFileArgs");
    }
  });
  ASSERT_NE(edited.ExecuteRequest(), nullptr);
  EXPECT_EQ(Disagreements(edited.ExecuteRequest()),
            std::vector<std::string>({"inspect's member is not of message SandboxArgs"}));
}

TEST(OperationsTest, AnAgentOnlyOperationInTheProtoDisagrees) {
  EditedProto edited([](gp::DescriptorProto* m) {
    gp::FieldDescriptorProto* f = m->add_field();
    *f = m->field(m->field_size() - 2);
    f->set_name("observe");
    f->set_json_name("observe");
    f->set_number(99);
  });
  ASSERT_NE(edited.ExecuteRequest(), nullptr);
  EXPECT_EQ(Disagreements(edited.ExecuteRequest()),
            std::vector<std::string>({"observe is answered by the agent but in the oneof"}));
}

TEST(OperationsTest, TheSlotAndComputeRulesAreSpelledOut) {
  EXPECT_EQ(SlotOf(Operation::kCreate), Slot::kActive);
  EXPECT_EQ(SlotOf(Operation::kResume, false), Slot::kActive);
  EXPECT_EQ(SlotOf(Operation::kResume, true), Slot::kNone);
  EXPECT_EQ(SlotOf(Operation::kKillCompute), Slot::kRetained);
  for (Operation op : {Operation::kKill, Operation::kDeleteRetained, Operation::kInspect,
                       Operation::kExec, Operation::kWriteFile, Operation::kReadFile,
                       Operation::kObserve}) {
    EXPECT_EQ(SlotOf(op), Slot::kNone) << OperationName(op);
  }
  EXPECT_TRUE(StartsCompute(Operation::kCreate));
  EXPECT_FALSE(StartsCompute(Operation::kResume, true));
  EXPECT_FALSE(StartsCompute(Operation::kKillCompute));
  for (Operation op : {Operation::kCreate, Operation::kResume, Operation::kInspect,
                       Operation::kExec, Operation::kWriteFile, Operation::kReadFile,
                       Operation::kObserve}) {
    EXPECT_TRUE(HasResult(op)) << OperationName(op);
  }
}

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
