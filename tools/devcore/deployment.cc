#include "tools/devcore/deployment.h"

#include <algorithm>

namespace sn::devcore {

std::optional<wire::Deployment> DeploymentFor(const NodeRecord& node,
                                              const GenerationStore& generations) {
  if (!node.generation_management) return std::nullopt;
  wire::Deployment d;
  if (node.deployment.has_value()) {
    const Specification* target = generations.Find(node.deployment->generation);
    if (target == nullptr) return std::nullopt;
    if (node.deployment->serving_generation.has_value() &&
        generations.Find(*node.deployment->serving_generation) == nullptr) {
      return std::nullopt;
    }
    d.generation = target->generation;
    d.specification_digest = target->digest;
    d.serving_generation = node.deployment->serving_generation;
  } else if (const Specification* current = generations.current()) {
    d.generation = current->generation;
    d.specification_digest = current->digest;
  } else {
    d.generation = node.deployment_generation;
    d.specification_digest = node.specification_digest;
  }
  return d;
}

std::vector<int64_t> NamedGenerations(const wire::Deployment& deployment) {
  std::vector<int64_t> out = {deployment.generation};
  if (deployment.serving_generation.has_value() &&
      *deployment.serving_generation != deployment.generation) {
    out.push_back(*deployment.serving_generation);
  }
  return out;
}

std::optional<std::string> AnnouncedDigest(const NodeRecord& node,
                                           const GenerationStore& generations,
                                           int64_t generation) {
  if (generation == node.deployment_generation) return node.specification_digest;
  if (!std::binary_search(node.announced_generations.begin(), node.announced_generations.end(),
                          generation)) {
    return std::nullopt;
  }
  const Specification* spec = generations.Find(generation);
  if (spec == nullptr) return std::nullopt;
  return spec->digest;
}

bool IsDropped(const NodeRecord& node, const GenerationRef& pair) {
  return std::binary_search(node.dropped.begin(), node.dropped.end(), pair);
}

bool KeepInRetention(const NodeRecord& node, const std::optional<wire::Deployment>& deployment,
                     const GenerationRef& pair) {
  if (!IsDropped(node, pair)) return true;
  // Without a known deployment devcore cannot prove the pair is neither target nor serving.
  if (!deployment.has_value()) return true;
  // A dropped pair is kept only while it is the target or the serving generation.
  return pair.generation == deployment->generation ||
         deployment->serving_generation == pair.generation;
}

}  // namespace sn::devcore
