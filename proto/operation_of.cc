#include "proto/operation_of.h"

namespace sn::privhelper {

namespace pb = ::sn::privhelper::v1;

std::optional<Operation> OperationOf(const pb::ExecuteRequest& r) {
  switch (r.operation_case()) {
    case pb::ExecuteRequest::kCreate: return Operation::kCreate;
    case pb::ExecuteRequest::kResume: return Operation::kResume;
    case pb::ExecuteRequest::kKill: return Operation::kKill;
    case pb::ExecuteRequest::kKillCompute: return Operation::kKillCompute;
    case pb::ExecuteRequest::kDeleteRetained: return Operation::kDeleteRetained;
    case pb::ExecuteRequest::kInspect: return Operation::kInspect;
    case pb::ExecuteRequest::kExec: return Operation::kExec;
    case pb::ExecuteRequest::kWriteFile: return Operation::kWriteFile;
    case pb::ExecuteRequest::kReadFile: return Operation::kReadFile;
    case pb::ExecuteRequest::OPERATION_NOT_SET: break;
  }
  return std::nullopt;
}

bool IsMutationRequest(const pb::ExecuteRequest& r) {
  const std::optional<Operation> op = OperationOf(r);
  return !op.has_value() ||
         IsMutation(*op, r.has_resume() && r.resume().reconciliation_only());
}

}  // namespace sn::privhelper
