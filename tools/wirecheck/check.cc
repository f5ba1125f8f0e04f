#include "tools/wirecheck/check.h"

#include "common/wire/codec.h"

namespace sn::wirecheck {

Verdict Check(std::string_view bytes, wire::Role receiver) {
  absl::StatusOr<wire::Frame> f = wire::Decode(bytes, receiver, wire::kMaxFrameBytes);
  if (!f.ok()) {
    return {Verdict::kInvalid, "invalid: " + std::string(f.status().message())};
  }
  if (const wire::Request* r = std::get_if<wire::Request>(&*f); r && r->request_error) {
    return {Verdict::kInvalidRequest, "invalid-request: " + *r->request_error};
  }
  return {Verdict::kOk, "ok " + std::string(wire::FrameTypeName(wire::TypeOf(*f)))};
}

}  // namespace sn::wirecheck
