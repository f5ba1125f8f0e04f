// TLS client settings shared by the WebSocket transport and the HTTP client: certificate
// verification against the configured CA bundle (or the system roots) and host-name (or IP
// address) verification. Included only by .cc files (asio/OpenSSL headers).
#ifndef SANDBOX_NODE_AGENT_CONNECTION_TLS_H_
#define SANDBOX_NODE_AGENT_CONNECTION_TLS_H_

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace sn::agent {

// TLS 1.2 or later, verify_peer; trusted roots from `ca_bundle` (PEM) when set, else the
// system's default verify paths.
absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeClientTlsContext(
    const std::optional<std::string>& ca_bundle);

// On one connection: SNI for DNS names, and the name or IP address the certificate must match.
absl::Status ConfigurePeerVerification(SSL* ssl, const std::string& host);

// "TLS handshake failed: certificate verify failed (unable to get local issuer certificate)".
std::string DescribeTlsFailure(const std::string& what, const std::string& error_text,
                               SSL* ssl);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_CONNECTION_TLS_H_
