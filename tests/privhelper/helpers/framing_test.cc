// The privhelper <-> helper framing: a call composed around the request's own bytes parses as
// the HelperCall it describes, frames are parsed straight from the socket without reading past
// their end, and the size bound holds both ways.
#include "privhelper/helpers/framing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <google/protobuf/util/message_differencer.h>

#include <string>
#include <vector>
#include <thread>

#include "common/wire/limits.h"
#include "gtest/gtest.h"
#include "proto/native_helper.pb.h"

namespace sn::privhelper {
namespace {

namespace pb = ::sn::privhelper::v1;

struct Pair {
  Pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd), 0); }
  ~Pair() {
    if (fd[0] >= 0) close(fd[0]);
    if (fd[1] >= 0) close(fd[1]);
  }
  void CloseWriter() {
    close(fd[0]);
    fd[0] = -1;
  }
  int fd[2];
};

pb::ExecuteRequest WriteFileRequest(size_t content_bytes) {
  pb::ExecuteRequest r;
  r.set_request_id("0000cccc-0000-4000-8000-000000000003");
  r.set_generation(3);
  r.set_budget_ms(60000);
  r.set_installation_id("0000aaaa-0000-4000-8000-00000000000f");
  r.mutable_write_file()->set_sandbox_id("0000bbbb-0000-4000-8000-000000000002");
  r.mutable_write_file()->set_path("/tmp/f");
  r.mutable_write_file()->set_mode(0640);
  r.mutable_write_file()->set_content(std::string(content_bytes, 'z'));
  return r;
}

TEST(FramingTest, CallFrameParsesAsTheHelperCallWithTheBudgetReplaced) {
  Pair p;
  const pb::ExecuteRequest req = WriteFileRequest(1000);
  const std::string image = "sha256:" + std::string(64, 'a');
  CallEnvelope env;
  env.call_id = 300;  // a two-byte varint
  env.budget_ms = 1234;
  env.native_image = image;
  env.max_active = 16;
  env.max_retained = 64;
  ASSERT_TRUE(WriteCallFrame(p.fd[0], req, env).ok());

  pb::HelperToChild got;
  ASSERT_TRUE(ReadFrame(p.fd[1], &got).ok());
  pb::HelperToChild want;
  pb::HelperCall* call = want.mutable_call();
  call->set_call_id(300);
  *call->mutable_request() = req;
  call->mutable_request()->set_budget_ms(1234);
  call->set_native_image(image);
  call->set_max_active(16);
  call->set_max_retained(64);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got, want))
      << got.ShortDebugString();
}

// The in-flight sandbox ids (docs/protocol.md 22a) are written around the request as its other
// envelope fields are, in order.
TEST(FramingTest, CallFrameCarriesTheInFlightSandboxIds) {
  Pair p;
  pb::ExecuteRequest req;
  req.mutable_create()->set_sandbox_id("0000bbbb-0000-4000-8000-000000000002");
  const std::vector<std::string> ids = {"0000cccc-0000-4000-8000-000000000003",
                                        "0000dddd-0000-4000-8000-000000000004"};
  CallEnvelope env;
  env.call_id = 7;
  env.budget_ms = 100;
  env.max_active = 3;
  env.max_retained = 1;
  env.in_flight_sandbox_ids = ids;
  ASSERT_TRUE(WriteCallFrame(p.fd[0], req, env).ok());
  pb::HelperToChild got;
  ASSERT_TRUE(ReadFrame(p.fd[1], &got).ok());
  ASSERT_EQ(got.call().in_flight_sandbox_ids_size(), 2);
  EXPECT_EQ(got.call().in_flight_sandbox_ids(0), ids[0]);
  EXPECT_EQ(got.call().in_flight_sandbox_ids(1), ids[1]);
  EXPECT_EQ(got.call().max_active(), 3);
  EXPECT_EQ(got.call().request().create().sandbox_id(), req.create().sandbox_id());
}

TEST(FramingTest, CallFrameWithDefaultEnvelopeFieldsParses) {
  Pair p;
  pb::ExecuteRequest req;
  req.mutable_inspect()->set_sandbox_id("s");
  ASSERT_TRUE(WriteCallFrame(p.fd[0], req, CallEnvelope{}).ok());
  pb::HelperToChild got;
  ASSERT_TRUE(ReadFrame(p.fd[1], &got).ok());
  ASSERT_TRUE(got.has_call());
  EXPECT_EQ(got.call().call_id(), 0u);
  EXPECT_EQ(got.call().request().inspect().sandbox_id(), "s");
  EXPECT_EQ(got.call().request().budget_ms(), 0);
  EXPECT_EQ(got.call().native_image(), "");
}

