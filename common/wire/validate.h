// Lexical checks of the wire's string types (spec/wire.md §2.6, §5, §6). Pure functions, shared
// by the decoder, the encoder's tests, the agent and devcore.
#ifndef SANDBOX_NODE_COMMON_WIRE_VALIDATE_H_
#define SANDBOX_NODE_COMMON_WIRE_VALIDATE_H_

#include <cstddef>
#include <string_view>

namespace sn::wire {

// A wire string value: valid UTF-8 (no surrogates), no NUL, at most `max_bytes` bytes.
bool IsWireString(std::string_view s, size_t max_bytes);
// Lowercase canonical 8-4-4-4-12 hex.
bool IsUuid(std::string_view s);
// Exactly 64 lowercase hex characters.
bool IsDigest(std::string_view s);
// [a-z][a-z0-9_]{0,63}
bool IsCode(std::string_view s);
// RFC 3339 UTC: YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z, uppercase T and Z, real calendar dates,
// hours 00-23, minutes 00-59, seconds 00-59 (a leap second 60 is rejected).
bool IsTimestamp(std::string_view s);
// host.load_1m: (0|[1-9][0-9]{0,6})(\.[0-9]{1,6})? — applied to the number's raw JSON text.
bool IsLoadAverage(std::string_view s);
// A sandbox path (§5): starts with '/', <= kMaxPathBytes bytes, and every component between
// slashes is non-empty and neither "." nor "..". So "/" itself, "//x" and "/x/" are rejected.
bool IsSandboxPath(std::string_view s);
// create.env keys: [A-Za-z_][A-Za-z0-9_]{0,255}
bool IsEnvKey(std::string_view s);
// Release source names: [A-Za-z0-9][A-Za-z0-9._-]{0,63}
bool IsReleaseSource(std::string_view s);
// Artifact names: [A-Za-z0-9][A-Za-z0-9._-]{0,127}
bool IsArtifactName(std::string_view s);

}  // namespace sn::wire

#endif  // SANDBOX_NODE_COMMON_WIRE_VALIDATE_H_
