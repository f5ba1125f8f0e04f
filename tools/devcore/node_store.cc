#include "tools/devcore/node_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "tools/devcore/crypto.h"

namespace sn::devcore {
namespace {

using json = nlohmann::json;

constexpr int64_t kStateSchema = 1;
constexpr size_t kMaxStateFileBytes = size_t{64} << 20;

// Typed member access that never throws: false when the member is missing or mistyped.
bool GetString(const json& o, const char* key, std::string* out) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return false;
  *out = it->get_ref<const std::string&>();
  return true;
}
bool GetInt(const json& o, const char* key, int64_t* out) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_number_integer()) return false;
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(u);
  } else {
    *out = it->get<int64_t>();
  }
  return true;
}
bool GetBool(const json& o, const char* key, bool* out) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_boolean()) return false;
  *out = it->get<bool>();
  return true;
}

absl::Status Torn(std::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat("devcore state file is torn or foreign: ", std::string(what)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<NodeStore>> NodeStore::Open(const std::string& state_dir) {
  RETURN_IF_ERROR(MakeDirs(state_dir));
  std::unique_ptr<NodeStore> store(new NodeStore(state_dir));
  auto text = ReadSmallFile(absl::StrCat(state_dir, "/", std::string(kStateFileName)), kMaxStateFileBytes);
  if (text.ok()) {
    RETURN_IF_ERROR(store->Load(*text));
  } else if (!absl::IsNotFound(text.status())) {
    return text.status();
  }
  return store;
}

absl::Status NodeStore::Load(std::string_view text) {
  const json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Torn("not a JSON object");
  int64_t schema = 0;
  if (!GetInt(doc, "schema", &schema) || schema != kStateSchema) return Torn("schema");
  auto tokens = doc.find("enrollment_token_sha256");
  auto nodes = doc.find("nodes");
  if (tokens == doc.end() || !tokens->is_array()) return Torn("enrollment_token_sha256");
  if (nodes == doc.end() || !nodes->is_array()) return Torn("nodes");
  for (const json& t : *tokens) {
    if (!t.is_string()) return Torn("enrollment token hash");
    token_hashes_.push_back(t.get<std::string>());
  }
  for (const json& n : *nodes) {
    if (!n.is_object()) return Torn("node");
    NodeRecord r;
    if (!GetString(n, "node_id", &r.node_id) ||
        !GetString(n, "installation_id", &r.installation_id) ||
        !GetString(n, "provider", &r.provider) ||
        !GetString(n, "backend_fingerprint", &r.backend_fingerprint) ||
        !GetInt(n, "deployment_generation", &r.deployment_generation) ||
        !GetString(n, "specification_digest", &r.specification_digest) ||
        !GetBool(n, "generation_management", &r.generation_management) ||
        !GetInt(n, "max_active", &r.max_active) || !GetInt(n, "max_retained", &r.max_retained) ||
        !GetString(n, "credential_sha256", &r.credential_sha256) ||
        !GetInt(n, "owner_epoch", &r.owner_epoch) || r.owner_epoch < 1) {
      return Torn("node member");
    }
    const std::string id = r.node_id;
    if (!nodes_.emplace(id, std::move(r)).second) return Torn("duplicate node");
  }
  return absl::OkStatus();
}

std::string NodeStore::Serialize() const {
  json doc = json::object();
  doc["schema"] = kStateSchema;
  doc["enrollment_token_sha256"] = token_hashes_;
  json nodes = json::array();
  for (const auto& [id, r] : nodes_) {
    nodes.push_back({{"node_id", r.node_id},
                     {"installation_id", r.installation_id},
                     {"provider", r.provider},
                     {"backend_fingerprint", r.backend_fingerprint},
                     {"deployment_generation", r.deployment_generation},
                     {"specification_digest", r.specification_digest},
                     {"generation_management", r.generation_management},
                     {"max_active", r.max_active},
                     {"max_retained", r.max_retained},
                     {"credential_sha256", r.credential_sha256},
                     {"owner_epoch", r.owner_epoch}});
  }
  doc["nodes"] = std::move(nodes);
  return doc.dump(2) + "\n";
}

absl::Status NodeStore::Persist() const {
  return WriteFileAtomically(absl::StrCat(state_dir_, "/", std::string(kStateFileName)), Serialize(), 0600);
}

absl::StatusOr<std::string> NodeStore::IssueEnrollmentToken() {
  ASSIGN_OR_RETURN(std::string token, RandomHex(32));
  token_hashes_.push_back(Sha256Hex(token));
  absl::Status st = Persist();
  if (!st.ok()) {
    token_hashes_.pop_back();
    return st;
  }
  return token;
}

absl::StatusOr<NodeStore::Enrolled> NodeStore::Enroll(std::string_view token, NodeRecord node) {
  const std::string token_hash = Sha256Hex(token);
  size_t match = token_hashes_.size();
  for (size_t i = 0; i < token_hashes_.size(); ++i) {
    if (ConstantTimeEquals(token_hashes_[i], token_hash)) match = i;
  }
  if (match == token_hashes_.size()) {
    return absl::UnauthenticatedError("unknown or already used enrollment token");
  }
  for (const auto& [id, r] : nodes_) {
    if (r.installation_id == node.installation_id) {
      return absl::AlreadyExistsError("installation already enrolled");
    }
  }
  ASSIGN_OR_RETURN(std::string node_id, NewUuid());
  ASSIGN_OR_RETURN(std::string credential, RandomHex(32));
  node.node_id = node_id;
  node.credential_sha256 = Sha256Hex(credential);
  node.owner_epoch = 1;

  const std::vector<std::string> saved_tokens = token_hashes_;
  token_hashes_.erase(token_hashes_.begin() + static_cast<std::ptrdiff_t>(match));
  nodes_.emplace(node_id, std::move(node));
  absl::Status st = Persist();
  if (!st.ok()) {
    token_hashes_ = saved_tokens;
    nodes_.erase(node_id);
    return st;
  }
  return Enrolled{node_id, credential};
}

const NodeRecord* NodeStore::Find(std::string_view node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second;
}

bool NodeStore::CredentialMatches(std::string_view node_id, std::string_view credential) const {
  const NodeRecord* r = Find(node_id);
  if (r == nullptr || r->credential_sha256.empty()) return false;
  return ConstantTimeEquals(r->credential_sha256, Sha256Hex(credential));
}

const NodeRecord* NodeStore::FindByCredential(std::string_view credential) const {
  const std::string hash = Sha256Hex(credential);
  const NodeRecord* found = nullptr;
  for (const auto& [id, r] : nodes_) {
    if (!r.credential_sha256.empty() && ConstantTimeEquals(r.credential_sha256, hash)) {
      found = &r;
    }
  }
  return found;
}

absl::StatusOr<int64_t> NodeStore::BumpOwnerEpoch(std::string_view node_id) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return absl::NotFoundError("unknown node");
  if (it->second.owner_epoch == INT64_MAX) {
    return absl::OutOfRangeError("owner epoch exhausted");
  }
  ++it->second.owner_epoch;
  absl::Status st = Persist();
  if (!st.ok()) {
    --it->second.owner_epoch;
    return st;
  }
  return it->second.owner_epoch;
}

absl::Status NodeStore::RevokeCredential(std::string_view node_id) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return absl::NotFoundError("unknown node");
  std::string saved = std::move(it->second.credential_sha256);
  it->second.credential_sha256.clear();
  absl::Status st = Persist();
  if (!st.ok()) it->second.credential_sha256 = std::move(saved);
  return st;
}

