#include "common/wire/frames.h"

#include <array>

namespace sn::wire {
namespace {

constexpr std::array<std::string_view, kOperationCount> kOperationNames = {
    "create", "resume", "kill", "kill_compute", "delete_retained",
    "inspect", "exec", "write_file", "read_file", "observe",
};

}  // namespace

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

std::string_view OperationName(Operation op) {
  return kOperationNames[static_cast<size_t>(op)];
}

std::optional<Operation> ParseOperation(std::string_view name) {
  for (size_t i = 0; i < kOperationNames.size(); ++i) {
    if (kOperationNames[i] == name) return static_cast<Operation>(i);
  }
  return std::nullopt;
}

bool IsMutation(Operation op) {
  return op != Operation::kInspect && op != Operation::kReadFile && op != Operation::kObserve;
}

bool HasResult(Operation op) {
  return op != Operation::kKill && op != Operation::kKillCompute &&
         op != Operation::kDeleteRetained;
}

bool IsMutationRequest(Operation op, const Arguments& args) {
  if (op == Operation::kResume) {
    const ResumeArgs* r = std::get_if<ResumeArgs>(&args);
    return r == nullptr || !r->reconciliation_only;
  }
  return IsMutation(op);
}

FrameType TypeOf(const Frame& f) { return static_cast<FrameType>(f.index()); }

}  // namespace sn::wire
