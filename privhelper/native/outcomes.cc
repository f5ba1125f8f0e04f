#include "privhelper/native/outcomes.h"

#include <map>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/sha256.h"

namespace sn::native {

pb::ExecuteResponse ErrorResponse(pb::ErrorCode code, const CallControl& ctl) {
  pb::ExecuteResponse r;
  r.set_error_code(code);
  r.set_native_call_started(ctl.native_started);
  return r;
}

pb::ExecuteResponse SandboxOk(const std::string& sandbox_id, const std::string& native_id,
                              pb::SandboxState state, const CallControl& ctl) {
  pb::ExecuteResponse r;
  r.set_native_call_started(ctl.native_started);
  pb::SandboxResult* s = r.mutable_sandbox();
  s->set_sandbox_id(sandbox_id);
  s->set_native_id(native_id);
  s->set_state(state);
  return r;
}

pb::ExecuteResponse NoResultOk(const CallControl& ctl) {
  pb::ExecuteResponse r;
  r.set_native_call_started(ctl.native_started);
  return r;
}

bool Expired(const CallControl& ctl) {
  return absl::Now() >= ctl.deadline || (ctl.cancelled != nullptr && ctl.cancelled->load());
}

int64_t CountWithInFlight(int64_t counted, const std::set<std::string>& counted_sandboxes,
                          const std::vector<std::string>& in_flight, const std::string& own) {
  int64_t n = counted;
  std::set<std::string_view> added;
  auto add = [&](const std::string& id) {
    if (!counted_sandboxes.contains(id) && added.insert(id).second) ++n;
  };
  for (const std::string& id : in_flight) add(id);
  add(own);
  return n;
}

std::string CreateArgsDigest(const pb::CreateArgs& a) {
  std::map<std::string, std::string> env(a.env().begin(), a.env().end());
  nlohmann::json doc = {
      {"image", a.image()},
      {"command", std::vector<std::string>(a.command().begin(), a.command().end())},
      {"env", env},
      {"cpu_millis", a.cpu_millis()},
      {"memory_bytes", a.memory_bytes()}};
  return Sha256Hex(doc.dump());
}

}  // namespace sn::native
