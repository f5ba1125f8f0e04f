// `agent enroll` against an in-test Core (Beast HTTP on 127.0.0.1:0) and an in-test privhelper
// (gRPC on a unix socket): the order of its steps, what each failure leaves behind, and that
// running it again finishes an interrupted enrollment.
#include "agent/enroll.h"

#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/config.h"
#include "agent/specification.h"
#include "agent/state_files.h"
#include "common/atomic_file.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"
#include "proto/privhelper.grpc.pb.h"

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

class FakePrivhelper final : public pb::PrivHelper::Service {
 public:
  grpc::Status Probe(grpc::ServerContext*, const pb::ProbeRequest* req,
                     pb::ProbeResponse* resp) override {
    absl::MutexLock l(&mu_);
    probe_generations_.push_back(req->generation());
    resp->set_ready(true);
    resp->set_provider("docker");
    resp->set_backend_fingerprint("docker/20.10.24 overlay2 cgroupfs");
    resp->set_installation_id("22222222-2222-4222-8222-222222222222");
    resp->set_max_active(max_active_);
    resp->set_max_retained(8);
    return grpc::Status::OK;
  }
  grpc::Status RegisterGeneration(grpc::ServerContext*, const pb::RegisterGenerationRequest* req,
                                  pb::RegisterGenerationResponse*) override {
    absl::MutexLock l(&mu_);
    registrations_.push_back(*req);
    return register_status_;
  }

  void set_register_status(grpc::Status st) {
    absl::MutexLock l(&mu_);
    register_status_ = std::move(st);
  }
  void set_max_active(int64_t v) {
    absl::MutexLock l(&mu_);
    max_active_ = v;
  }
  std::vector<pb::RegisterGenerationRequest> registrations() {
    absl::MutexLock l(&mu_);
    return registrations_;
  }
  std::vector<int64_t> probe_generations() {
    absl::MutexLock l(&mu_);
    return probe_generations_;
  }

 private:
  absl::Mutex mu_;
  grpc::Status register_status_ ABSL_GUARDED_BY(mu_) = grpc::Status::OK;
  int64_t max_active_ ABSL_GUARDED_BY(mu_) = 4;
  std::vector<pb::RegisterGenerationRequest> registrations_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> probe_generations_ ABSL_GUARDED_BY(mu_);
};

struct Seen {
  std::string method, target, authorization, body;
};

// Serves `responses` in order, one per connection, on its own thread.
class FakeCore {
 public:
  using Handler = std::function<http::response<http::string_body>(const Seen&)>;
  explicit FakeCore(std::vector<Handler> handlers)
      : acceptor_(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    thread_ = std::thread([this, handlers = std::move(handlers)] {
      for (const Handler& h : handlers) {
        tcp::socket sock(io_);
        beast::error_code ec;
        acceptor_.accept(sock, ec);
        if (ec) return;
        beast::flat_buffer buf;
        http::request<http::string_body> req;
        http::read(sock, buf, req, ec);
        if (ec) return;
        Seen s{std::string(req.method_string()), std::string(req.target()),
               std::string(req[http::field::authorization]), req.body()};
        seen.push_back(s);
        http::response<http::string_body> res = h(s);
        res.prepare_payload();
        http::write(sock, res, ec);
      }
    });
  }
  ~FakeCore() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  std::string Origin() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  std::vector<Seen> seen;

 private:
  net::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
};

http::response<http::string_body> Respond(int status, std::string body) {
  http::response<http::string_body> r{static_cast<http::status>(status), 11};
  r.body() = std::move(body);
  return r;
}

std::string SpecBytes() {
  wire::SpecificationDocument d;
  d.generation = 7;
  d.provider = "docker";
  d.runtime_source = "dev-1";
  d.artifacts.push_back({"busybox.tar", "image", std::string(64, '1'), 0});
  d.images.push_back({"busybox", "busybox.tar", {"sha256:" + std::string(64, '0')}});
  return wire::EncodeSpecificationDocument(d);
}

class EnrollTest : public ::testing::Test {
 protected:
  EnrollTest() {
    char tmpl[] = "/tmp/agent-en-XXXXXX";
    dir_ = mkdtemp(tmpl);
    socket_ = dir_ + "/ph.sock";
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    b.RegisterService(&privhelper_);
    server_ = b.BuildAndStart();
  }
  ~EnrollTest() override {
    server_->Shutdown();
    if (system(("rm -rf " + dir_).c_str()) != 0) {}
  }

