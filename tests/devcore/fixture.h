// Test fixture for devcore's pure core: a temporary state directory, an enrolled node, a
// SimulatedClock and a fake transport that records what a session sent.
#ifndef SANDBOX_NODE_TESTS_DEVCORE_FIXTURE_H_
#define SANDBOX_NODE_TESTS_DEVCORE_FIXTURE_H_

#include <stdlib.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/wire/codec.h"
#include "common/wire/frames.h"
#include "gtest/gtest.h"
#include "tools/devcore/devcore.h"
#include "tools/devcore/node_store.h"
#include "tools/devcore/crypto.h"
#include "tools/devcore/session.h"
#include "tools/devcore/specification.h"

namespace sn::devcore::testing {

inline constexpr char kInstallation[] = "6f1c3a52-8d7e-4b1a-9c2d-3e4f5a6b7c8d";

// The bytes of the image artifact of generation `generation`'s test release.
inline std::string ImageBytes(int64_t generation) {
  return "image bytes of generation " + std::to_string(generation);
}

// A valid §6 specification document for `generation` of provider docker, naming one image
// artifact whose bytes are ImageBytes(generation), from release `source`.
inline std::string SpecBytes(int64_t generation, const std::string& source = "dev-1",
                             const std::string& provider = "docker") {
  wire::SpecificationDocument d;
  d.generation = generation;
  d.provider = provider;
  d.runtime_source = source;
  const std::string image = ImageBytes(generation);
  d.artifacts = {{"image-" + std::to_string(generation) + ".tar", "image", Sha256Hex(image),
                  static_cast<int64_t>(image.size())}};
  d.images = {{"python", d.artifacts[0].name, {"sha256:" + std::string(64, 'e')}}};
  return wire::EncodeSpecificationDocument(d);
}

// The enrolled generation 1 of the fixture's node.
inline const std::string kSpec1 = SpecBytes(1);
inline const std::string kDigest = Sha256Hex(kSpec1);
// A digest devcore holds for no generation.
inline const std::string kOtherDigest(64, 'b');

inline Specification MustParse(const std::string& bytes) {
  absl::StatusOr<Specification> spec = ParseSpecification(bytes);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *std::move(spec) : Specification{};
}

class FakeTransport final : public SessionTransport {
 public:
  void SendText(std::string message) override { sent.push_back(std::move(message)); }
  void Close(int code, std::string_view) override { close_codes.push_back(code); }
  void SetReadLimit(size_t bytes) override { read_limit = bytes; }

  // The last frame sent, decoded as the node would.
  wire::Frame LastFrame() const {
    EXPECT_FALSE(sent.empty());
    auto f = wire::Decode(sent.back(), wire::Role::kNode);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? *f : wire::Frame{};
  }
  std::optional<int> closed() const {
    return close_codes.empty() ? std::nullopt : std::optional<int>(close_codes.back());
  }

