#include "agent/state/config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/atomic_file.h"
#include "common/json/record.h"
#include "common/status_macros.h"

namespace sn::agent {
namespace {

using json::RecordObject;
using json::ValueType;

absl::Status MemberError(std::string_view member, std::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("configuration member \"", AV(member), "\": ", AV(problem)));
}

absl::StatusOr<std::string> GetString(RecordObject& obj, std::string_view member) {
  if (obj.TypeOf(member) != ValueType::kString) return MemberError(member, "must be a string");
  ASSIGN_OR_RETURN(std::string s, obj.String(member));
  if (s.empty()) return MemberError(member, "must not be empty");
  return s;
}

absl::StatusOr<bool> GetBool(RecordObject& obj, std::string_view member) {
  if (obj.TypeOf(member) != ValueType::kBool) {
    return MemberError(member, "must be a boolean (true or false)");
  }
  return obj.Bool(member);
}

absl::Status RequireAbsolute(const std::string& path, std::string_view member) {
  if (path.empty() || path[0] != '/') return MemberError(member, "must be an absolute path");
  return absl::OkStatus();
}

constexpr size_t kMaxConfigBytes = 1 << 20;

}  // namespace

std::string Origin::HostHeader() const {
  const bool v6 = host.find(':') != std::string::npos;
  std::string h = v6 ? absl::StrCat("[", host, "]") : host;
  if ((tls && port == 443) || (!tls && port == 80)) return h;
  return absl::StrCat(h, ":", port);
}

absl::StatusOr<Origin> ParseOrigin(std::string_view text_in, bool allow_http) {
  std::string text(text_in);
  while (!text.empty() && text.back() == '/') text.pop_back();
  Origin o;
  std::string rest;
  if (text.rfind("https://", 0) == 0) {
    o.tls = true;
    o.port = 443;
    rest = text.substr(8);
  } else if (text.rfind("http://", 0) == 0) {
    if (!allow_http) {
      return absl::InvalidArgumentError(
          "an http:// origin needs insecure_allow_http: true (development only)");
    }
    o.tls = false;
    o.port = 80;
    rest = text.substr(7);
  } else {
    return absl::InvalidArgumentError("the origin must start with https://");
  }
  if (rest.empty()) return absl::InvalidArgumentError("the origin has no host");
  if (rest.find_first_of("/?#@ ") != std::string::npos) {
    return absl::InvalidArgumentError(
        "the origin must be scheme://host[:port] without path, query, fragment or user info");
  }
  std::string port_text;
  if (rest[0] == '[') {
    size_t close = rest.find(']');
    if (close == std::string::npos) return absl::InvalidArgumentError("unterminated IPv6 host");
    o.host = rest.substr(1, close - 1);
    std::string after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return absl::InvalidArgumentError("garbage after the IPv6 host");
      port_text = after.substr(1);
    }
    in6_addr a6;
    if (inet_pton(AF_INET6, o.host.c_str(), &a6) != 1) {
      return absl::InvalidArgumentError("invalid IPv6 host");
    }
  } else {
    size_t colon = rest.find(':');
    o.host = rest.substr(0, colon);
    if (colon != std::string::npos) port_text = rest.substr(colon + 1);
  }
  if (o.host.empty()) return absl::InvalidArgumentError("the origin has no host");
  if (!port_text.empty() || rest.back() == ':') {
    uint32_t port = 0;
    if (!absl::SimpleAtoi(port_text, &port) || port == 0 || port > 65535) {
      return absl::InvalidArgumentError("invalid port in the origin");
    }
    o.port = static_cast<uint16_t>(port);
  }
  o.text = text;
  return o;
}

