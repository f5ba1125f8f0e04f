#include "common/wire/frames.h"

namespace sn::wire {

std::string_view FrameTypeName(FrameType t) {
  switch (t) {
    case FrameType::kHello: return "hello";
    case FrameType::kWelcome: return "welcome";
    case FrameType::kHeartbeat: return "heartbeat";
    case FrameType::kHeartbeatAck: return "heartbeat_ack";
    case FrameType::kRetention: return "retention";
    case FrameType::kRetentionAck: return "retention_ack";
    case FrameType::kRequest: return "request";
    case FrameType::kResponse: return "response";
  }
  return "?";
}

bool IsControlFrame(FrameType t) { return t != FrameType::kRequest && t != FrameType::kResponse; }

bool IsMutationRequest(Operation op, const Arguments& args) {
  const ResumeArgs* r = std::get_if<ResumeArgs>(&args);
  return IsMutation(op, r != nullptr && r->reconciliation_only);
}

FrameType TypeOf(const Frame& f) { return static_cast<FrameType>(f.index()); }

}  // namespace sn::wire
