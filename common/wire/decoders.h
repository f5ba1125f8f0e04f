// Internal: per-frame decoders over the captured top-level members (see codec.cc), and the
// per-operation argument and result decoders. Not a public API.
#ifndef SANDBOX_NODE_COMMON_WIRE_DECODERS_H_
#define SANDBOX_NODE_COMMON_WIRE_DECODERS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/wire/decode_util.h"
#include "common/wire/frames.h"

namespace sn::wire::internal {

// Each frame decoder accepts (and ignores) `type` and `version`, which codec.cc checks.
absl::StatusOr<Hello> DecodeHello(const std::vector<RawMember>& m);
absl::StatusOr<Welcome> DecodeWelcome(const std::vector<RawMember>& m);
absl::StatusOr<Heartbeat> DecodeHeartbeat(const std::vector<RawMember>& m);
absl::StatusOr<HeartbeatAck> DecodeHeartbeatAck(const std::vector<RawMember>& m);
absl::StatusOr<Retention> DecodeRetention(const std::vector<RawMember>& m);
absl::StatusOr<RetentionAck> DecodeRetentionAck(const std::vector<RawMember>& m);
absl::StatusOr<Request> DecodeRequest(const std::vector<RawMember>& m);
absl::StatusOr<Response> DecodeResponse(const std::vector<RawMember>& m);

// Arguments of `op` from the object at `r` (request-layer errors only: the text is already
// JSON-level valid).
absl::StatusOr<Arguments> DecodeArguments(Operation op, json::Reader& r, const Path& p);

// The `result` object of `op` at `r`. REQUIRES: HasResult(op).
absl::StatusOr<Result> DecodeResultAt(Operation op, json::Reader& r, const Path& p);

// A recorded response (no type/version/connection_id) at `r`. `op`, when known, decides the
// shape of `result`; without it the shape is inferred (see codec.h).
absl::StatusOr<RecordedResponse> DecodeRecordedAt(std::optional<Operation> op, json::Reader& r,
                                                  const Path& p);

}  // namespace sn::wire::internal

#endif  // SANDBOX_NODE_COMMON_WIRE_DECODERS_H_