absl::Status NodeStore::UpdateHelloFacts(std::string_view node_id,
                                         std::string_view backend_fingerprint,
                                         int64_t max_active, int64_t max_retained) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return absl::NotFoundError("unknown node");
  NodeRecord& r = it->second;
  if (r.backend_fingerprint == backend_fingerprint && r.max_active == max_active &&
      r.max_retained == max_retained) {
    return absl::OkStatus();
  }
  NodeRecord saved = r;
  r.backend_fingerprint = std::string(backend_fingerprint);
  r.max_active = max_active;
  r.max_retained = max_retained;
  absl::Status st = Persist();
  if (!st.ok()) r = std::move(saved);
  return st;
}

NodeRuntime& NodeStore::Runtime(std::string_view node_id) {
  auto it = runtime_.find(node_id);
  if (it == runtime_.end()) it = runtime_.emplace(std::string(node_id), NodeRuntime{}).first;
  return it->second;
}

const NodeRuntime* NodeStore::FindRuntime(std::string_view node_id) const {
  auto it = runtime_.find(node_id);
  return it == runtime_.end() ? nullptr : &it->second;
}

std::vector<const NodeRecord*> NodeStore::Nodes() const {
  std::vector<const NodeRecord*> out;
  out.reserve(nodes_.size());
  for (const auto& [id, r] : nodes_) out.push_back(&r);
  return out;
}

}  // namespace sn::devcore
