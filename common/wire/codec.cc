// Decode entry points (spec/wire.md §2): size limits, the top-level JSON pass, `type` and
// `version`, then the per-type decoders of decode_control.cc, decode_request.cc and
// decode_response.cc.
//
// The top-level pass validates the whole text at the JSON level (UTF-8, escapes, number
// grammar, depth, duplicate members at every level, trailing data) and keeps each top-level
// member's value as a slice of the input; the typed pass then reads each slice once the
// `type` is known, wherever it appeared. Nothing is copied but the decoded values.
#include "common/wire/codec.h"

#include <array>

#include "common/wire/decoders.h"

namespace sn::wire {
namespace {

using internal::Invalid;
using internal::Path;
using internal::RawMember;

constexpr std::array<std::string_view, 8> kTypeNames = {
    "hello", "welcome", "heartbeat", "heartbeat_ack", "retention", "retention_ack",
    "request", "response"};

bool Accepts(Role receiver, FrameType t) {
  switch (t) {
    case FrameType::kHello:
    case FrameType::kHeartbeat:
    case FrameType::kRetention:
    case FrameType::kResponse: return receiver == Role::kCore;
    default: return receiver == Role::kNode;
  }
}

const RawMember* FindMember(const std::vector<RawMember>& m, std::string_view name) {
  for (const RawMember& r : m) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

absl::Status TooLarge(size_t size, size_t limit, std::string_view what) {
  return absl::ResourceExhaustedError(std::string(what) + " of " + std::to_string(size) +
                                      " bytes exceeds the limit of " + std::to_string(limit) +
                                      " bytes");
}

template <typename T>
absl::StatusOr<Frame> Wrap(absl::StatusOr<T> v) {
  if (!v.ok()) return v.status();
  return Frame(std::move(*v));
}

}  // namespace

absl::StatusOr<Frame> Decode(std::string_view bytes, Role receiver, size_t size_limit) {
  if (bytes.size() > size_limit) return TooLarge(bytes.size(), size_limit, "frame");
  if (bytes.size() > kMaxFrameBytes) return TooLarge(bytes.size(), kMaxFrameBytes, "frame");
  const Path root = internal::Root("frame");
  ASSIGN_OR_RETURN(std::vector<RawMember> members, internal::ReadTopLevel(bytes, root));

  const RawMember* type_member = FindMember(members, "type");
  if (type_member == nullptr) return Invalid(root, "missing member 'type'");
  const Path type_path = root.Member("type");
  json::Reader tr(type_member->raw, 1);
  ASSIGN_OR_RETURN(std::string_view type_name, internal::ReadString(tr, type_path));
  std::optional<FrameType> type;
  for (size_t i = 0; i < kTypeNames.size(); ++i) {
    if (kTypeNames[i] == type_name) type = static_cast<FrameType>(i);
  }
  if (!type) return Invalid(type_path, "not a frame type of protocol version 1");
  if (!Accepts(receiver, *type)) {
    return Invalid(type_path, std::string(receiver == Role::kNode ? "a node" : "Core") +
                                  " does not accept \"" + std::string(FrameTypeName(*type)) +
                                  "\" frames");
  }
  if (IsControlFrame(*type) && bytes.size() > kMaxControlFrameBytes) {
    return TooLarge(bytes.size(), kMaxControlFrameBytes, "control frame");
  }
  const Path typed_root = internal::Root(FrameTypeName(*type));
  const RawMember* version = FindMember(members, "version");
  if (version == nullptr) return Invalid(typed_root, "missing member 'version'");
  json::Reader vr(version->raw, 1);
  RETURN_IF_ERROR(internal::ReadVersionOne(vr, typed_root.Member("version")));

  switch (*type) {
    case FrameType::kHello: return Wrap(internal::DecodeHello(members));
    case FrameType::kWelcome: return Wrap(internal::DecodeWelcome(members));
    case FrameType::kHeartbeat: return Wrap(internal::DecodeHeartbeat(members));
    case FrameType::kHeartbeatAck: return Wrap(internal::DecodeHeartbeatAck(members));
    case FrameType::kRetention: return Wrap(internal::DecodeRetention(members));
    case FrameType::kRetentionAck: return Wrap(internal::DecodeRetentionAck(members));
    case FrameType::kRequest: return Wrap(internal::DecodeRequest(members));
    case FrameType::kResponse: return Wrap(internal::DecodeResponse(members));
  }
  return Invalid(type_path, "not a frame type of protocol version 1");
}

int CloseCodeForDecodeError(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted ? kCloseTooLarge
                                                               : kCloseInvalidFrame;
}

absl::StatusOr<Result> DecodeResult(Operation op, std::string_view raw_result_json) {
  const Path p = internal::Root(std::string_view("result"));
  if (!HasResult(op)) return Invalid(p, "this operation has no result");
  // The result object sits at depth 2 of its frame.
  json::Reader r(raw_result_json, /*base_depth=*/1);
  ASSIGN_OR_RETURN(Result res, internal::DecodeResultAt(op, r, p));
  RETURN_IF_ERROR(r.Finish());
  return res;
}

absl::StatusOr<RecordedResponse> DecodeRecordedResponse(std::string_view json) {
  json::Reader r(json);
  const Path p = internal::Root("recorded_response");
  ASSIGN_OR_RETURN(RecordedResponse rec, internal::DecodeRecordedAt(std::nullopt, r, p));
  RETURN_IF_ERROR(r.Finish());
  return rec;
}

absl::StatusOr<RecordedResponse> DecodeRecordedResponse(Operation op, std::string_view json) {
  json::Reader r(json);
  const Path p = internal::Root("recorded_response");
  ASSIGN_OR_RETURN(RecordedResponse rec, internal::DecodeRecordedAt(op, r, p));
  RETURN_IF_ERROR(r.Finish());
  return rec;
}

}  // namespace sn::wire
