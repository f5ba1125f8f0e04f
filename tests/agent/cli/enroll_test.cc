// `agent enroll` against an in-test Core (Beast HTTP on 127.0.0.1:0, with a signed release)
// and an in-test privhelper (gRPC on a unix socket, tests/agent/fakes/fake_privhelper.h):
// the order of its steps, the preparation of the enrolled generation through the same path a
// running agent uses, what each failure leaves behind, and that running it again finishes an
// interrupted enrollment.
#include "agent/cli/enroll.h"

#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/state/config.h"
#include "agent/state/specification.h"
#include "agent/state/state_files.h"
#include "common/atomic_file.h"
#include "common/release/verify.h"
#include "common/sha256.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"
#include "proto/privhelper.grpc.pb.h"
#include "tests/agent/fakes/fake_privhelper.h"
#include "tests/release/fixture.h"

namespace sn::agent {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
namespace pb = ::sn::privhelper::v1;

constexpr char kNodeId[] = "11111111-1111-4111-8111-111111111111";
constexpr char kToken[] = "enroll-token-123";
constexpr char kCredential[] = "node-credential-xyz";
constexpr char kInstallation[] = "22222222-2222-4222-8222-222222222222";
constexpr char kConfig7[] = "/api/v1/sandbox-node/configuration?generation=7";

struct Seen {
  std::string method, target, authorization, body;
};

// Core's routes on 127.0.0.1:0: each request is answered from `routes` by its exact target
// (404 otherwise), one connection at a time, until the server is destroyed.
class FakeCore {
 public:
  struct Answer {
    int status = 200;
    std::string body;
  };
  FakeCore() : acceptor_(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeCore() {
    {
      absl::MutexLock l(&mu_);
      stopping_ = true;
    }
    tcp::socket wake(io_);
    beast::error_code ec;
    wake.connect(acceptor_.local_endpoint(), ec);
    thread_.join();
  }
  void Set(const std::string& target, int status, std::string body) {
    absl::MutexLock l(&mu_);
    routes_[target] = Answer{status, std::move(body)};
  }
  std::vector<Seen> seen() {
    absl::MutexLock l(&mu_);
    return seen_;
  }
  std::string Origin() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }

 private:
  void Serve() {
    for (;;) {
      tcp::socket sock(io_);
      beast::error_code ec;
      acceptor_.accept(sock, ec);
      Answer a{404, ""};
      {
        absl::MutexLock l(&mu_);
        if (stopping_ || ec) return;
      }
      beast::flat_buffer buf;
      http::request<http::string_body> req;
      http::read(sock, buf, req, ec);
      if (ec) continue;
      {
        absl::MutexLock l(&mu_);
        seen_.push_back({std::string(req.method_string()), std::string(req.target()),
                         std::string(req[http::field::authorization]), req.body()});
        auto it = routes_.find(std::string(req.target()));
        if (it != routes_.end()) a = it->second;
      }
      http::response<http::string_body> res{static_cast<http::status>(a.status), 11};
      res.body() = a.body;
      res.prepare_payload();
      http::write(sock, res, ec);
    }
  }

  net::io_context io_;
  tcp::acceptor acceptor_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, Answer> routes_ ABSL_GUARDED_BY(mu_);
  std::vector<Seen> seen_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

class EnrollTest : public ::testing::Test {
 protected:
  EnrollTest() : key_(release::testing::NewKey()), privhelper_(key_.public_key()) {
    image_ = {"busybox.tar", "image", std::string(300 * 1024 + 5, 'i')};
    release::testing::SignedRelease r = release::testing::MakeRelease(key_, "dev-1", {image_});
    core_.Set("/releases/dev-1/manifest.json", 200, r.manifest_bytes);
    core_.Set("/releases/dev-1/manifest.json.sig", 200, r.signature_file);
    core_.Set("/releases/dev-1/SHA256SUMS", 200, r.sums);
    core_.Set("/releases/dev-1/busybox.tar", 200, image_.bytes);
    wire::SpecificationDocument d;
    d.generation = 7;
    d.provider = "docker";
    d.runtime_source = "dev-1";
    d.artifacts.push_back(release::testing::Describe(image_));
    d.images.push_back({"busybox", "busybox.tar", {"sha256:" + std::string(64, '0')}});
    spec_ = wire::EncodeSpecificationDocument(d);
    core_.Set(kConfig7, 200, spec_);
    Enrolls(Sha256Hex(spec_));
    char tmpl[] = "/tmp/agent-en-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~EnrollTest() override {
    if (system(("rm -rf " + dir_).c_str()) != 0) {}
  }

