// CoreDownloads over the agent's HTTP client (agent/connection/http_client.h): the configuration
// route with the node credential, the release routes without it. Blocking; the preparation worker's
// thread (or `agent enroll`) calls it. Each call opens its own connection.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_CORE_DOWNLOADS_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_CORE_DOWNLOADS_H_

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "agent/generations/prepare_seams.h"
#include "agent/state/config.h"

namespace sn::agent {

class HttpCoreDownloads final : public CoreDownloads {
 public:
  // `credential` is the node credential (a secret, only ever sent in Authorization).
  HttpCoreDownloads(Origin origin, std::optional<std::string> ca_bundle, std::string credential,
                    absl::Duration timeout = absl::Seconds(60))
      : origin_(std::move(origin)),
        ca_bundle_(std::move(ca_bundle)),
        credential_(std::move(credential)),
        timeout_(timeout) {}

  absl::StatusOr<HttpResult> Get(const std::string& target, bool credentialed, size_t max_bytes,
                                 CancelToken* cancel) override;
  // `timeout` is the longest wait for the next bytes of the stream.
  absl::Status GetStream(const std::string& target, uint64_t range_from, const HttpStreamSink& sink,
                         CancelToken* cancel) override;

 private:
  Origin origin_;
  std::optional<std::string> ca_bundle_;
  std::string credential_;
  absl::Duration timeout_;
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_CORE_DOWNLOADS_H_
