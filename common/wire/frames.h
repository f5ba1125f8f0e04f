// Typed frames of the node <-> Core protocol (spec/wire.md §3-§5). Plain structs: the codec
// (codec.h) turns them into JSON text and back; it is the only place that knows the JSON.
//
// Conventions: every uuid, digest, code and timestamp is held as the exact string that goes on
// the wire (already validated by Decode; Encode expects valid values). "Present iff" members
// are std::optional. Byte strings that travel as base64 (stdin, file content, outputs) are
// held DECODED in std::string.
#ifndef SANDBOX_NODE_COMMON_WIRE_FRAMES_H_
#define SANDBOX_NODE_COMMON_WIRE_FRAMES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/operations.h"

namespace sn::wire {

enum class FrameType {
  kHello,
  kWelcome,
  kHeartbeat,
  kHeartbeatAck,
  kRetention,
  kRetentionAck,
  kRequest,
  kResponse,
};
std::string_view FrameTypeName(FrameType t);  // "hello", ...
bool IsControlFrame(FrameType t);              // every type but request and response

// The peer that receives (decodes) a frame: a node accepts welcome, heartbeat_ack,
// retention_ack and request; Core accepts hello, heartbeat, retention and response.
enum class Role { kNode, kCore };

// ---- nested objects (§3) ----

struct HostMetrics {
  int64_t cpu_cores = 1;              // >= 1
  std::string load_1m = "0";          // (0|[1-9][0-9]{0,6})(\.[0-9]{1,6})?, kept as text
  int64_t memory_total_bytes = 0;     // all >= 0
  int64_t memory_available_bytes = 0;
  int64_t disk_total_bytes = 0;
  int64_t disk_available_bytes = 0;
  int64_t sandboxes_active = 0;
  int64_t sandboxes_retained = 0;
  bool operator==(const HostMetrics&) const = default;
};

enum class ActiveState { kQueued, kRunning };

struct ActiveOperation {
  std::string id;         // uuid
  std::string operation;  // code
  ActiveState state = ActiveState::kQueued;
  bool operator==(const ActiveOperation&) const = default;
};

struct Health {
  std::optional<bool> provider_ready;     // present iff not generation-managing
  std::optional<std::string> diagnostic;  // code; present iff provider_ready == false
  std::string observed_at;                // timestamp
  std::vector<ActiveOperation> active_operations;  // 0..32
  HostMetrics host;
  bool operator==(const Health&) const = default;
};

enum class GenerationState { kReady, kPreparing, kFailed };
// The state's wire name (§3 observations): "ready", "preparing", "failed".
constexpr std::string_view GenerationStateName(GenerationState s) {
  constexpr std::string_view kNames[] = {"ready", "preparing", "failed"};
  return kNames[static_cast<int>(s)];
}

struct Observation {
  int64_t generation = 0;  // positive
  std::string specification_digest;
  GenerationState state = GenerationState::kPreparing;
  std::optional<std::string> diagnostic;  // code; absent when ready
  bool operator==(const Observation&) const = default;
};

struct Deployment {
  int64_t generation = 0;  // the target, positive
  std::string specification_digest;
  std::optional<int64_t> serving_generation;  // null on the wire when absent
  bool operator==(const Deployment&) const = default;
};

// ---- control frames (§3) ----

struct Hello {
  std::string node_id;          // uuid
  std::string installation_id;  // uuid
  std::string provider;         // code
  std::string backend_fingerprint;  // <= 256 bytes
  int64_t deployment_generation = 0;  // positive
  std::string specification_digest;
  int64_t max_active = 1;    // 1..100000
  int64_t max_retained = 0;  // 0..1000000
  Health health;
  bool generation_management = false;  // on the wire: `true` or absent
  std::vector<Observation> generations;  // on the wire iff generation_management; 0..8
  bool operator==(const Hello&) const = default;
};

struct Welcome {
  std::string connection_id;
  int64_t owner_epoch = 0;
  std::optional<Deployment> deployment;
  bool operator==(const Welcome&) const = default;
};

struct Heartbeat {
  std::string connection_id;
  int64_t owner_epoch = 0;
  Health health;
  std::optional<std::vector<Observation>> generations;  // present iff generation-managing
  bool operator==(const Heartbeat&) const = default;
};

struct HeartbeatAck {
  std::string connection_id;
  int64_t owner_epoch = 0;
  std::optional<Deployment> deployment;
  bool operator==(const HeartbeatAck&) const = default;
};

struct RetentionEntry {
  int64_t generation = 0;
  std::string specification_digest;
  std::optional<bool> keep;  // absent in `retention`, required in `retention_ack`
  bool operator==(const RetentionEntry&) const = default;
};

struct Retention {
  std::string id;  // uuid
  int64_t sequence = 0;
  std::string connection_id;
  int64_t owner_epoch = 0;
  std::vector<RetentionEntry> entries;  // 1..8, unique pairs, keep absent
  bool operator==(const Retention&) const = default;
};

struct RetentionAck {
  std::string id;
  int64_t sequence = 0;
  std::string connection_id;
  int64_t owner_epoch = 0;
  std::vector<RetentionEntry> entries;  // 1..8, keep present
  bool operator==(const RetentionAck&) const = default;
};

// ---- operations (§5) ----

// The operations and their facts come from the one authored table (common/operations.def).
using ::sn::HasResult;
using ::sn::IsMutation;
using ::sn::kOperationCount;
using ::sn::Operation;
using ::sn::OperationName;
using ::sn::ParseOperation;

struct CreateArgs {
  std::string sandbox_id;
  std::string image;  // <= 128; checked against the generation's specification by the node
  std::optional<std::vector<std::string>> command;                       // <= 64 x <= 4096
  std::optional<std::vector<std::pair<std::string, std::string>>> env;  // <= 64, wire order
  int64_t cpu_millis = 0;
  int64_t memory_bytes = 0;
  bool operator==(const CreateArgs&) const = default;
};
struct ResumeArgs {
  std::string sandbox_id;
  bool reconciliation_only = false;
  bool operator==(const ResumeArgs&) const = default;
};
// kill, kill_compute, delete_retained, inspect.
struct SandboxArgs {
  std::string sandbox_id;
  bool operator==(const SandboxArgs&) const = default;
};
struct ExecArgs {
  std::string sandbox_id;
  std::vector<std::string> argv;     // 1..64 x <= 4096
  std::optional<std::string> stdin_bytes;  // decoded, <= 48 MiB ("stdin" on the wire)
  int64_t output_limit_bytes = 0;    // 0..33554432
  bool operator==(const ExecArgs&) const = default;
};
struct WriteFileArgs {
  std::string sandbox_id;
  std::string path;
  std::string content;  // decoded, <= 48 MiB
  int64_t mode = 0;     // 0..511
  bool operator==(const WriteFileArgs&) const = default;
};
struct ReadFileArgs {
  std::string sandbox_id;
  std::string path;
  int64_t max_bytes = 0;  // 0..50331648
  bool operator==(const ReadFileArgs&) const = default;
};
struct ObserveArgs {
  std::string operation_id;
  bool operator==(const ObserveArgs&) const = default;
};
using Arguments = std::variant<CreateArgs, ResumeArgs, SandboxArgs, ExecArgs, WriteFileArgs,
                               ReadFileArgs, ObserveArgs>;

// True for a request that mutates: every mutation operation, and resume unless
// reconciliation_only.
bool IsMutationRequest(Operation op, const Arguments& args);

struct Request {
  // Envelope (a failure here is an invalid frame).
  std::string id;
  std::string connection_id;
  int64_t owner_epoch = 0;
  int64_t sequence = 0;
  // Request layer. When `request_error` is set the request is envelope-valid but must be
  // answered with error_code "invalid"; `operation`/`args` are then unspecified.
  int64_t generation = 0;
  std::string operation_name;  // as received
  Operation operation = Operation::kInspect;
  int64_t timeout_ms = 0;
  Arguments args;
  std::optional<std::string> request_error;
  bool operator==(const Request&) const = default;
};

enum class SandboxState { kRunning, kRetained, kAbsent };
enum class ObserveState { kQueued, kRunning, kCompleted, kUnknown };

struct CreateResult {  // state is always "running"
  std::string sandbox_id;
  std::string native_id;
  bool operator==(const CreateResult&) const = default;
};
struct ResumeResult {
  std::string sandbox_id;
  std::string native_id;
  SandboxState state = SandboxState::kRunning;  // running | retained
  bool operator==(const ResumeResult&) const = default;
};
struct InspectResult {
  std::string sandbox_id;
  SandboxState state = SandboxState::kAbsent;
  std::optional<std::string> native_id;  // present iff not absent
  bool operator==(const InspectResult&) const = default;
};
struct ExecResult {
  int64_t exit_code = 0;
  std::string stdout_bytes;  // decoded
  std::string stderr_bytes;  // decoded
  bool truncated = false;
  bool operator==(const ExecResult&) const = default;
};
struct WriteFileResult {
  int64_t size = 0;
  bool operator==(const WriteFileResult&) const = default;
};
struct ReadFileResult {
  std::string content;  // decoded
  int64_t size = 0;
  bool truncated = false;
  bool operator==(const ReadFileResult&) const = default;
};

struct CreateSettled {
  std::string request_id;
  std::string sandbox_id;
  std::string native_id;
  int64_t generation = 0;
  std::string specification_digest;
  bool operator==(const CreateSettled&) const = default;
};
struct Unsupported {
  std::string operation;
  std::string reason;  // <= 200 bytes
  bool operator==(const Unsupported&) const = default;
};

// The result of a mutation, as recorded and returned inside observe (no nested observe).
using MutationResult = std::variant<CreateResult, ResumeResult, ExecResult, WriteFileResult>;

// A response without type/version/connection_id, as recorded for observe.
struct RecordedResponse {
  std::string id;
  std::optional<MutationResult> result;
  std::optional<std::string> error_code;
  std::optional<CreateSettled> create_settled;  // "info": {"create_settled": ...}
  std::optional<Unsupported> unsupported;
  bool operator==(const RecordedResponse&) const = default;
};
struct ObserveResult {
  std::string operation_id;
  std::optional<std::string> operation;  // present iff state != unknown
  ObserveState state = ObserveState::kUnknown;
  std::optional<RecordedResponse> response;  // present iff completed
  bool operator==(const ObserveResult&) const = default;
};

using Result = std::variant<CreateResult, ResumeResult, InspectResult, ExecResult,
                            WriteFileResult, ReadFileResult, ObserveResult>;

struct Response {
  std::string id;
  std::string connection_id;
  // On success: the typed result (Encode writes it). Absent for no-result operations.
  std::optional<Result> result;
  // Filled by Decode: the exact JSON text of the `result` object, JSON-level valid. Its shape
  // depends on the pending request's operation, which only the receiver knows: check it with
  // DecodeResult(operation, *raw_result).
  std::optional<std::string> raw_result;
  std::optional<std::string> error_code;
  std::optional<CreateSettled> create_settled;
  std::optional<Unsupported> unsupported;
  bool operator==(const Response&) const = default;
};

using Frame = std::variant<Hello, Welcome, Heartbeat, HeartbeatAck, Retention, RetentionAck,
                           Request, Response>;
FrameType TypeOf(const Frame& f);

}  // namespace sn::wire

#endif  // SANDBOX_NODE_COMMON_WIRE_FRAMES_H_