  AgentConfig Config(const std::string& origin) {
    absl::StatusOr<AgentConfig> c = ParseConfig(
        R"({"core_origin":")" + origin + R"(","state_dir":")" + dir_ +
        R"(/state","privhelper_socket":")" + socket_ + R"(","insecure_allow_http":true})");
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  }

  static std::string EnrollResponseBody(const std::string& digest) {
    return wire::EncodeEnrollResponse({kNodeId, kCredential, 7, digest, "dev-1"});
  }

  std::string dir_;
  std::string socket_;
  FakePrivhelper privhelper_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(EnrollTest, EnrollsWithPrivhelpersFactsRegistersTheGenerationAndWritesIdentityLast) {
  const std::string spec = SpecBytes();
  FakeCore core({[&](const Seen&) { return Respond(201, EnrollResponseBody(Sha256Hex(spec))); },
                 [&](const Seen&) { return Respond(200, spec); }});
  absl::Status st = Enroll(Config(core.Origin()), kToken);
  core.Join();
  ASSERT_TRUE(st.ok()) << st;

  ASSERT_EQ(core.seen.size(), 2u);
  EXPECT_EQ(core.seen[0].method, "POST");
  EXPECT_EQ(core.seen[0].target, "/api/v1/sandbox-node/enroll");
  absl::StatusOr<wire::EnrollRequest> req = wire::DecodeEnrollRequest(core.seen[0].body);
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->enrollment_token, kToken);
  EXPECT_EQ(req->provider, "docker");
  // The installation identity and the limits are privhelper's, never the agent's.
  EXPECT_EQ(req->installation_id, "22222222-2222-4222-8222-222222222222");
  EXPECT_EQ(req->backend_fingerprint, "docker/20.10.24 overlay2 cgroupfs");
  EXPECT_EQ(req->max_active, 4);
  EXPECT_EQ(req->max_retained, 8);
  EXPECT_FALSE(req->generation_management);
  EXPECT_EQ(core.seen[1].target, "/api/v1/sandbox-node/configuration?generation=7");
  EXPECT_EQ(core.seen[1].authorization, std::string("Bearer ") + kCredential);
  EXPECT_EQ(privhelper_.probe_generations(), std::vector<int64_t>{0});

  // privhelper got the exact bytes Core served, with their digest.
  std::vector<pb::RegisterGenerationRequest> regs = privhelper_.registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].generation(), 7);
  EXPECT_EQ(regs[0].specification(), spec);
  EXPECT_EQ(regs[0].specification_digest(), Sha256Hex(spec));

  StateFiles files(dir_ + "/state");
  absl::StatusOr<NodeIdentity> id = files.ReadIdentity();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->node_id, kNodeId);
  EXPECT_EQ(id->installation_id, req->installation_id);
  EXPECT_EQ(id->deployment_generation, 7);
  EXPECT_EQ(id->core_origin, core.Origin());
  EXPECT_EQ(*files.ReadCredential(), kCredential);
  struct stat st_cred;
  ASSERT_EQ(stat(files.CredentialPath().c_str(), &st_cred), 0);
  EXPECT_EQ(st_cred.st_mode & 0777, 0600u);
  EXPECT_EQ(*ReadSmallFile(files.SpecificationPath(7)), spec);
  EXPECT_TRUE(absl::IsNotFound(files.ReadPendingEnrollment().status()));
}

TEST_F(EnrollTest, RejectedTokenIsUnauthenticatedAndLeavesNothing) {
  FakeCore core({[](const Seen&) { return Respond(401, ""); },
                 [](const Seen&) { return Respond(409, ""); }});
  absl::Status first = Enroll(Config(core.Origin()), kToken);
  EXPECT_TRUE(absl::IsUnauthenticated(first)) << first;
  EXPECT_EQ(std::string(first.message()).find(kToken), std::string::npos);
  absl::Status second = Enroll(Config(core.Origin()), kToken);
  EXPECT_TRUE(absl::IsFailedPrecondition(second)) << second;
  core.Join();
  ASSERT_EQ(core.seen.size(), 2u);
  EXPECT_EQ(wire::DecodeEnrollRequest(core.seen[0].body)->installation_id,
            wire::DecodeEnrollRequest(core.seen[1].body)->installation_id);
  StateFiles files(dir_ + "/state");
  EXPECT_TRUE(absl::IsNotFound(files.ReadIdentity().status()));
  EXPECT_TRUE(absl::IsNotFound(files.ReadPendingEnrollment().status()));
  EXPECT_TRUE(privhelper_.registrations().empty());
}