  void Enrolls(const std::string& digest) {
    core_.Set("/api/v1/sandbox-node/enroll", 201,
              wire::EncodeEnrollResponse({kNodeId, kCredential, 7, digest, "dev-1"}));
  }

  AgentConfig Config(bool generation_management = false) {
    absl::StatusOr<AgentConfig> c = ParseConfig(
        R"({"core_origin":")" + core_.Origin() + R"(","state_dir":")" + dir_ +
        R"(/state","privhelper_socket":")" + privhelper_.socket +
        R"(","insecure_allow_http":true,"release_public_key":")" + key_.public_key().Base64() +
        R"(","generation_management":)" + (generation_management ? "true" : "false") + "}");
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  }
  std::vector<std::string> PrivhelperCalls() {
    EXPECT_TRUE(privhelper_.service.WaitIdle());
    return privhelper_.service.calls();
  }
  static std::vector<std::string> Steps(std::initializer_list<const char*> s) {
    return std::vector<std::string>(s.begin(), s.end());
  }

  release::PrivateKey key_;
  testing::FakePrivhelperServer privhelper_;
  FakeCore core_;
  release::testing::ArtifactBytes image_;
  std::string spec_;
  std::string dir_;
};

TEST_F(EnrollTest, EnrollsWithPrivhelpersFactsPreparesTheGenerationAndWritesIdentityLast) {
  absl::Status st = Enroll(Config(), kToken);
  ASSERT_TRUE(st.ok()) << st;

  std::vector<Seen> seen = core_.seen();
  ASSERT_GE(seen.size(), 6u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].target, "/api/v1/sandbox-node/enroll");
  absl::StatusOr<wire::EnrollRequest> req = wire::DecodeEnrollRequest(seen[0].body);
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->enrollment_token, kToken);
  EXPECT_EQ(req->provider, "docker");
  // The installation identity and the limits are privhelper's, never the agent's.
  EXPECT_EQ(req->installation_id, kInstallation);
  EXPECT_EQ(req->backend_fingerprint, "docker/20.10.24 overlay2 cgroupfs");
  EXPECT_EQ(req->max_active, 4);
  EXPECT_EQ(req->max_retained, 8);
  EXPECT_FALSE(req->generation_management);
  // The specification with the credential; the release routes without it.
  EXPECT_EQ(seen[1].target, kConfig7);
  EXPECT_EQ(seen[1].authorization, std::string("Bearer ") + kCredential);
  for (size_t i = 2; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].target.rfind("/releases/dev-1/", 0), 0u) << seen[i].target;
    EXPECT_TRUE(seen[i].authorization.empty()) << seen[i].target;
  }

  // privhelper prepared it through the preparation path (no registration any more).
  EXPECT_EQ(PrivhelperCalls(), Steps({"Probe", "AdoptRelease", "BeginPreparation",
                                      "PutArtifact", "FinishPreparation"}));
  ASSERT_TRUE(privhelper_.service.begun().has_value());
  EXPECT_EQ(privhelper_.service.begun()->specification(), spec_);
  EXPECT_EQ(privhelper_.service.begun()->specification_digest(), Sha256Hex(spec_));
  EXPECT_TRUE(privhelper_.service.stored().count("busybox.tar"));

  StateFiles files(dir_ + "/state");
  absl::StatusOr<NodeIdentity> id = files.ReadIdentity();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->node_id, kNodeId);
  EXPECT_EQ(id->installation_id, req->installation_id);
  EXPECT_EQ(id->deployment_generation, 7);
  EXPECT_EQ(id->core_origin, core_.Origin());
  EXPECT_EQ(*files.ReadCredential(), kCredential);
  struct stat st_cred;
  ASSERT_EQ(stat(files.CredentialPath().c_str(), &st_cred), 0);
  EXPECT_EQ(st_cred.st_mode & 0777, 0600u);
  EXPECT_EQ(*ReadSmallFile(files.SpecificationPath(7)), spec_);
  EXPECT_TRUE(absl::IsNotFound(files.ReadPendingEnrollment().status()));
}

