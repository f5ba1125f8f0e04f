#include "privhelper/native/provider.h"

namespace sn::native {

pb::ExecuteResponse Provider::Run(const pb::ExecuteRequest& req, const Resolved& resolved,
                                  CallControl* ctl) {
  const Call call{req, resolved, ctl};
  switch (req.operation_case()) {
#define SN_OPERATION(e, field, args, result, mutation, slot) \
  case pb::ExecuteRequest::k##e: return e(req.field(), call);
#define SN_AGENT_OPERATION(...)
#include "common/operations.def"
    case pb::ExecuteRequest::OPERATION_NOT_SET: break;
  }
  pb::ExecuteResponse out;
  out.set_error_code(pb::ERROR_CODE_INVALID);
  out.set_native_call_started(ctl->native_started);
  return out;
}

}  // namespace sn::native
