#include "tools/devcore/node_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "tools/devcore/crypto.h"

namespace sn::devcore {
namespace {

using json = nlohmann::json;

// Schema 2 adds deployment, announced_generations and dropped to every node; a schema 1 file
// loads with them empty and is written as schema 2 at the next change.
constexpr int64_t kStateSchema = 2;
constexpr size_t kMaxStateFileBytes = size_t{64} << 20;

// Typed member access that never throws: false when the member is missing or mistyped.
bool GetString(const json& o, const char* key, std::string* out) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return false;
  *out = it->get_ref<const std::string&>();
  return true;
}
bool IntValue(const json& v, int64_t* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(u);
  } else {
    *out = v.get<int64_t>();
  }
  return true;
}
bool GetInt(const json& o, const char* key, int64_t* out) {
  auto it = o.find(key);
  return it != o.end() && IntValue(*it, out);
}
bool GetBool(const json& o, const char* key, bool* out) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_boolean()) return false;
  *out = it->get<bool>();
  return true;
}

bool IsLowerHexDigest(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// The generation-management members of a schema 2 node; false when any is malformed.
bool LoadGenerationFacts(const json& n, NodeRecord* r) {
  auto dep = n.find("deployment");
  auto announced = n.find("announced_generations");
  auto dropped = n.find("dropped");
  if (dep == n.end() || announced == n.end() || !announced->is_array() || dropped == n.end() ||
      !dropped->is_array()) {
    return false;
  }
  if (!dep->is_null()) {
    if (!dep->is_object()) return false;
    DeploymentRecord d;
    if (!GetInt(*dep, "generation", &d.generation) || d.generation < 1) return false;
    auto serving = dep->find("serving_generation");
    if (serving == dep->end()) return false;
    if (!serving->is_null()) {
      int64_t g = 0;
      if (!GetInt(*dep, "serving_generation", &g) || g < 1) return false;
      d.serving_generation = g;
    }
    r->deployment = d;
  }
  for (const json& a : *announced) {
    int64_t g = 0;
    if (!IntValue(a, &g) || g < 1) return false;
    if (!r->announced_generations.empty() && r->announced_generations.back() >= g) return false;
    r->announced_generations.push_back(g);
  }
  for (const json& d : *dropped) {
    GenerationRef ref;
    if (!d.is_object() || !GetInt(d, "generation", &ref.generation) || ref.generation < 1 ||
        !GetString(d, "specification_digest", &ref.specification_digest) ||
        !IsLowerHexDigest(ref.specification_digest)) {
      return false;
    }
    if (!r->dropped.empty() && !(r->dropped.back() < ref)) return false;
    r->dropped.push_back(std::move(ref));
  }
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
  if (!GetInt(doc, "schema", &schema) || (schema != 1 && schema != kStateSchema)) {
    return Torn("schema");
  }
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
    if (schema == kStateSchema && !LoadGenerationFacts(n, &r)) {
      return Torn("node generation member");
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
    json& n = nodes.back();
    n["deployment"] = nullptr;
    if (r.deployment.has_value()) {
      n["deployment"] = {{"generation", r.deployment->generation},
                         {"serving_generation", r.deployment->serving_generation.has_value()
                                                    ? json(*r.deployment->serving_generation)
                                                    : json(nullptr)}};
    }
    n["announced_generations"] = r.announced_generations;
    json dropped = json::array();
    for (const GenerationRef& d : r.dropped) {
      dropped.push_back({{"generation", d.generation},
                         {"specification_digest", d.specification_digest}});
    }
    n["dropped"] = std::move(dropped);
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

template <typename Fn>
absl::Status NodeStore::Change(std::string_view node_id, Fn&& change) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return absl::NotFoundError("unknown node");
  NodeRecord saved = it->second;
  if (!change(it->second)) return absl::OkStatus();  // nothing new: no write
  absl::Status st = Persist();
  if (!st.ok()) it->second = std::move(saved);
  return st;
}

absl::Status NodeStore::SetDeployment(std::string_view node_id,
                                      const DeploymentRecord& deployment) {
  return Change(node_id, [&](NodeRecord& r) {
    if (r.deployment == deployment) return false;
    r.deployment = deployment;
    return true;
  });
}

absl::Status NodeStore::RecordAnnounced(std::string_view node_id,
                                        const std::vector<int64_t>& generations) {
  return Change(node_id, [&](NodeRecord& r) {
    bool changed = false;
    for (int64_t g : generations) {
      auto pos = std::lower_bound(r.announced_generations.begin(),
                                  r.announced_generations.end(), g);
      if (pos != r.announced_generations.end() && *pos == g) continue;
      r.announced_generations.insert(pos, g);
      changed = true;
    }
    return changed;
  });
}

absl::Status NodeStore::RecordDrop(std::string_view node_id, const GenerationRef& drop) {
  return Change(node_id, [&](NodeRecord& r) {
    auto pos = std::lower_bound(r.dropped.begin(), r.dropped.end(), drop);
    if (pos != r.dropped.end() && *pos == drop) return false;
    r.dropped.insert(pos, drop);
    return true;
  });
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
