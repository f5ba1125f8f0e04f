// The one channel to privhelper (agent/privhelper_rpc/channel.h) against an in-process gRPC
// privhelper on a unix socket: both kinds of channel reach it with privhelper's message bounds,
// a call carries the deadline it was given, and a socket that cannot be connected is named.
#include "agent/privhelper_rpc/channel.h"

#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/privhelper_rpc/deadlines.h"
#include "agent/privhelper_rpc/privhelper_client.h"
#include "gtest/gtest.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::agent {
namespace {

namespace pb = ::sn::privhelper::v1;

// Answers Probe with a fingerprint of `fingerprint_bytes` and records the call's deadline.
class ProbeService final : public pb::PrivHelper::Service {
 public:
  grpc::Status Probe(grpc::ServerContext* ctx, const pb::ProbeRequest* req,
                     pb::ProbeResponse* resp) override {
    absl::MutexLock l(&mu_);
    deadline_ = absl::FromChrono(ctx->deadline());
    generation_ = req->generation();
    resp->set_ready(true);
    resp->set_provider("docker");
    resp->set_backend_fingerprint(std::string(fingerprint_bytes_, 'f'));
    return grpc::Status::OK;
  }
  void set_fingerprint_bytes(size_t n) {
    absl::MutexLock l(&mu_);
    fingerprint_bytes_ = n;
  }
  absl::Time deadline() {
    absl::MutexLock l(&mu_);
    return deadline_;
  }
  int64_t generation() {
    absl::MutexLock l(&mu_);
    return generation_;
  }

 private:
  absl::Mutex mu_;
  size_t fingerprint_bytes_ ABSL_GUARDED_BY(mu_) = 8;
  absl::Time deadline_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t generation_ ABSL_GUARDED_BY(mu_) = -1;
};

class ChannelTest : public ::testing::Test {
 protected:
  ChannelTest() {
    char tmpl[] = "/tmp/agch-XXXXXX";
    dir_ = mkdtemp(tmpl);
    socket_ = dir_ + "/ph.sock";
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
  }
  ~ChannelTest() override {
    server_->Shutdown();
    unlink(socket_.c_str());
    rmdir(dir_.c_str());
  }

  ProbeService service_;
  std::string dir_;
  std::string socket_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(ChannelTest, AProbeCarriesTheDeadlineItWasGiven) {
  const absl::Time before = absl::Now();
  absl::StatusOr<ProbeOutcome> probe = ProbeOnce(socket_, 7, kProbeDeadline);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_TRUE(probe->ready);
  EXPECT_EQ(service_.generation(), 7);
  EXPECT_GE(service_.deadline(), before + kProbeDeadline - absl::Seconds(1));
  EXPECT_LE(service_.deadline(), absl::Now() + kProbeDeadline + absl::Seconds(1));
}

// gRPC's default limit on a received message is 4 MiB; privhelper's channel takes its
// answers up to proto/execute_stream.h's bound, on a channel by path as on a direct one.
TEST_F(ChannelTest, EveryChannelTakesAnAnswerLargerThanGrpcsDefaultLimit) {
  service_.set_fingerprint_bytes(size_t{5} << 20);
  for (PrivhelperConnection connection :
       {PrivhelperConnection::kShared, PrivhelperConnection::kOwn}) {
    std::unique_ptr<pb::PrivHelper::Stub> stub = PrivhelperStub(socket_, connection);
    grpc::ClientContext ctx;
    SetCallDeadline(&ctx, absl::Seconds(30));
    pb::ProbeResponse resp;
    grpc::Status st = stub->Probe(&ctx, pb::ProbeRequest(), &resp);
    ASSERT_TRUE(st.ok()) << CallError("Probe", st);
    EXPECT_EQ(resp.backend_fingerprint().size(), size_t{5} << 20);
  }

  absl::StatusOr<int> fd = ConnectPrivhelperSocket(socket_);
  ASSERT_TRUE(fd.ok()) << fd.status();
  std::shared_ptr<grpc::Channel> direct = PrivhelperChannelOnSocket(*fd);
  std::unique_ptr<pb::PrivHelper::Stub> stub = pb::PrivHelper::NewStub(direct);
  grpc::ClientContext ctx;
  SetCallDeadline(&ctx, absl::Seconds(30));
  pb::ProbeResponse resp;
  grpc::Status st = stub->Probe(&ctx, pb::ProbeRequest(), &resp);
  ASSERT_TRUE(st.ok()) << CallError("Probe", st);
  EXPECT_EQ(resp.backend_fingerprint().size(), size_t{5} << 20);
}

TEST_F(ChannelTest, ASocketThatCannotBeConnectedIsNamedAndATooLongPathIsRefused) {
  absl::StatusOr<int> missing = ConnectPrivhelperSocket(dir_ + "/absent.sock");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(missing.status().message().find(dir_ + "/absent.sock"), absl::string_view::npos)
      << missing.status();

  absl::StatusOr<int> too_long = ConnectPrivhelperSocket("/" + std::string(200, 'p'));
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ChannelTest, AFailedCallIsUnavailableNamingTheCallAndTheGrpcCode) {
  absl::StatusOr<ProbeOutcome> probe = ProbeOnce(dir_ + "/absent.sock", 0, absl::Seconds(2));
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CallError("Probe", grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone")),
            "privhelper Probe failed (grpc code 14): gone");
}

}  // namespace
}  // namespace sn::agent
