#include "proto/operation_of.h"

namespace sn::privhelper {

namespace pb = ::sn::privhelper::v1;

std::optional<Operation> OperationOf(const pb::ExecuteRequest& r) {
  switch (r.operation_case()) {
#define SN_OPERATION(e, field, args, result, mutation, slot) \
  case pb::ExecuteRequest::k##e: return Operation::k##e;
#define SN_AGENT_OPERATION(...)
#include "common/operations.def"
    case pb::ExecuteRequest::OPERATION_NOT_SET: break;
  }
  return std::nullopt;
}

const google::protobuf::Message* ArgumentsOf(const pb::ExecuteRequest& r) {
  switch (r.operation_case()) {
#define SN_OPERATION(e, field, args, result, mutation, slot) \
  case pb::ExecuteRequest::k##e: return &r.field();
#define SN_AGENT_OPERATION(...)
#include "common/operations.def"
    case pb::ExecuteRequest::OPERATION_NOT_SET: break;
  }
  return nullptr;
}

const std::string& SandboxIdOf(const pb::ExecuteRequest& r) {
  switch (r.operation_case()) {
#define SN_OPERATION(e, field, args, result, mutation, slot) \
  case pb::ExecuteRequest::k##e: return r.field().sandbox_id();
#define SN_AGENT_OPERATION(...)
#include "common/operations.def"
    case pb::ExecuteRequest::OPERATION_NOT_SET: break;
  }
  static const std::string* const kNone = new std::string();
  return *kNone;
}

bool ReconciliationOnly(const pb::ExecuteRequest& r) {
  return r.has_resume() && r.resume().reconciliation_only();
}

bool IsMutationRequest(const pb::ExecuteRequest& r) {
  const std::optional<Operation> op = OperationOf(r);
  return !op.has_value() || IsMutation(*op, ReconciliationOnly(r));
}

Slot SlotOfRequest(const pb::ExecuteRequest& r) {
  const std::optional<Operation> op = OperationOf(r);
  return op.has_value() ? SlotOf(*op, ReconciliationOnly(r)) : Slot::kNone;
}

}  // namespace sn::privhelper
