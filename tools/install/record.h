// The installer's durable records (docs/formats.md, "Installer records"). Pure codecs, any
// thread; decoders report a torn or foreign record as DataLoss naming the member, never guess.
//
//   install/pending.json   (root, 0600) written right after Core accepted the enrollment and
//                          before anything else is written: the enrollment answer (with the
//                          node credential, a secret), the installation identity it was made
//                          for and the host program release the run is pinned to. A rerun
//                          resumes from it and never enrolls again.
//   install/installed.json (root, 0600) the same record without the credential, phase
//                          "installed", once every step is done; pending.json is then removed.
//   privhelper.runtime.json (root, 0600) the verified checksums of the Runtime files of the
//                          enrolled generation (beside privhelper's state).
//   host-program.json      (root, 0644) the host program's release and the checksums of the
//                          executables installed from it.
#ifndef SANDBOX_NODE_TOOLS_INSTALL_RECORD_H_
#define SANDBOX_NODE_TOOLS_INSTALL_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/wire/http_bodies.h"

namespace sn::install {

inline constexpr size_t kMaxRecordBytes = 64 * 1024;

enum class Phase { kEnrolled, kInstalled };

struct InstallRecord {
  Phase phase = Phase::kEnrolled;
  std::string core_origin;
  // The host program release this installation is pinned to and the SHA-256 of its exact
  // (signed) manifest bytes.
  std::string host_source;
  std::string host_manifest_sha256;
  std::string installation_id;  // uuid, the one enrolled; privhelper's installation.json
  std::string provider;
  bool generation_management = false;
  std::string agent_user;
  // Core's enrollment answer (spec/wire.md §6).
  std::string node_id;
  std::string credential;  // set iff phase == kEnrolled
  int64_t deployment_generation = 0;
  std::string specification_digest;
  std::string runtime_source;
  bool operator==(const InstallRecord&) const = default;
};

std::string EncodeInstallRecord(const InstallRecord& r);
absl::StatusOr<InstallRecord> DecodeInstallRecord(std::string_view text);

// One file with its verified checksum.
struct RecordedFile {
  wire::RuntimeArtifact artifact;
  std::string path;  // where it is installed; empty for Runtime files (privhelper keeps them)
  bool operator==(const RecordedFile&) const = default;
};

struct ChecksumRecord {
  std::string source;                // the release
  std::string manifest_sha256;       // of its exact manifest bytes
  int64_t generation = 0;            // Runtime record only: the enrolled generation
  std::string specification_digest;  // Runtime record only
  std::vector<RecordedFile> files;
  // Runtime record only: the images of the verified specification with their acceptable
  // native identities (what privhelper's import must resolve to).
  std::vector<wire::SpecImage> images;
  bool operator==(const ChecksumRecord&) const = default;
};

// `runtime` selects the Runtime record's form (generation, digest and images present, no paths).
std::string EncodeChecksumRecord(const ChecksumRecord& r, bool runtime);
absl::StatusOr<ChecksumRecord> DecodeChecksumRecord(std::string_view text, bool runtime);

// Every refusal of the installer: FailedPrecondition "refused: <why>" (exit status 3).
absl::Status Refuse(std::string_view why);

}  // namespace sn::install

#endif  // SANDBOX_NODE_TOOLS_INSTALL_RECORD_H_
