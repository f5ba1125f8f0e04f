#include "common/release/verify.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json/base64.h"
#include "common/release/failure.h"
#include "common/release/layout.h"
#include "common/wire/validate.h"

namespace sn::release {
namespace {

std::string Quoted(std::string_view s) { return absl::StrCat("\"", std::string(s), "\""); }

}  // namespace

absl::StatusOr<std::string> DecodeSignatureFile(std::string_view contents) {
  if (!contents.empty() && contents.back() == '\n') contents.remove_suffix(1);
  if (contents.size() != kSignatureBase64Bytes) {
    return ProvenanceFailure("manifest.json.sig is not base64 of a 64-byte signature");
  }
  std::string raw;
  if (!json::Base64Decode(contents, kEd25519SignatureBytes, &raw).ok() ||
      raw.size() != kEd25519SignatureBytes) {
    return ProvenanceFailure("manifest.json.sig is not canonical base64 of 64 bytes");
  }
  return raw;
}

std::string FormatSignatureFile(std::string_view signature) {
  std::string out = json::Base64Encode(signature);
  out.push_back('\n');
  return out;
}

absl::StatusOr<std::vector<SumsEntry>> ParseSha256Sums(std::string_view contents) {
  if (contents.size() > kMaxSumsBytes) return ProvenanceFailure("SHA256SUMS is too large");
  std::vector<SumsEntry> out;
  size_t line_no = 0;
  while (!contents.empty()) {
    ++line_no;
    const size_t nl = contents.find('\n');
    if (nl == std::string_view::npos) {
      return ProvenanceFailure(absl::StrCat("SHA256SUMS line ", line_no, " has no newline"));
    }
    const std::string_view line = contents.substr(0, nl);
    contents.remove_prefix(nl + 1);
    if (line.size() < 67 || line.substr(64, 2) != "  " || !wire::IsDigest(line.substr(0, 64)) ||
        !wire::IsArtifactName(line.substr(66))) {
      return ProvenanceFailure(
          absl::StrCat("SHA256SUMS line ", line_no, " is not \"<sha256>  <artifact name>\""));
    }
    SumsEntry e{std::string(line.substr(0, 64)), std::string(line.substr(66))};
    if (!out.empty() && !(out.back().name < e.name)) {
      return ProvenanceFailure(absl::StrCat("SHA256SUMS line ", line_no,
                                            " is not in strictly ascending name order"));
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) return ProvenanceFailure("SHA256SUMS is empty");
  return out;
}

std::string FormatSha256Sums(const wire::ReleaseManifest& manifest) {
  std::vector<const wire::RuntimeArtifact*> sorted;
  for (const wire::RuntimeArtifact& a : manifest.artifacts) sorted.push_back(&a);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->name < b->name; });
  std::string out;
  for (const wire::RuntimeArtifact* a : sorted) absl::StrAppend(&out, a->sha256, "  ", a->name, "\n");
  return out;
}

const wire::RuntimeArtifact* VerifiedRelease::Find(std::string_view name) const {
  for (const wire::RuntimeArtifact& a : manifest_.artifacts) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

absl::StatusOr<VerifiedRelease> VerifyRelease(std::string_view expected_source,
                                              std::string manifest_bytes,
                                              std::string_view signature_file,
                                              std::string_view sums_file, const PublicKey& key) {
  if (manifest_bytes.size() > kMaxManifestBytes) {
    return ProvenanceFailure("manifest.json is larger than 1 MiB");
  }
  absl::StatusOr<std::string> signature = DecodeSignatureFile(signature_file);
  if (!signature.ok()) return signature.status();
  // The signature is checked before the manifest is parsed: unsigned bytes are never decoded.
  if (!key.Verify(manifest_bytes, *signature)) {
    return ProvenanceFailure("the manifest's signature does not verify with the release key");
  }
  absl::StatusOr<wire::ReleaseManifest> manifest = wire::DecodeReleaseManifest(manifest_bytes);
  if (!manifest.ok()) {
    return ProvenanceFailure(absl::StrCat("the manifest fails §6: ", manifest.status().message()));
  }
  if (manifest->source != expected_source) {
    return ProvenanceFailure(absl::StrCat("the manifest names source ", Quoted(manifest->source),
                                          ", not ", Quoted(expected_source)));
  }
  for (const wire::RuntimeArtifact& a : manifest->artifacts) {
    if (IsMetadataName(a.name)) {
      return ProvenanceFailure(
          absl::StrCat("the manifest names an artifact ", Quoted(a.name),
                       " like a release metadata file"));
    }
  }
  absl::StatusOr<std::vector<SumsEntry>> sums = ParseSha256Sums(sums_file);
  if (!sums.ok()) return sums.status();
  if (sums->size() != manifest->artifacts.size()) {
    return ProvenanceFailure("SHA256SUMS and the manifest list different artifacts");
  }
  VerifiedRelease out;
  out.manifest_ = *std::move(manifest);
  for (const SumsEntry& e : *sums) {
    const wire::RuntimeArtifact* a = out.Find(e.name);
    if (a == nullptr) {
      return ProvenanceFailure(
          absl::StrCat("SHA256SUMS lists ", Quoted(e.name), ", which the manifest does not"));
    }
    if (a->sha256 != e.sha256) {
      return ProvenanceFailure(absl::StrCat("SHA256SUMS and the manifest disagree about ",
                                            Quoted(e.name)));
    }
  }
  out.manifest_bytes_ = std::move(manifest_bytes);
  return out;
}

absl::Status CheckSpecificationAgainstManifest(const wire::SpecificationDocument& spec,
                                               const wire::ReleaseManifest& manifest) {
  if (spec.runtime_source != manifest.source) {
    return absl::InvalidArgumentError(
        absl::StrCat("the specification names release ", Quoted(spec.runtime_source),
                     " but the manifest is release ", Quoted(manifest.source)));
  }
  for (const wire::RuntimeArtifact& s : spec.artifacts) {
    const wire::RuntimeArtifact* m = nullptr;
    for (const wire::RuntimeArtifact& a : manifest.artifacts) {
      if (a.name == s.name) m = &a;
    }
    if (m == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the specification names artifact ", Quoted(s.name), ", which release ",
          Quoted(manifest.source), " does not have"));
    }
    if (m->kind != s.kind || m->sha256 != s.sha256 || m->size != s.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("artifact ", Quoted(s.name), " differs between the specification and "
                       "release ", Quoted(manifest.source), " (kind, sha256 or size)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sn::release