TEST(FramingTest, BackToBackFramesAreReadOneAtATime) {
  Pair p;
  std::thread writer([&] {
    for (uint64_t id = 1; id <= 3; ++id) {
      pb::HelperToParent m;
      m.mutable_result()->set_call_id(id);
      m.mutable_result()->mutable_response()->mutable_exec()->set_stdout(std::string(100000, 'o'));
      EXPECT_TRUE(WriteFrame(p.fd[0], m).ok());
    }
    p.CloseWriter();
  });
  for (uint64_t id = 1; id <= 3; ++id) {
    pb::HelperToParent m;
    ASSERT_TRUE(ReadFrame(p.fd[1], &m).ok()) << id;
    EXPECT_EQ(m.result().call_id(), id);
    EXPECT_EQ(m.result().response().exec().stdout().size(), 100000u);
  }
  pb::HelperToParent end;
  EXPECT_TRUE(absl::IsOutOfRange(ReadFrame(p.fd[1], &end)));  // clean EOF between frames
  writer.join();
}

TEST(FramingTest, LargestFileContentCrossesInOneFrame) {
  Pair p;
  const pb::ExecuteRequest req = WriteFileRequest(wire::kMaxFileContentBytes);
  std::thread writer([&] {
    CallEnvelope env;
    env.call_id = 1;
    env.budget_ms = 5;
    EXPECT_TRUE(WriteCallFrame(p.fd[0], req, env).ok());
  });
  pb::HelperToChild got;
  absl::Status s = ReadFrame(p.fd[1], &got);
  writer.join();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(got.call().request().write_file().content().size(), wire::kMaxFileContentBytes);
}

TEST(FramingTest, OversizedFramesAreRefusedOnBothSides) {
  Pair p;
  pb::HelperToParent big;
  big.mutable_result()->mutable_response()->mutable_read_file()->set_content(
      std::string(kMaxFrameBytes + 1, 'x'));
  EXPECT_TRUE(absl::IsResourceExhausted(WriteFrame(p.fd[0], big)));

  // A header announcing more than the bound is refused before its body is read.
  const uint32_t n = static_cast<uint32_t>(kMaxFrameBytes + 1);
  const unsigned char head[4] = {static_cast<unsigned char>(n >> 24),
                                 static_cast<unsigned char>(n >> 16),
                                 static_cast<unsigned char>(n >> 8), static_cast<unsigned char>(n)};
  ASSERT_EQ(write(p.fd[0], head, 4), 4);
  pb::HelperToParent m;
  EXPECT_TRUE(absl::IsDataLoss(ReadFrame(p.fd[1], &m)));

  // The caller's own bound (HelperReady is read with a small one).
  Pair q;
  pb::HelperToParent ready;
  ready.mutable_ready()->set_provider(std::string(kMaxReadyFrameBytes, 'p'));
  ASSERT_TRUE(WriteFrame(q.fd[0], ready).ok());
  EXPECT_TRUE(absl::IsDataLoss(ReadFrame(q.fd[1], &m, kMaxReadyFrameBytes)));
}

TEST(FramingTest, TruncatedOrGarbageFramesAreDataLoss) {
  Pair p;
  const unsigned char head[4] = {0, 0, 0, 100};
  ASSERT_EQ(write(p.fd[0], head, 4), 4);
  ASSERT_EQ(write(p.fd[0], "\x0a\x05", 2), 2);
  p.CloseWriter();
  pb::HelperToParent m;
  EXPECT_TRUE(absl::IsDataLoss(ReadFrame(p.fd[1], &m)));

  Pair q;
  const unsigned char garbage[] = {0, 0, 0, 3, 0xff, 0xff, 0xff};
  ASSERT_EQ(write(q.fd[0], garbage, sizeof garbage), static_cast<ssize_t>(sizeof garbage));
  EXPECT_TRUE(absl::IsDataLoss(ReadFrame(q.fd[1], &m)));
}

TEST(FramingTest, FrameBoundIsTheSpecMaximumPlusTheEnvelope) {
  EXPECT_EQ(kMaxFrameBytes, wire::kMaxFrameBytes + kHelperEnvelopeBytes);
  EXPECT_GT(kMaxFrameBytes, wire::kMaxFileContentBytes + wire::kMaxPathBytes);
}

TEST(FramingTest, WritingToAClosedPeerIsAnErrorNotSigpipe) {
  Pair p;
  close(p.fd[1]);
  p.fd[1] = -1;
  pb::HelperToParent m;
  m.mutable_result()->set_call_id(1);
  EXPECT_FALSE(WriteFrame(p.fd[0], m).ok());
}

}  // namespace
}  // namespace sn::privhelper
