// The agent's configuration file (JSON): exactly the members below, nothing else.
//   core_origin (string, required)        https://core.example or, with insecure_allow_http,
//                                          http://host:port
//   state_dir (string, required)          absolute path of the node's state directory
//   privhelper_socket (string, required)  absolute path of privhelper's unix socket
//   release_public_key (string, required)  base64 (§2.6 canonical) of the 32-byte Ed25519
//                                          public key of the console releases this node
//                                          trusts (`release keygen` prints it)
//   ca_bundle (string, optional)          PEM file of trusted roots (else the system roots)
//   insecure_allow_http (bool, optional, default false)
//   generation_management (bool, optional, default false)
//   metrics (string, optional)            where `GET /metrics` is served: an absolute path (a
//                                          unix socket, mode 0660, the agent's group) or a
//                                          literal IP:port (127.0.0.1:9465, [::1]:9465); absent
//                                          = no metrics listener
//   metrics_allow_remote (bool, optional, default false)  needed for a non-loopback address
//   operation_record_max (integer, optional, default 262144, from 1024 to 4194304)  the most
//                                          mutations the durable operation record holds
//                                          (agent/requests/operation_record.h): size it as the
//                                          node's mutations per second x 86400 (the spec's 24 h);
//                                          each costs ~1 KiB of the state disk's journal and
//                                          ~0.5 KiB of the agent's memory at the bound
// Unknown members, wrong types and out-of-range values are start-up errors naming the member.
// The capacity limits (max_active, max_retained) are not the agent's: privhelper enforces its
// own configured limits and reports them through Probe; the agent reports what it learned in
// enroll and hello. A configuration that still names them is refused like any unknown member.
#ifndef SANDBOX_NODE_AGENT_STATE_CONFIG_H_
#define SANDBOX_NODE_AGENT_STATE_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/release/ed25519.h"

namespace sn::agent {

// A parsed Core origin: scheme://host[:port], no path, query, fragment or user info.
struct Origin {
  bool tls = true;    // https (wss) vs http (ws)
  std::string host;   // DNS name or IP literal (IPv6 without brackets)
  uint16_t port = 443;
  // "https://host[:port]" exactly as configured (normalised: no trailing slash).
  std::string text;
  // The value of the HTTP Host header ("host" or "host:port" when not the default port).
  std::string HostHeader() const;
};

// Parses an origin. Only "https" is accepted unless `allow_http`.
absl::StatusOr<Origin> ParseOrigin(std::string_view text, bool allow_http);

// The metrics listener: a unix socket at an absolute path, or a literal IP address and port.
struct MetricsListen {
  std::string path;  // set for a unix socket
  std::string ip;    // else: "127.0.0.1", "::1", ... (no brackets)
  uint16_t port = 0; // 0: any free port (tests)
  bool operator==(const MetricsListen&) const = default;
};

// `text` as the `metrics` member takes it: an absolute path, "IPv4:port" or "[IPv6]:port" with
// a literal address (no host names). A non-loopback address is refused unless `allow_remote`.
absl::StatusOr<MetricsListen> ParseMetricsListen(std::string_view text, bool allow_remote);

// The range and default of `operation_record_max` (run.cc checks they are the operation
// record's own: kMaxOperationRecords and its configurable bounds).
inline constexpr size_t kOperationRecordMaxDefault = 262144;
inline constexpr size_t kOperationRecordMaxLow = 1024;
inline constexpr size_t kOperationRecordMaxHigh = 4194304;

struct AgentConfig {
  std::string core_origin;
  Origin origin;
  std::string state_dir;
  std::string privhelper_socket;
  // The release key, always set once ParseConfig succeeded (optional only because PublicKey
  // has no empty state).
  std::optional<release::PublicKey> release_key;
  std::optional<std::string> ca_bundle;
  bool insecure_allow_http = false;
  bool generation_management = false;
  // Where `GET /metrics` is served (docs/operator-guide.md, "Metrics"); nullopt = off.
  std::optional<MetricsListen> metrics;
  // The operation record's bound (agent/requests/operation_record.h, kMaxOperationRecords).
  size_t operation_record_max = kOperationRecordMaxDefault;
};

// Parses the JSON text of a configuration file. InvalidArgument names the offending member.
absl::StatusOr<AgentConfig> ParseConfig(std::string_view json_text);
// Reads and parses a configuration file.
absl::StatusOr<AgentConfig> LoadConfig(const std::string& path);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_STATE_CONFIG_H_
