#include "agent/connection/tls.h"

#include <arpa/inet.h>
#include <openssl/x509v3.h>

#include "absl/strings/str_cat.h"

namespace sn::agent {

absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeClientTlsContext(
    const std::optional<std::string>& ca_bundle) {
  auto ctx = std::make_shared<boost::asio::ssl::context>(boost::asio::ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  if (ca_bundle.has_value()) {
    ctx->load_verify_file(*ca_bundle, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot load ca_bundle ", *ca_bundle, ": ", ec.message()));
    }
  } else {
    ctx->set_default_verify_paths(ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot load the system CA roots: ", ec.message()));
    }
  }
  ctx->set_verify_mode(boost::asio::ssl::verify_peer, ec);
  if (ec) return absl::InternalError(absl::StrCat("TLS verify mode: ", ec.message()));
  return ctx;
}

absl::Status ConfigurePeerVerification(SSL* ssl, const std::string& host) {
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  in_addr a4;
  in6_addr a6;
  const bool is_ip = inet_pton(AF_INET, host.c_str(), &a4) == 1 ||
                     inet_pton(AF_INET6, host.c_str(), &a6) == 1;
  if (is_ip) {
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
      return absl::InternalError("cannot set the expected certificate IP address");
    }
    return absl::OkStatus();
  }
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size()) != 1) {
    return absl::InternalError("cannot set the expected certificate host name");
  }
  if (SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {
    return absl::InternalError("cannot set TLS SNI");
  }
  return absl::OkStatus();
}

std::string DescribeTlsFailure(const std::string& what, const std::string& error_text,
                               SSL* ssl) {
  std::string out = absl::StrCat(what, ": ", error_text);
  if (ssl != nullptr) {
    long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) {
      absl::StrAppend(&out, " (certificate verify failed: ",
                      X509_verify_cert_error_string(verify), ")");
    }
  }
  return out;
}

}  // namespace sn::agent
