#include "privhelper/store/generations.h"

#include <charconv>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"
#include "privhelper/store/durable.h"

namespace sn::privhelper::store {
namespace {

using json = nlohmann::json;

constexpr char kSpecificationSuffix[] = ".specification";
constexpr char kFinalSuffix[] = ".json";
constexpr size_t kMaxFinalBytes = 64 * 1024;

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// The final configuration of `g` derived from its decoded specification. Docker: an image's
// native image is the first identity the specification lists (docs/protocol.md 12f).
HeldGeneration FromSpecification(int64_t g, std::string digest,
                                 const wire::SpecificationDocument& doc) {
  HeldGeneration h;
  h.generation = g;
  h.specification_digest = std::move(digest);
  for (const wire::SpecImage& i : doc.images) {
    h.images.push_back({i.name, i.identities.front()});
  }
  return h;
}

std::string EncodeFinal(const HeldGeneration& h, const std::string& installation,
                        const std::string& provider) {
  json images = json::array();
  for (const HeldImage& i : h.images) {
    images.push_back({{"name", i.name}, {"native_image", i.native_image}});
  }
  json doc = {{"schema", 1},
              {"installation_id", installation},
              {"generation", h.generation},
              {"specification_digest", h.specification_digest},
              {"provider", provider},
              {"images", images}};
  return doc.dump() + "\n";
}

absl::StatusOr<HeldGeneration> DecodeFinal(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, false);
  auto bad = [](std::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat("final configuration: ", AV(why)));
  };
  if (doc.is_discarded() || !doc.is_object() || doc.size() != 6) return bad("not the expected object");
  for (const char* m : {"schema", "installation_id", "generation", "specification_digest",
                        "provider", "images"}) {
    if (!doc.contains(m)) return bad(absl::StrCat("missing ", m));
  }
  if (doc["schema"] != 1 || !doc["generation"].is_number_integer() ||
      !doc["specification_digest"].is_string() || !doc["images"].is_array() ||
      !doc["installation_id"].is_string() || !doc["provider"].is_string()) {
    return bad("wrong member types");
  }
  HeldGeneration h;
  h.generation = doc["generation"].get<int64_t>();
  h.specification_digest = doc["specification_digest"].get<std::string>();
  if (h.generation <= 0 || !wire::IsDigest(h.specification_digest)) return bad("bad identity");
  for (const json& i : doc["images"]) {
    if (!i.is_object() || i.size() != 2 || !i.contains("name") || !i["name"].is_string() ||
        !i.contains("native_image") || !i["native_image"].is_string()) {
      return bad("bad image entry");
    }
    h.images.push_back({i["name"].get<std::string>(), i["native_image"].get<std::string>()});
  }
  return h;
}

// "<g><suffix>" -> g, or 0.
int64_t GenerationOf(std::string_view name, std::string_view suffix) {
  if (!absl::EndsWith(AV(name), AV(suffix))) return 0;
  std::string_view digits = name.substr(0, name.size() - suffix.size());
  int64_t g = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), g);
  if (ec != std::errc() || p != digits.data() + digits.size() || g <= 0 ||
      std::to_string(g) != digits) {
    return 0;
  }
  return g;
}

}  // namespace

const std::string* HeldGeneration::NativeImage(std::string_view name) const {
  for (const HeldImage& i : images) {
    if (i.name == name) return &i.native_image;
  }
  return nullptr;
}

std::string SpecificationRecordName(int64_t generation) {
  return absl::StrCat(generation, kSpecificationSuffix);
}

std::string FinalConfigurationName(int64_t generation) {
  return absl::StrCat(generation, kFinalSuffix);
}

GenerationStore::GenerationStore(Fs& fs, Dir dir, uint32_t owner, std::string installation_id,
                                 std::string provider)
    : fs_(fs),
      dir_(std::move(dir)),
      owner_(owner),
      installation_id_(std::move(installation_id)),
      provider_(std::move(provider)) {}

absl::StatusOr<std::unique_ptr<GenerationStore>> GenerationStore::Open(
    Fs& fs, const Dir& state, uint32_t owner, std::string installation_id,
    std::string provider) {
  ASSIGN_OR_RETURN(Dir node, OpenPrivateSubdir(fs, state, "node", owner));
  ASSIGN_OR_RETURN(Dir dir, OpenPrivateSubdir(fs, node, "generations", owner));
  RETURN_IF_ERROR(RemoveStrayTemporaries(fs, dir));
  std::unique_ptr<GenerationStore> store(new GenerationStore(
      fs, std::move(dir), owner, std::move(installation_id), std::move(provider)));
  ASSIGN_OR_RETURN(std::vector<std::string> names, fs.ListDir(store->dir_));
  for (const std::string& n : names) {
    if (const int64_t g = GenerationOf(n, kFinalSuffix); g > 0) {
      absl::StatusOr<std::shared_ptr<const HeldGeneration>> h = store->Load(g);
      if (!h.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "generation record ", n, " is unusable and is kept for inspection: ",
            h.status().message()));
      }
      absl::MutexLock lock(&store->mu_);
      store->held_[g] = *h;
    } else if (const int64_t s = GenerationOf(n, kSpecificationSuffix); s > 0) {
      if (!fs.StatAt(store->dir_, FinalConfigurationName(s)).ok()) {
        LogWarning("a generation's registration was interrupted; registering it again completes it",
                   {{"generation", s}});
      }
    }
  }
  return store;
}

