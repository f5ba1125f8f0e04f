#include "privhelper/rpc/execute_check.h"

#include "common/wire/argument_rules.h"
#include "proto/execute_stream.h"
#include "proto/operation_args.h"
#include "proto/operation_of.h"

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;
namespace rules = ::sn::wire::rules;

Refusal Refuse(pb::Refusal kind, pb::ErrorCode code, std::string reason) {
  return Refusal{kind, code, std::move(reason)};
}

Refusal Invalid(std::string member) {
  return Refuse(pb::REFUSAL_ARGUMENTS, pb::ERROR_CODE_INVALID, "bad " + member);
}

// A message carrying fields this privhelper does not know is refused: the agent and privhelper
// ship together, so an unknown field is a confused or hostile caller.
bool HasUnknownFields(const google::protobuf::Message& m) {
  return !m.GetReflection()->GetUnknownFields(m).empty();
}

}  // namespace

Refusal CheckArguments(const pb::ExecuteRequest& r) {
  if (!rules::RequestId(r.request_id())) return Invalid("request_id");
  if (!rules::Generation(r.generation())) return Invalid("generation");
  if (!rules::TimeoutMs(r.budget_ms())) return Invalid("budget_ms");
  if (!OperationOf(r).has_value()) return Invalid("operation (none set)");
  const google::protobuf::Message* args = ArgumentsOf(r);
  if (HasUnknownFields(r) || args == nullptr || HasUnknownFields(*args)) {
    return Invalid("message (unknown fields)");
  }
  const std::string* payload = Payload(r);
  if (payload == nullptr && r.payload_bytes() != 0) {
    return Invalid("payload_bytes (the operation has no payload)");
  }
  // The payload is declared: never negative, and its member itself is empty (the bytes follow
  // as chunks).
  std::optional<size_t> declared;
  if (payload != nullptr && r.payload_bytes() >= 0 && payload->empty()) {
    declared = static_cast<size_t>(r.payload_bytes());
  }
  std::optional<std::string> broken = BrokenArgument(r, declared);
  return broken.has_value() ? Invalid(*broken) : Refusal{};
}

Refusal ReadPayload(const std::function<bool(pb::ExecuteMessage*)>& next, size_t bytes,
                    pb::ExecuteRequest* req) {
  std::string* payload = MutablePayload(req);
  if (payload == nullptr && bytes > 0) return Invalid("payload (the operation has none)");
  if (payload != nullptr) payload->reserve(bytes);
  pb::ExecuteMessage m;
  size_t got = 0;
  while (got < bytes) {
    if (!next(&m) || !m.has_payload() || m.payload().empty() ||
        m.payload().size() > kMaxPayloadChunkBytes || m.payload().size() > bytes - got) {
      return Invalid("payload (the chunks do not match payload_bytes)");
    }
    payload->append(m.payload());
    got += m.payload().size();
  }
  if (next(&m)) return Invalid("payload (a message after it)");
  req->set_payload_bytes(0);
  return {};
}

Refusal Resolve(const pb::ExecuteRequest& r, const ResolveContext& ctx, ResolvedCall* out) {
  if (ctx.installation_id.empty() || r.installation_id() != ctx.installation_id) {
    return Refuse(pb::REFUSAL_INSTALLATION, pb::ERROR_CODE_UNAVAILABLE,
                  "the request names another installation");
  }
  std::shared_ptr<const store::HeldGeneration> held =
      ctx.generations == nullptr ? nullptr : ctx.generations->Find(r.generation());
  if (held == nullptr) {
    return Refuse(pb::REFUSAL_GENERATION_NOT_HELD, pb::ERROR_CODE_UNCONFIRMED,
                  "privhelper does not hold the generation");
  }
  const bool needs_ready = SlotOfRequest(r) == Slot::kActive;  // it starts compute
  if (needs_ready && !ctx.generations->Ready(r.generation())) {
    return Refuse(pb::REFUSAL_GENERATION_NOT_READY, pb::ERROR_CODE_UNCONFIRMED,
                  "the generation is held but not ready (it needs repair)");
  }
  *out = ResolvedCall{};
  out->max_active = ctx.max_active;
  out->max_retained = ctx.max_retained;
  if (r.has_create()) {
    const std::string* native = held->NativeImage(r.create().image());
    if (native == nullptr) return Invalid("create.image (not in the generation's specification)");
    out->native_image = *native;
  }
  return {};
}

}  // namespace sn::privhelper
