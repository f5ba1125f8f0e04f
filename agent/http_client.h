// A small blocking HTTP(S) client for the machine connection API routes (spec/wire.md §6):
// the same origin rules and TLS verification as the WebSocket transport (tls.h). Used by
// `agent enroll`, which has no event loop of its own. Beast headers stay in the .cc.
#ifndef SANDBOX_NODE_AGENT_HTTP_CLIENT_H_
#define SANDBOX_NODE_AGENT_HTTP_CLIENT_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/config.h"

namespace sn::agent {

struct HttpCallSpec {
  std::string method;  // "GET" or "POST"
  std::string target;  // path and query
  std::string body;    // sent with Content-Type: application/json when non-empty
  std::optional<std::string> bearer;  // a secret: only ever written into Authorization
  absl::Duration timeout = absl::Seconds(30);
  size_t max_body_bytes = 1 << 20;
};

struct HttpResult {
  int status = 0;
  std::string body;
};

// One request on a fresh connection. Unavailable for DNS, TCP, TLS (including certificate
// verification: the message says so), timeout and malformed or oversized responses.
absl::StatusOr<HttpResult> HttpCall(const Origin& origin,
                                    const std::optional<std::string>& ca_bundle,
                                    const HttpCallSpec& spec);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_HTTP_CLIENT_H_