TEST_F(EnrollTest, GenerationManagingNodePreparesNothingAtEnrollment) {
  absl::Status st = Enroll(Config(true), kToken);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(PrivhelperCalls(), Steps({"Probe"}));
  EXPECT_TRUE(wire::DecodeEnrollRequest(core_.seen()[0].body)->generation_management);
  StateFiles files(dir_ + "/state");
  EXPECT_TRUE(files.ReadIdentity().ok());
  EXPECT_EQ(*ReadSmallFile(files.SpecificationPath(7)), spec_);
  for (const Seen& s : core_.seen()) EXPECT_EQ(s.target.find("/releases/"), std::string::npos);
}

TEST_F(EnrollTest, RejectedTokenIsUnauthenticatedAndLeavesNothing) {
  core_.Set("/api/v1/sandbox-node/enroll", 401, "");
  absl::Status first = Enroll(Config(), kToken);
  EXPECT_TRUE(absl::IsUnauthenticated(first)) << first;
  EXPECT_EQ(std::string(first.message()).find(kToken), std::string::npos);
  core_.Set("/api/v1/sandbox-node/enroll", 409, "");
  absl::Status second = Enroll(Config(), kToken);
  EXPECT_TRUE(absl::IsFailedPrecondition(second)) << second;
  std::vector<Seen> seen = core_.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(wire::DecodeEnrollRequest(seen[0].body)->installation_id,
            wire::DecodeEnrollRequest(seen[1].body)->installation_id);
  StateFiles files(dir_ + "/state");
  EXPECT_TRUE(absl::IsNotFound(files.ReadIdentity().status()));
  EXPECT_TRUE(absl::IsNotFound(files.ReadPendingEnrollment().status()));
  EXPECT_EQ(PrivhelperCalls(), Steps({"Probe", "Probe"}));
}

TEST_F(EnrollTest, SpecificationWhoseDigestDiffersIsNeitherPreparedNorStored) {
  Enrolls(std::string(64, 'e'));
  absl::Status st = Enroll(Config(), kToken);
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_NE(std::string(st.message()).find("configuration_invalid"), std::string::npos) << st;
  StateFiles files(dir_ + "/state");
  EXPECT_TRUE(absl::IsNotFound(files.ReadIdentity().status()));  // not enrolled
  EXPECT_TRUE(files.ReadPendingEnrollment().ok());                // but resumable
  EXPECT_TRUE(absl::IsNotFound(ReadSmallFile(files.SpecificationPath(7)).status()));
  EXPECT_EQ(PrivhelperCalls(), Steps({"Probe"}));
}

TEST_F(EnrollTest, AReleaseThatFailsVerificationLeavesTheNodeUnenrolledAndResumable) {
  core_.Set("/releases/dev-1/manifest.json.sig", 200,
            release::FormatSignatureFile(std::string(64, '\x01')));
  absl::Status st = Enroll(Config(), kToken);
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_NE(std::string(st.message()).find("runtime_download_failed"), std::string::npos) << st;
  EXPECT_EQ(PrivhelperCalls(), Steps({"Probe"}));
  StateFiles files(dir_ + "/state");
  EXPECT_TRUE(absl::IsNotFound(files.ReadIdentity().status()));
  EXPECT_TRUE(files.ReadPendingEnrollment().ok());
}

TEST_F(EnrollTest, PrivhelperRefusingThePreparationLeavesTheNodeUnenrolled) {
  privhelper_.service.RefuseNext("BeginPreparation", pb::OWNERSHIP_REFUSED,
                                 pb::GENERATION_STATE_FAILED);
  absl::Status st = Enroll(Config(), kToken);
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(std::string(st.message()).find("ownership_refused"), std::string::npos) << st;
  StateFiles files(dir_ + "/state");
  EXPECT_TRUE(absl::IsNotFound(files.ReadIdentity().status()));
}