TEST_F(EnrollTest, SpecificationWhoseDigestDiffersIsNeitherRegisteredNorStored) {
  const std::string spec = SpecBytes();
  FakeCore core({[&](const Seen&) {
                   return Respond(201, EnrollResponseBody(std::string(64, 'e')));
                 },
                 [&](const Seen&) { return Respond(200, spec); }});
  absl::Status st = Enroll(Config(core.Origin()), kToken);
  core.Join();
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  StateFiles files(dir_ + "/state");
  EXPECT_TRUE(absl::IsNotFound(files.ReadIdentity().status()));  // not enrolled
  EXPECT_TRUE(files.ReadPendingEnrollment().ok());                // but resumable
  EXPECT_TRUE(absl::IsNotFound(ReadSmallFile(files.SpecificationPath(7)).status()));
  EXPECT_TRUE(privhelper_.registrations().empty());
}

TEST_F(EnrollTest, PrivhelperRefusingTheGenerationLeavesTheNodeUnenrolled) {
  privhelper_.set_register_status(
      grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "holds generation 3"));
  const std::string spec = SpecBytes();
  FakeCore core({[&](const Seen&) { return Respond(201, EnrollResponseBody(Sha256Hex(spec))); },
                 [&](const Seen&) { return Respond(200, spec); }});
  absl::Status st = Enroll(Config(core.Origin()), kToken);
  core.Join();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(std::string(st.message()).find("holds generation 3"), std::string::npos) << st;
  StateFiles files(dir_ + "/state");
  EXPECT_TRUE(absl::IsNotFound(files.ReadIdentity().status()));
  EXPECT_TRUE(absl::IsNotFound(ReadSmallFile(files.SpecificationPath(7)).status()));
}

// Core accepted the enrollment (the token is spent, the installation enrolled), then a later
// step failed: running `agent enroll` again finishes it without the enroll route.
TEST_F(EnrollTest, InterruptedEnrollmentIsFinishedByRunningEnrollAgain) {
  const std::string spec = SpecBytes();
  {
    FakeCore core({[&](const Seen&) { return Respond(201, EnrollResponseBody(Sha256Hex(spec))); },
                   [&](const Seen&) { return Respond(503, ""); }});
    absl::Status st = Enroll(Config(core.Origin()), kToken);
    core.Join();
    EXPECT_TRUE(absl::IsUnavailable(st)) << st;
    EXPECT_NE(std::string(st.message()).find("agent enroll"), std::string::npos) << st;
  }
  StateFiles files(dir_ + "/state");
  EXPECT_TRUE(absl::IsNotFound(files.ReadIdentity().status()));
  ASSERT_TRUE(files.ReadPendingEnrollment().ok());

  FakeCore core({[&](const Seen&) { return Respond(200, spec); }});
  absl::Status st = Enroll(Config(core.Origin()), "another-token");
  core.Join();
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(core.seen.size(), 1u);
  EXPECT_EQ(core.seen[0].method, "GET");  // the token was not used again
  EXPECT_EQ(core.seen[0].authorization, std::string("Bearer ") + kCredential);
  absl::StatusOr<NodeIdentity> id = files.ReadIdentity();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->node_id, kNodeId);
  EXPECT_EQ(*ReadSmallFile(files.SpecificationPath(7)), spec);
  EXPECT_TRUE(absl::IsNotFound(files.ReadPendingEnrollment().status()));
  EXPECT_EQ(privhelper_.registrations().size(), 1u);
}

TEST_F(EnrollTest, AnEnrolledNodeRefusesToEnrollAgain) {
  const std::string spec = SpecBytes();
  FakeCore core({[&](const Seen&) { return Respond(201, EnrollResponseBody(Sha256Hex(spec))); },
                 [&](const Seen&) { return Respond(200, spec); }});
  ASSERT_TRUE(Enroll(Config(core.Origin()), kToken).ok());
  core.Join();
  absl::Status again = Enroll(Config(core.Origin()), "another-token");
  EXPECT_TRUE(absl::IsFailedPrecondition(again)) << again;
  EXPECT_NE(std::string(again.message()).find(kNodeId), std::string::npos) << again;
  EXPECT_EQ(core.seen.size(), 2u);
}

TEST_F(EnrollTest, UnreachablePrivhelperStopsBeforeCallingCore) {
  FakeCore core({});
  AgentConfig c = Config(core.Origin());
  c.privhelper_socket = dir_ + "/missing.sock";
  absl::Status st = Enroll(c, kToken);
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  core.Join();
  EXPECT_TRUE(core.seen.empty());
}

TEST_F(EnrollTest, PrivhelperWithoutLimitsStopsBeforeCallingCore) {
  privhelper_.set_max_active(0);  // a privhelper from before the limits moved to it
  FakeCore core({});
  absl::Status st = Enroll(Config(core.Origin()), kToken);
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  core.Join();
  EXPECT_TRUE(core.seen.empty());
}

}  // namespace
}  // namespace sn::agent
