// The state the Execute fuzz target resolves against, shared by the target and the generator of
// its seed corpus (so the seeds name the installation, generation and images it holds).
// Header-only; test-only.
#ifndef SANDBOX_NODE_TESTS_FUZZ_EXECUTE_FIXTURE_H_
#define SANDBOX_NODE_TESTS_FUZZ_EXECUTE_FIXTURE_H_

#include <cstdint>
#include <string>
#include <vector>
#include <string_view>

#include "common/sha256.h"
#include "common/wire/http_bodies.h"

namespace sn::fuzz {

inline constexpr std::string_view kInstallationId = "5d3c2b1a-0f9e-4d8c-b7a6-958473625140";
inline constexpr int64_t kHeldGeneration = 7;
inline constexpr int64_t kMaxActive = 16;
inline constexpr int64_t kMaxRetained = 64;

// The held generation's specification (spec §6): three images, one with two identities (the
// first is the native image privhelper creates from).
// The held generation's image archives (their bytes do not matter: the fuzz target's image
// store is a fake that holds every identity).
struct HeldArtifact {
  const char* name;
  std::string bytes;
};
inline std::vector<HeldArtifact> HeldArtifacts() {
  return {{"busybox.tar", std::string(1024, '1')},
          {"python.tar", std::string(2048, '2')},
          {"app.tar", std::string(4096, '3')}};
}

inline wire::SpecificationDocument HeldSpecification() {
  wire::SpecificationDocument d;
  d.generation = kHeldGeneration;
  d.provider = "docker";
  d.runtime_source = "rel-1";
  for (const HeldArtifact& a : HeldArtifacts()) {
    d.artifacts.push_back(
        {a.name, "image", Sha256Hex(a.bytes), static_cast<int64_t>(a.bytes.size())});
  }
  d.images = {{"busybox", "busybox.tar", {"sha256:" + std::string(64, 'a')}},
              {"python:3.12", "python.tar",
               {"sha256:" + std::string(64, 'b'), "sha256:" + std::string(64, 'c')}},
              {"registry.example/app@v1", "app.tar", {"sha256:" + std::string(64, 'd')}}};
  return d;
}

}  // namespace sn::fuzz

#endif  // SANDBOX_NODE_TESTS_FUZZ_EXECUTE_FIXTURE_H_