absl::StatusOr<AgentConfig> ParseConfig(std::string_view json_text) {
  // The trusted configuration is read like every durable record (common/json/record.h): a
  // member named twice is refused, not resolved to one of its values.
  absl::StatusOr<RecordObject> parsed =
      RecordObject::Parse(json_text, "configuration", kMaxConfigBytes);
  if (json::IsTornRecord(parsed.status())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "configuration is not one valid JSON object: ", parsed.status().message()));
  }
  if (!parsed.ok()) {  // a member named twice, named
    return absl::InvalidArgumentError(parsed.status().message());
  }
  RecordObject& doc = *parsed;
  static constexpr std::string_view kKnown[] = {
      "core_origin", "state_dir",           "privhelper_socket",    "release_public_key",
      "ca_bundle",   "insecure_allow_http", "generation_management", "metrics",
      "metrics_allow_remote", "operation_record_max"};
  for (const std::string& key : doc.Names()) {
    if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) {
      return MemberError(key, "unknown member");
    }
    if (doc.TypeOf(key) == ValueType::kNull) return MemberError(key, "must not be null");
  }
  for (const char* required :
       {"core_origin", "state_dir", "privhelper_socket", "release_public_key"}) {
    if (!doc.Has(required)) return MemberError(required, "is required");
  }
  AgentConfig c;
  ASSIGN_OR_RETURN(c.core_origin, GetString(doc, "core_origin"));
  ASSIGN_OR_RETURN(c.state_dir, GetString(doc, "state_dir"));
  RETURN_IF_ERROR(RequireAbsolute(c.state_dir, "state_dir"));
  ASSIGN_OR_RETURN(c.privhelper_socket, GetString(doc, "privhelper_socket"));
  RETURN_IF_ERROR(RequireAbsolute(c.privhelper_socket, "privhelper_socket"));
  ASSIGN_OR_RETURN(std::string key_text, GetString(doc, "release_public_key"));
  absl::StatusOr<release::PublicKey> key = release::PublicKey::FromBase64(key_text);
  if (!key.ok()) {
    return MemberError("release_public_key",
                       "must be the base64 of a 32-byte Ed25519 public key (release keygen "
                       "prints it)");
  }
  c.release_key = *std::move(key);
  if (doc.Has("ca_bundle")) {
    ASSIGN_OR_RETURN(std::string bundle, GetString(doc, "ca_bundle"));
    RETURN_IF_ERROR(RequireAbsolute(bundle, "ca_bundle"));
    c.ca_bundle = std::move(bundle);
  }
  if (doc.Has("insecure_allow_http")) {
    ASSIGN_OR_RETURN(c.insecure_allow_http, GetBool(doc, "insecure_allow_http"));
  }
  if (doc.Has("generation_management")) {
    ASSIGN_OR_RETURN(c.generation_management, GetBool(doc, "generation_management"));
  }
  absl::StatusOr<Origin> origin = ParseOrigin(c.core_origin, c.insecure_allow_http);
  if (!origin.ok()) return MemberError("core_origin", std::string(origin.status().message()));
  c.origin = *std::move(origin);
  bool allow_remote = false;
  if (doc.Has("metrics_allow_remote")) {
    ASSIGN_OR_RETURN(allow_remote, GetBool(doc, "metrics_allow_remote"));
  }
  if (doc.Has("metrics")) {
    ASSIGN_OR_RETURN(std::string listen, GetString(doc, "metrics"));
    absl::StatusOr<MetricsListen> m = ParseMetricsListen(listen, allow_remote);
    if (!m.ok()) return MemberError("metrics", std::string(m.status().message()));
    c.metrics = *std::move(m);
  } else if (allow_remote) {
    return MemberError("metrics_allow_remote", "without \"metrics\" there is nothing to allow");
  }
  if (doc.Has("operation_record_max")) {
    if (doc.TypeOf("operation_record_max") != ValueType::kNumber) {
      return MemberError("operation_record_max", "must be an integer");
    }
    absl::StatusOr<uint64_t> n = doc.Uint("operation_record_max");
    if (!n.ok() || *n < kOperationRecordMaxLow || *n > kOperationRecordMaxHigh) {
      return MemberError("operation_record_max",
                         absl::StrCat("must be an integer from ", kOperationRecordMaxLow, " to ",
                                      kOperationRecordMaxHigh));
    }
    c.operation_record_max = static_cast<size_t>(*n);
  }
  RETURN_IF_ERROR(doc.Finish());  // every member was taken above
  return c;
}

absl::StatusOr<MetricsListen> ParseMetricsListen(std::string_view text, bool allow_remote) {
  MetricsListen m;
  if (!text.empty() && text[0] == '/') {
    if (text.size() >= 108) return absl::InvalidArgumentError("a unix socket path of at most 107 bytes");
    m.path = std::string(text);
    return m;
  }
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(
        "an absolute path (a unix socket) or IP:port with a literal address, e.g. "
        "127.0.0.1:9465 or [::1]:9465");
  }
  std::string_view host = text.substr(0, colon);
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  uint32_t port = 0;
  if (!absl::SimpleAtoi(AV(text.substr(colon + 1)), &port) || port > 65535) {
    return absl::InvalidArgumentError("the port must be 0..65535");
  }
  m.ip = std::string(host);
  m.port = static_cast<uint16_t>(port);
  in_addr v4;
  in6_addr v6;
  bool loopback = false;
  if (!bracketed && inet_pton(AF_INET, m.ip.c_str(), &v4) == 1) {
    loopback = (ntohl(v4.s_addr) >> 24) == 127;
  } else if (bracketed && inet_pton(AF_INET6, m.ip.c_str(), &v6) == 1) {
    loopback = IN6_IS_ADDR_LOOPBACK(&v6);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", AV(host), "\" is not a literal address (IPv4, or IPv6 in brackets); host names "
        "are refused"));
  }
  if (!loopback && !allow_remote) {
    return absl::InvalidArgumentError(absl::StrCat(
        AV(host), " is not a loopback address: metrics carry no authentication, so a remote "
        "listener needs \"metrics_allow_remote\": true"));
  }
  return m;
}

absl::StatusOr<AgentConfig> LoadConfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile(path, kMaxConfigBytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read configuration file: ", text.status().message()));
  }
  return ParseConfig(*text);
}

}  // namespace sn::agent
