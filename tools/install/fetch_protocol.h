// What crosses the socketpair between the installer (root) and its network child
// (fetcher.h): a closed set of small typed messages, each in one frame, each field bounded.
//
// A frame is a 4-byte big-endian length and that many payload bytes; the reader refuses a
// length over its bound before reading the payload. A payload is a sequence of fields: an
// integer is 8 bytes big-endian, a string is a 4-byte length and its bytes. Every decoder
// reads exactly the fields of its message with a bound per string, refuses trailing bytes,
// and applies the lexical rules of the wire (common/wire/validate.h) to every value root
// keeps, so root never parses anything richer than this from the child: no JSON, no HTTP.
//
// The child is the side that talks to Core; root treats everything it says as untrusted:
// a decoding failure is DataLoss ("out of protocol"), and release bytes are re-verified by
// root (signature, SHA-256), so the child is trusted for transport only.
#ifndef SANDBOX_NODE_TOOLS_INSTALL_FETCH_PROTOCOL_H_
#define SANDBOX_NODE_TOOLS_INSTALL_FETCH_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"

namespace sn::install::fetchwire {

// Requests (root -> child) and replies (child -> root). One request, then its reply; an
// artifact's reply is any number of kData frames and then one kResult.
enum class Kind : uint8_t {
  kReady = 1,       // child -> root once, after confinement: nothing else
  kCurrent = 2,     // GET /releases/current -> {source}
  kMetadata = 3,    // the three metadata files of a release, verified by the child
  kEnroll = 4,      // POST the enroll route -> the enrollment answer
  kConfiguration = 5,  // the generation's specification, verified by the child -> its fields
  kArtifact = 6,    // an artifact's bytes in kData frames
  kData = 7,        // child -> root: a piece of an artifact
  kResult = 8,      // child -> root: the reply to a request
};

// Bounds. A request is small (the largest is the enrollment: token, fingerprint and ids).
inline constexpr size_t kMaxRequestBytes = 16 * 1024;
inline constexpr size_t kMaxMessageBytes = 2048;   // a failure's text, truncated by the child
// agent/connection/http_client.h's piece size.
inline constexpr size_t kMaxDataPieceBytes = 256 * 1024;
inline constexpr size_t kMaxDataFrameBytes = kMaxDataPieceBytes + 16;
// The largest result: the metadata of a release (manifest, signature, sums) and framing.
size_t MaxResultBytes();

// DataLoss("out of protocol: <what>"): how root names anything the child should not have sent.
absl::Status OutOfProtocol(std::string_view what);

// ---- frames ----------------------------------------------------------------------------

// Writes [length][kind][payload] (blocking; EINTR retried; MSG_NOSIGNAL).
absl::Status WriteFrame(int fd, Kind kind, std::string_view payload);

struct Frame {
  Kind kind = Kind::kResult;
  std::string payload;
};
// Reads one frame of at most `max_bytes` (kind byte included), waiting at most until
// `deadline` for each piece. OutOfRange at EOF before a frame starts; DeadlineExceeded when
// the deadline passes; DataLoss for a truncated or oversized frame or an unknown kind.
absl::StatusOr<Frame> ReadFrame(int fd, size_t max_bytes, absl::Time deadline);

// ---- payloads ----------------------------------------------------------------------------

class FieldWriter {
 public:
  FieldWriter& U64(uint64_t v);
  FieldWriter& I64(int64_t v) { return U64(static_cast<uint64_t>(v)); }
  FieldWriter& Str(std::string_view s);
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Every getter fails (and the reader stays failed) on a short payload or a string longer
// than its bound; Finish() fails on trailing bytes. The status names the field.
class FieldReader {
 public:
  explicit FieldReader(std::string_view payload) : in_(payload) {}
  bool U64(std::string_view field, uint64_t* out);
  bool I64(std::string_view field, int64_t* out);
  bool Str(std::string_view field, size_t max_bytes, std::string* out);
  absl::Status Finish();
  // Fails the reader (a value broke its rule); returns false.
  bool Fail(std::string_view field, std::string_view why);
  const absl::Status& status() const { return status_; }

 private:
  std::string_view in_;
  absl::Status status_;
};

// ---- the reply's status --------------------------------------------------------------------

// A status as the child reports it: its code, its release failure class (failure.h), and a
// message the child truncates to kMaxMessageBytes. Root rebuilds it with the class payload
// and with every byte outside printable ASCII replaced by '?' (it is printed on a terminal).
void PutStatus(FieldWriter& w, const absl::Status& s);
bool GetStatus(FieldReader& r, absl::Status* out);

// ---- typed messages ------------------------------------------------------------------------

struct ConfigurationRequest {
  std::string credential;  // a secret: only over the socketpair
  int64_t generation = 0;
  std::string specification_digest;
  std::string provider;
};
std::string EncodeConfigurationRequest(const ConfigurationRequest& r);
absl::StatusOr<ConfigurationRequest> DecodeConfigurationRequest(std::string_view payload);

struct ArtifactRequest {
  std::string source;
  wire::RuntimeArtifact artifact;
};
std::string EncodeArtifactRequest(const ArtifactRequest& r);
absl::StatusOr<ArtifactRequest> DecodeArtifactRequest(std::string_view payload);

std::string EncodeEnrollRequest(const wire::EnrollRequest& r);
absl::StatusOr<wire::EnrollRequest> DecodeEnrollRequest(std::string_view payload);

// The three metadata files of a release, as the child received them and verified them.
struct MetadataFiles {
  std::string manifest;
  std::string signature;
  std::string sums;
};

// Result payloads: the status, then (when OK) the typed value.
std::string EncodeStatusResult(const absl::Status& s);
std::string EncodeCurrentResult(const std::string& source);
std::string EncodeMetadataResult(const MetadataFiles& files);
std::string EncodeEnrollResult(const wire::EnrollResponse& r);
std::string EncodeConfigurationResult(const wire::SpecificationDocument& d);

// Decoders of result payloads (root). The outer StatusOr is the protocol (DataLoss when the
// payload is malformed or a value breaks its rule); the inner status is the child's answer.
// A bare status result returns the protocol's status and puts the child's answer in `*child`
// (an absl::StatusOr<absl::Status> would take an error for its value).
absl::Status DecodeStatusResult(std::string_view payload, absl::Status* child);
absl::StatusOr<absl::StatusOr<std::string>> DecodeCurrentResult(std::string_view payload);
absl::StatusOr<absl::StatusOr<MetadataFiles>> DecodeMetadataResult(std::string_view payload);
absl::StatusOr<absl::StatusOr<wire::EnrollResponse>> DecodeEnrollResult(std::string_view payload);
absl::StatusOr<absl::StatusOr<wire::SpecificationDocument>> DecodeConfigurationResult(
    std::string_view payload);

}  // namespace sn::install::fetchwire

#endif  // SANDBOX_NODE_TOOLS_INSTALL_FETCH_PROTOCOL_H_
