#include "tools/devcore/request_tracker.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/provider_operations.h"
#include "common/wire/codec.h"
#include "common/wire/limits.h"
#include "nlohmann/json.hpp"
#include "tools/devcore/crypto.h"

namespace sn::devcore {
namespace {

using json = nlohmann::json;

RequestOutcome Error(int status, std::string_view message, const std::string& id = "") {
  json body = {{"error", message}};
  if (!id.empty()) body["id"] = id;
  return RequestOutcome{status, body.dump(), std::nullopt};
}

// The frame's envelope without its arguments, as an object's text with the closing brace left
// off: the arguments member is appended to it as text (never re-parsed, never re-dumped).
std::string EnvelopeText(const std::string& id, const std::string& connection_id,
                         int64_t owner_epoch, int64_t sequence, const PreparedRequest& req) {
  json envelope = {{"type", "request"},
                   {"version", wire::kProtocolVersion},
                   {"id", id},
                   {"connection_id", connection_id},
                   {"owner_epoch", owner_epoch},
                   {"sequence", sequence},
                   {"generation", req.generation},
                   {"operation", req.operation},
                   {"timeout_ms", req.timeout_ms}};
  std::string text = envelope.dump();
  text.pop_back();  // '}'
  return text;
}

std::string FrameText(const std::string& id, const std::string& connection_id,
                      int64_t owner_epoch, int64_t sequence, const PreparedRequest& req) {
  std::string head = EnvelopeText(id, connection_id, owner_epoch, sequence, req);
  std::string text;
  text.reserve(head.size() + req.arguments.size() + 16);
  absl::StrAppend(&text, head, ",\"arguments\":", req.arguments, "}");
  return text;
}

}  // namespace

std::variant<PreparedRequest, RequestOutcome> PrepareRequest(const AdminRequest& req) {
  json arguments = json::parse(req.arguments_json, nullptr, false);
  if (arguments.is_discarded() || !arguments.is_object()) {
    return Error(400, "arguments must be a JSON object");
  }
  PreparedRequest p;
  p.generation = req.generation;
  p.operation = req.operation;
  p.timeout_ms = req.timeout_ms;
  if (auto it = arguments.find("sandbox_id"); it != arguments.end() && it->is_string()) {
    p.sandbox_id = it->get<std::string>();
  }
  p.arguments = arguments.dump();
  // Never send what the node must treat as an invalid frame (that would close the connection):
  // check the envelope and JSON-level rules as the node will, with the connection's members at
  // their longest. Request-layer problems (an unknown operation, bad arguments) are sent: the
  // node answers them with `invalid`.
  constexpr int64_t kLongest = std::numeric_limits<int64_t>::max();
  const std::string kUuid = "ffffffff-ffff-4fff-bfff-ffffffffffff";
  absl::StatusOr<wire::Frame> check = wire::Decode(
      FrameText(kUuid, kUuid, kLongest, kLongest, p), wire::Role::kNode, wire::kMaxFrameBytes);
  if (!check.ok()) {
    return Error(absl::IsResourceExhausted(check.status()) ? 413 : 400,
                 absl::StrCat("the request would be an invalid frame: ",
                              std::string(check.status().message())));
  }
  return p;
}

std::variant<PreparedRequest, RequestOutcome> PrepareRequestBody(std::string_view body) {
  const json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Error(400, "the body must be a JSON object");
  }
  AdminRequest req;
  for (const auto& [key, value] : doc.items()) {
    if (key == "generation" && value.is_number_integer() && !value.is_number_unsigned()) {
      req.generation = value.get<int64_t>();
    } else if (key == "generation" && value.is_number_unsigned() &&
               value.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) {
      req.generation = static_cast<int64_t>(value.get<uint64_t>());
    } else if (key == "timeout_ms" && value.is_number_integer() && !value.is_number_unsigned()) {
      req.timeout_ms = value.get<int64_t>();
    } else if (key == "timeout_ms" && value.is_number_unsigned() &&
               value.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) {
      req.timeout_ms = static_cast<int64_t>(value.get<uint64_t>());
    } else if (key == "operation" && value.is_string()) {
      req.operation = value.get<std::string>();
    } else if (key == "arguments" && value.is_object()) {
      req.arguments_json = value.dump();
    } else {
      return Error(400, "members: generation (int64), operation (string), "
                        "timeout_ms (int64), arguments (object)");
    }
  }
  if (!doc.contains("generation") || !doc.contains("operation") ||
      !doc.contains("timeout_ms") || !doc.contains("arguments")) {
    return Error(400, "generation, operation, timeout_ms and arguments are required");
  }
  return PrepareRequest(req);
}

RequestTracker::~RequestTracker() { FailAll("connection gone"); }

void RequestTracker::Bind(std::string connection_id, int64_t owner_epoch,
                          RequestContext context, std::function<void(std::string)> send) {
  bound_ = true;
  connection_id_ = std::move(connection_id);
  owner_epoch_ = owner_epoch;
  context_ = std::move(context);
  send_ = std::move(send);
}

void RequestTracker::Send(const AdminRequest& req, RequestDone done) {
  if (!bound_ || closed_) return done(Error(409, "the node is not connected"));
  if (pending_.size() >= wire::kMaxPendingRequests) {
    return done(Error(429, "32 requests are pending on this connection"));
  }
  std::variant<PreparedRequest, RequestOutcome> prepared = PrepareRequest(req);
  if (auto* error = std::get_if<RequestOutcome>(&prepared)) return done(std::move(*error));
  Send(std::get<PreparedRequest>(std::move(prepared)), std::move(done));
}