absl::StatusOr<std::shared_ptr<const HeldGeneration>> GenerationStore::Load(int64_t g) {
  ASSIGN_OR_RETURN(std::string final_text,
                   ReadPrivateRecord(fs_, dir_, FinalConfigurationName(g), kMaxFinalBytes, owner_));
  ASSIGN_OR_RETURN(HeldGeneration h, DecodeFinal(final_text));
  json doc = json::parse(final_text, nullptr, false);
  if (h.generation != g || doc["installation_id"] != installation_id_ ||
      doc["provider"] != provider_) {
    return absl::FailedPreconditionError("it names another generation, installation or provider");
  }
  ASSIGN_OR_RETURN(std::string spec, ReadPrivateRecord(fs_, dir_, SpecificationRecordName(g),
                                                       wire::kMaxHttpBodyBytes, owner_));
  if (Sha256Hex(spec) != h.specification_digest) {
    return absl::FailedPreconditionError("its specification no longer hashes to its digest");
  }
  return std::make_shared<const HeldGeneration>(std::move(h));
}

absl::Status GenerationStore::Register(int64_t generation, std::string_view specification,
                                       std::string_view digest) {
  if (generation <= 0) return absl::InvalidArgumentError("generation must be positive");
  if (!wire::IsDigest(digest)) return absl::InvalidArgumentError("specification_digest is not a digest");
  if (specification.size() > wire::kMaxHttpBodyBytes) {
    return absl::InvalidArgumentError("specification larger than 1 MiB");
  }
  if (Sha256Hex(specification) != digest) {
    return absl::InvalidArgumentError("the specification does not hash to specification_digest");
  }
  absl::StatusOr<wire::SpecificationDocument> doc = wire::DecodeSpecificationDocument(specification);
  if (!doc.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the specification fails spec §6: ", doc.status().message()));
  }
  if (doc->generation != generation) {
    return absl::InvalidArgumentError("the specification names another generation");
  }
  if (doc->provider != provider_) {
    return absl::InvalidArgumentError("the specification names another provider");
  }

  absl::MutexLock lock(&mu_);
  for (const auto& [g, h] : held_) {
    if (g == generation && h->specification_digest == digest) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "privhelper holds generation ", g, " (digest ", h->specification_digest.substr(0, 12),
        "…) and serves exactly one; refusing generation ", generation));
  }
  // The specification first, write-once; an earlier interrupted registration must agree.
  absl::Status s = PublishOnce(fs_, dir_, SpecificationRecordName(generation), specification);
  if (absl::IsAlreadyExists(s)) {
    ASSIGN_OR_RETURN(std::string existing,
                     ReadPrivateRecord(fs_, dir_, SpecificationRecordName(generation),
                                       wire::kMaxHttpBodyBytes, owner_));
    if (existing != specification) {
      return absl::FailedPreconditionError(absl::StrCat(
          "another specification of generation ", generation,
          " is recorded (an interrupted registration); it is kept for inspection"));
    }
  } else if (!s.ok()) {
    return s;
  }
  HeldGeneration h = FromSpecification(generation, std::string(digest), *doc);
  s = PublishOnce(fs_, dir_, FinalConfigurationName(generation),
                  EncodeFinal(h, installation_id_, provider_));
  if (absl::IsAlreadyExists(s)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a final configuration of generation ", generation, " exists but was not loaded"));
  }
  RETURN_IF_ERROR(s);
  LogInfo("generation registered", {{"generation", generation},
                                    {"specification_digest", std::string(digest)}});
  held_[generation] = std::make_shared<const HeldGeneration>(std::move(h));
  return absl::OkStatus();
}

std::shared_ptr<const HeldGeneration> GenerationStore::Find(int64_t generation) const {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(generation);
  return it == held_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const HeldGeneration>> GenerationStore::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const HeldGeneration>> out;
  for (const auto& [g, h] : held_) out.push_back(h);
  return out;
}

bool GenerationStore::empty() const {
  absl::MutexLock lock(&mu_);
  return held_.empty();
}

}  // namespace sn::privhelper::store