  std::vector<std::string> sent;
  std::vector<int> close_codes;
  size_t read_limit = 0;
};

inline std::string MakeTempDir() {
  char tmpl[] = "/tmp/dc-XXXXXX";
  const char* d = mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  return d == nullptr ? std::string("/tmp") : std::string(d);
}

inline wire::Health ReadyHealth() {
  wire::Health h;
  h.provider_ready = true;
  h.observed_at = "2026-11-29T12:00:00Z";
  h.host.cpu_cores = 2;
  h.host.load_1m = "0.25";
  h.host.memory_total_bytes = 1 << 30;
  return h;
}

class DevcoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    auto store = NodeStore::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    auto generations = GenerationStore::Open(dir_);
    ASSERT_TRUE(generations.ok()) << generations.status();
    ASSERT_TRUE((*generations)->Add(MustParse(kSpec1)).ok());
    for (const std::string& bytes : extra_specs_) {
      ASSERT_TRUE((*generations)->Add(MustParse(bytes)).ok());
    }
    if (current_.has_value()) {
      ASSERT_TRUE((*generations)->SetCurrent(*current_).ok());
    }
    devcore_ = std::make_unique<Devcore>(*std::move(store), *std::move(generations),
                                         releases_dir_, &clock_, &clock_);
    node_id_ = EnrollNode(kInstallation, generation_management_, &credential_);
  }

  // Reopens devcore on the same state directory, as a restart would (connections are gone).
  void Restart() {
    devcore_.reset();
    auto store = NodeStore::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    auto generations = GenerationStore::Open(dir_);
    ASSERT_TRUE(generations.ok()) << generations.status();
    if (current_.has_value()) {
      ASSERT_TRUE((*generations)->SetCurrent(*current_).ok());
    }
    devcore_ = std::make_unique<Devcore>(*std::move(store), *std::move(generations),
                                         releases_dir_, &clock_, &clock_);
  }

  HttpResponse Call(const std::string& method, const std::string& target,
                    const std::string& body = "", const std::string& authorization = "",
                    bool loopback = true) {
    HttpRequest req;
    req.method = method;
    req.target = target;
    req.authorization = authorization;
    req.body = body;
    req.peer_loopback = loopback;
    HttpResponse res;
    res.status = 0;
    devcore_->HandleHttp(req, [&](HttpResponse r) { res = std::move(r); });
    return res;
  }

  std::string EnrollNode(const std::string& installation, bool generation_management,
                         std::string* credential) {
    auto token = devcore_->store().IssueEnrollmentToken();
    EXPECT_TRUE(token.ok());
    NodeRecord r;
    r.installation_id = installation;
    r.provider = "docker";
    r.backend_fingerprint = "docker/24 overlay2";
    r.deployment_generation = 1;
    r.specification_digest = kDigest;
    r.generation_management = generation_management;
    r.max_active = 4;
    r.max_retained = 8;
    auto enrolled = devcore_->store().Enroll(*token, r);
    EXPECT_TRUE(enrolled.ok()) << enrolled.status();
    *credential = enrolled->credential;
    return enrolled->node_id;
  }

  HttpRequest Upgrade(const std::string& node_id, const std::string& credential) {
    HttpRequest req;
    req.method = "GET";
    req.target = "/api/v1/sandbox-node/connect?node_id=" + node_id;
    req.authorization = "Bearer " + credential;
    return req;
  }

  // Opens and starts a connection for the enrolled node.
  std::unique_ptr<Connection> Open(FakeTransport* t) {
    auto conn = devcore_->OpenConnection(Upgrade(node_id_, credential_), t);
    EXPECT_TRUE(conn.ok()) << conn.status();
    if (!conn.ok()) return nullptr;
    (*conn)->session().Start();
    return *std::move(conn);
  }

  wire::Hello MatchingHello() const {
    wire::Hello h;
    h.node_id = node_id_;
    h.installation_id = kInstallation;
    h.provider = "docker";
    h.backend_fingerprint = "docker/24 overlay2";
    h.deployment_generation = 1;
    h.specification_digest = kDigest;
    h.max_active = 4;
    h.max_retained = 8;
    h.health = ReadyHealth();
    if (generation_management_) {
      h.generation_management = true;
      h.health.provider_ready.reset();
      h.generations.push_back({1, kDigest, wire::GenerationState::kReady, std::nullopt});
    }
    return h;
  }

  // Sends a matching hello and returns the welcome.
  wire::Welcome Hello(Session& s, FakeTransport& t) {
    s.OnFrameActivity();
    s.OnMessage(wire::Encode(MatchingHello()), true);
    EXPECT_TRUE(s.live()) << (t.closed() ? *t.closed() : 0);
    const wire::Frame f = t.LastFrame();
    const auto* w = std::get_if<wire::Welcome>(&f);
    EXPECT_NE(w, nullptr);
    return w != nullptr ? *w : wire::Welcome{};
  }

  wire::Heartbeat MakeHeartbeat(const Session& s) const {
    wire::Heartbeat hb;
    hb.connection_id = s.connection_id();
    hb.owner_epoch = s.owner_epoch();
    hb.health = ReadyHealth();
    if (generation_management_) {
      hb.health.provider_ready.reset();
      hb.generations.emplace();
    }
    return hb;
  }

  bool generation_management_ = false;
  std::optional<int64_t> current_;       // the --specification generation, if any
  std::vector<std::string> extra_specs_;  // further generations held at start
  std::string releases_dir_;             // --releases-dir ("" serves none)
  SimulatedClock clock_;
  std::string dir_;
  std::unique_ptr<Devcore> devcore_;
  std::string node_id_;
  std::string credential_;
};

}  // namespace sn::devcore::testing

#endif  // SANDBOX_NODE_TESTS_DEVCORE_FIXTURE_H_