void RequestTracker::Send(PreparedRequest req, RequestDone done) {
  if (!bound_ || closed_) return done(Error(409, "the node is not connected"));
  if (pending_.size() >= wire::kMaxPendingRequests) {
    return done(Error(429, "32 requests are pending on this connection"));
  }
  absl::StatusOr<std::string> id = NewUuid();
  if (!id.ok()) return done(Error(500, "cannot make a request id"));
  std::string text = FrameText(*id, connection_id_, owner_epoch_, sequence_ + 1, req);
  ++sequence_;  // every envelope-valid request consumes its number
  Pending p;
  p.operation = wire::ParseOperation(req.operation);
  p.operation_name = std::move(req.operation);
  p.generation = req.generation;
  p.sandbox_id = std::move(req.sandbox_id);
  p.done = std::move(done);
  const int64_t budget = std::clamp<int64_t>(req.timeout_ms, wire::kMinTimeoutMs,
                                             wire::kMaxTimeoutMs);
  const std::string key = *id;
  p.timer = timers_->After(absl::Milliseconds(budget) + kWaitMargin, [this, key] {
    auto it = pending_.find(key);
    if (it == pending_.end() || !it->second.done) return;
    RequestDone d = std::move(it->second.done);
    it->second.done = nullptr;
    // Still pending for the node: it answers or the connection closes.
    d(Error(504, "no response within timeout_ms plus the margin", key));
  });
  p.sent_at = clock_->Monotonic();
  pending_.emplace(key, std::move(p));
  send_(std::move(text));
}

std::optional<std::string> RequestTracker::EvidenceProblem(const Pending& p,
                                                           const std::string& id,
                                                           const wire::Response& r) const {
  if (!r.error_code.has_value()) return std::nullopt;
  if (*r.error_code == "unsupported") {
    if (!r.unsupported.has_value()) return "unsupported without its evidence";
    if (r.unsupported->operation != p.operation_name) {
      return "unsupported names another operation";
    }
    auto decl = FindDeclaration(AllOperationDeclarations(), context_.provider, p.operation_name);
    if (!decl.has_value() || decl->supported) {
      return "the provider's declaration does not make this operation unsupported";
    }
    if (r.unsupported->reason != decl->reason) {
      return "unsupported reason differs from the provider's declaration";
    }
    return std::nullopt;
  }
  if (*r.error_code == "failed" && r.create_settled.has_value()) {
    const wire::CreateSettled& c = *r.create_settled;
    const std::optional<std::string> digest =
        context_.digest_of ? context_.digest_of(p.generation) : std::nullopt;
    if (p.operation != wire::Operation::kCreate || c.request_id != id ||
        !p.sandbox_id.has_value() || c.sandbox_id != *p.sandbox_id ||
        c.generation != p.generation || !digest.has_value() ||
        c.specification_digest != *digest || c.native_id.empty()) {
      return "create_settled receipt does not reference this exact request";
    }
  }
  return std::nullopt;
}

std::optional<int> RequestTracker::OnResponse(const wire::Response& r, std::string_view raw) {
  // Core's round trip ends with the response frame decoded (request_tracker.h); the checks of
  // its result and evidence below are Core's own work, not the node's.
  const MonoTime decoded = clock_->Monotonic();
  if (r.connection_id != connection_id_) return wire::kCloseCorrelation;
  auto it = pending_.find(r.id);
  if (it == pending_.end()) {
    LogWarning("response to an unknown or already answered request",
               {{"connection_id", connection_id_},
                {"duplicate", answered_.contains(r.id)}});
    return wire::kCloseCorrelation;
  }
  Pending& p = it->second;
  // The result's shape against the pending operation (§5).
  bool shape_ok = true;
  if (r.raw_result.has_value()) {
    shape_ok = p.operation.has_value() && wire::HasResult(*p.operation) &&
               wire::DecodeResult(*p.operation, *r.raw_result).ok();
  } else if (!r.error_code.has_value()) {
    shape_ok = p.operation.has_value() && !wire::HasResult(*p.operation);
  }
  if (!shape_ok) {
    LogWarning("response result does not match the operation",
               {{"connection_id", connection_id_}, {"operation", p.operation_name}});
    return wire::kCloseCorrelation;
  }
  Pending done = std::move(p);
  pending_.erase(it);
  answered_.insert(r.id);
  if (!done.done) {
    LogInfo("late response after the wait ended", {{"operation", done.operation_name}});
    return std::nullopt;
  }
  std::optional<std::string> problem = EvidenceProblem(done, r.id, r);
  if (!problem.has_value()) {
    // The frame exactly as the node sent it, which the codec has just accepted: no second
    // parse of what may be a 64 MiB read_file result.
    done.done(RequestOutcome{200, std::string(raw), decoded - done.sent_at});
    return std::nullopt;
  }
  // Only an error response (no result, a few hundred bytes) has an evidence problem.
  json body = json::parse(raw, nullptr, false);
  if (body.is_discarded()) body = json::object();  // Decode accepted it: cannot happen
  body["node_error_code"] = *r.error_code;
  body["error_code"] = "unconfirmed";
  body["evidence_problem"] = *problem;
  done.done(RequestOutcome{200, body.dump(), decoded - done.sent_at});
  return std::nullopt;
}

void RequestTracker::FailAll(std::string_view why) {
  closed_ = true;
  std::vector<std::pair<std::string, RequestDone>> waiters;
  for (auto& [id, p] : pending_) {
    if (p.done) waiters.emplace_back(id, std::move(p.done));
  }
  pending_.clear();
  for (auto& [id, d] : waiters) {
    d(Error(502, absl::StrCat("the connection closed before the response: ", std::string(why)),
            id));
  }
}

}  // namespace sn::devcore