// Core accepted the enrollment (the token is spent, the installation enrolled), then a later
// step failed: running `agent enroll` again finishes it without the enroll route.
TEST_F(EnrollTest, InterruptedEnrollmentIsFinishedByRunningEnrollAgain) {
  core_.Set(kConfig7, 503, "");
  absl::Status st = Enroll(Config(), kToken);
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_NE(std::string(st.message()).find("agent enroll"), std::string::npos) << st;
  StateFiles files(dir_ + "/state");
  EXPECT_TRUE(absl::IsNotFound(files.ReadIdentity().status()));
  ASSERT_TRUE(files.ReadPendingEnrollment().ok());

  core_.Set(kConfig7, 200, spec_);
  const size_t before = core_.seen().size();
  st = Enroll(Config(), "another-token");
  ASSERT_TRUE(st.ok()) << st;
  std::vector<Seen> seen = core_.seen();
  for (size_t i = before; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].method, "GET");  // the token was not used again
  }
  EXPECT_EQ(seen[before].authorization, std::string("Bearer ") + kCredential);
  absl::StatusOr<NodeIdentity> id = files.ReadIdentity();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->node_id, kNodeId);
  EXPECT_EQ(*ReadSmallFile(files.SpecificationPath(7)), spec_);
  EXPECT_TRUE(absl::IsNotFound(files.ReadPendingEnrollment().status()));
  EXPECT_TRUE(privhelper_.service.stored().count("busybox.tar"));
}

// `agent enroll --resume` (what sandbox-node-install runs): only a pending enrollment, never
// the enroll route.
TEST_F(EnrollTest, ResumeWithoutAPendingEnrollmentIsNotFoundAndCallsNobody) {
  absl::Status st = ResumePendingEnrollment(Config());
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_TRUE(core_.seen().empty());
}

TEST_F(EnrollTest, ResumeFinishesAPendingEnrollmentWithoutTheEnrollRoute) {
  core_.Set(kConfig7, 503, "");
  ASSERT_TRUE(absl::IsUnavailable(Enroll(Config(), kToken)));
  core_.Set(kConfig7, 200, spec_);
  const size_t before = core_.seen().size();
  absl::Status st = ResumePendingEnrollment(Config());
  ASSERT_TRUE(st.ok()) << st;
  std::vector<Seen> seen = core_.seen();
  for (size_t i = before; i < seen.size(); ++i) EXPECT_EQ(seen[i].method, "GET");
  StateFiles files(dir_ + "/state");
  EXPECT_EQ(files.ReadIdentity()->node_id, kNodeId);
  EXPECT_TRUE(absl::IsFailedPrecondition(ResumePendingEnrollment(Config())));
}

TEST_F(EnrollTest, AnEnrolledNodeRefusesToEnrollAgain) {
  ASSERT_TRUE(Enroll(Config(), kToken).ok());
  const size_t before = core_.seen().size();
  absl::Status again = Enroll(Config(), "another-token");
  EXPECT_TRUE(absl::IsFailedPrecondition(again)) << again;
  EXPECT_NE(std::string(again.message()).find(kNodeId), std::string::npos) << again;
  EXPECT_EQ(core_.seen().size(), before);
}

TEST_F(EnrollTest, UnreachablePrivhelperStopsBeforeCallingCore) {
  AgentConfig c = Config();
  c.privhelper_socket = dir_ + "/missing.sock";
  absl::Status st = Enroll(c, kToken);
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_TRUE(core_.seen().empty());
}

TEST_F(EnrollTest, PrivhelperWithoutLimitsStopsBeforeCallingCore) {
  privhelper_.service.SetMaxActive(0);  // a privhelper from before the limits moved to it
  absl::Status st = Enroll(Config(), kToken);
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_TRUE(core_.seen().empty());
}

}  // namespace
}  // namespace sn::agent
