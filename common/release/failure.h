// Typed failures of a release (spec/wire.md §6, §7): the three classes that, and only that,
// a node reports as `runtime_download_failed`.
//
//   provenance: the release's metadata cannot be trusted — a signature that does not verify,
//     a manifest that fails §6 or names another source, SHA256SUMS that disagrees with it;
//   transfer:   the bytes did not arrive — a refused connection, an HTTP status other than the
//     expected one, a stream cut before its end (the caller that moves bytes creates these);
//   checksum:   bytes arrived and differ from what the verified manifest declares — wrong
//     size or wrong SHA-256.
//
// A failure carries its class as its typed cause (common/error_cause.h: runtime_download_failed
// with the class as detail), so it survives being passed up through layers that only see
// absl::Status, and nobody parses messages. Every other failure (a local
// I/O error, a bad configuration, a specification that disagrees with its release) has no
// class and keeps its own diagnostic. Pure functions, any thread.
#ifndef SANDBOX_NODE_COMMON_RELEASE_FAILURE_H_
#define SANDBOX_NODE_COMMON_RELEASE_FAILURE_H_

#include <optional>
#include <string_view>

#include "absl/status/status.h"

namespace sn::release {

enum class FailureClass { kProvenance, kTransfer, kChecksum };

// "provenance", "transfer", "checksum".
std::string_view FailureClassName(FailureClass c);

// FailedPrecondition / Unavailable / DataLoss carrying the class payload.
absl::Status ProvenanceFailure(std::string_view message);
absl::Status TransferFailure(std::string_view message);
absl::Status ChecksumFailure(std::string_view message);

// The class of a failure made by the functions above; nullopt for OK and for any other status
// (whatever its code).
std::optional<FailureClass> FailureClassOf(const absl::Status& status);

}  // namespace sn::release

#endif  // SANDBOX_NODE_COMMON_RELEASE_FAILURE_H_
