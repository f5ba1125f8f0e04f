// Root's decoding of what the network child sends (tools/install/fetch_protocol.h): the only
// parser root runs on bytes that came from Core's side. Every bound, every rule, no trailing
// bytes; printable messages. Pure: no child, no root needed.
#include "tools/install/fetch_protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "common/release/failure.h"
#include "gtest/gtest.h"

namespace sn::install::fetchwire {
namespace {

std::string Digest() { return std::string(64, 'a'); }

wire::EnrollResponse GoodEnrollment() {
  return {"0b7f4d3e-58c4-4a8c-9d2e-1f0a2b3c4d5e", "credential", 7, Digest(), "e2e-1"};
}

wire::SpecificationDocument GoodSpecification() {
  wire::SpecificationDocument d;
  d.generation = 7;
  d.provider = "docker";
  d.runtime_source = "e2e-1";
  d.artifacts = {{"busybox.tar", "image", Digest(), 10}};
  d.images = {{"busybox", "busybox.tar", {"sha256:" + Digest()}}};
  return d;
}

TEST(FetchProtocolTest, TypedResultsRoundTrip) {
  absl::StatusOr<absl::StatusOr<wire::EnrollResponse>> e =
      DecodeEnrollResult(EncodeEnrollResult(GoodEnrollment()));
  ASSERT_TRUE(e.ok() && e->ok()) << e.status();
  EXPECT_EQ(**e, GoodEnrollment());
  absl::StatusOr<absl::StatusOr<wire::SpecificationDocument>> d =
      DecodeConfigurationResult(EncodeConfigurationResult(GoodSpecification()));
  ASSERT_TRUE(d.ok() && d->ok()) << d.status();
  EXPECT_EQ(**d, GoodSpecification());
  absl::StatusOr<absl::StatusOr<std::string>> c = DecodeCurrentResult(EncodeCurrentResult("h-1"));
  ASSERT_TRUE(c.ok() && c->ok());
  EXPECT_EQ(**c, "h-1");
}

TEST(FetchProtocolTest, TheChildsFailureKeepsItsCodeAndClassAndBecomesPrintable) {
  absl::Status s;
  ASSERT_TRUE(
      DecodeStatusResult(EncodeStatusResult(release::TransferFailure("GET x: \x1b[2J\n")), &s)
          .ok());
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_EQ(release::FailureClassOf(s), release::FailureClass::kTransfer);
  EXPECT_EQ(s.message(), "GET x: ?[2J?");
  // A message longer than the bound is truncated by the writer, never refused.
  ASSERT_TRUE(DecodeStatusResult(
                  EncodeStatusResult(absl::NotFoundError(std::string(10000, 'm'))), &s)
                  .ok());
  EXPECT_EQ(s.message().size(), kMaxMessageBytes);
}

TEST(FetchProtocolTest, MalformedPayloadsAreOutOfProtocol) {
  const std::string good = EncodeEnrollResult(GoodEnrollment());
  for (size_t cut : {size_t{0}, size_t{3}, size_t{8}, good.size() - 1}) {
    absl::StatusOr<absl::StatusOr<wire::EnrollResponse>> r =
        DecodeEnrollResult(good.substr(0, cut));
    EXPECT_TRUE(absl::IsDataLoss(r.status())) << cut << ": " << r.status();
  }
  EXPECT_TRUE(absl::IsDataLoss(DecodeEnrollResult(good + "x").status()));  // trailing bytes
  // A status code outside absl's, a class on an OK status, a class with another code.
  absl::Status child;
  EXPECT_TRUE(absl::IsDataLoss(
      DecodeStatusResult(FieldWriter().U64(99).U64(0).Str("").Take(), &child)));
  EXPECT_TRUE(absl::IsDataLoss(
      DecodeStatusResult(FieldWriter().U64(0).U64(1).Str("").Take(), &child)));
  EXPECT_TRUE(absl::IsDataLoss(
      DecodeStatusResult(FieldWriter().U64(5).U64(2).Str("").Take(), &child)));
  EXPECT_TRUE(absl::IsDataLoss(DecodeStatusResult(
      EncodeStatusResult(absl::NotFoundError("x")) + "trailing", &child)));
  // A string whose length exceeds its bound is refused before anything is copied.
  EXPECT_TRUE(absl::IsDataLoss(
      DecodeCurrentResult(FieldWriter().U64(0).U64(0).Str("").U64(~uint64_t{0}).Take())
          .status()));
}

TEST(FetchProtocolTest, EveryValueRootKeepsIsCheckedAgainstItsRule) {
  auto enroll = [](auto mutate) {
    wire::EnrollResponse e = GoodEnrollment();
    mutate(e);
    return DecodeEnrollResult(EncodeEnrollResult(e)).status();
  };
  EXPECT_TRUE(absl::IsDataLoss(enroll([](auto& e) { e.node_id = "../../etc"; })));
  EXPECT_TRUE(absl::IsDataLoss(enroll([](auto& e) { e.credential = ""; })));
  EXPECT_TRUE(absl::IsDataLoss(enroll([](auto& e) { e.credential = std::string("a\0b", 3); })));
  EXPECT_TRUE(absl::IsDataLoss(enroll([](auto& e) { e.credential = std::string(257, 'c'); })));
  EXPECT_TRUE(absl::IsDataLoss(enroll([](auto& e) { e.deployment_generation = 0; })));
  EXPECT_TRUE(absl::IsDataLoss(enroll([](auto& e) { e.specification_digest = "AB"; })));
  EXPECT_TRUE(absl::IsDataLoss(enroll([](auto& e) { e.runtime_source = "current"; })));

  auto spec = [](auto mutate) {
    wire::SpecificationDocument d = GoodSpecification();
    mutate(d);
    return DecodeConfigurationResult(EncodeConfigurationResult(d)).status();
  };
  EXPECT_TRUE(absl::IsDataLoss(spec([](auto& d) { d.artifacts[0].name = "../x"; })));
  EXPECT_TRUE(absl::IsDataLoss(spec([](auto& d) { d.artifacts[0].kind = "rootkit"; })));
  EXPECT_TRUE(absl::IsDataLoss(spec([](auto& d) { d.artifacts[0].size = -1; })));
  EXPECT_TRUE(absl::IsDataLoss(spec([](auto& d) { d.artifacts.push_back(d.artifacts[0]); })));
  EXPECT_TRUE(absl::IsDataLoss(spec([](auto& d) { d.images[0].artifact = "other"; })));
  EXPECT_TRUE(absl::IsDataLoss(spec([](auto& d) { d.images[0].identities = {"sha1:x"}; })));
  EXPECT_TRUE(absl::IsDataLoss(spec([](auto& d) { d.images.clear(); })));
  EXPECT_TRUE(absl::IsDataLoss(spec([](auto& d) {
    d.artifacts.assign(wire::kMaxRuntimeArtifacts + 1, d.artifacts[0]);
  })));
  EXPECT_TRUE(absl::IsDataLoss(spec([](auto& d) { d.provider = "Docker!"; })));
}

TEST(FetchProtocolTest, FramesAreBoundedBeforeTheyAreRead) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_TRUE(WriteFrame(sv[0], Kind::kResult, std::string(100, 'x')).ok());
  absl::StatusOr<Frame> f = ReadFrame(sv[1], 50, absl::InfiniteFuture());
  EXPECT_TRUE(absl::IsDataLoss(f.status())) << f.status();
  EXPECT_TRUE(absl::StrContains(f.status().message(), "a frame of 101 bytes")) << f.status();
  close(sv[0]);
  close(sv[1]);

  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const char unknown_kind[] = {0, 0, 0, 1, 99};
  ASSERT_EQ(write(sv[0], unknown_kind, sizeof unknown_kind), 5);
  EXPECT_TRUE(absl::IsDataLoss(ReadFrame(sv[1], 50, absl::InfiniteFuture()).status()));
  const char cut[] = {0, 0, 0, 9, static_cast<char>(Kind::kData), 'a'};
  ASSERT_EQ(write(sv[0], cut, sizeof cut), 6);
  close(sv[0]);
  EXPECT_TRUE(absl::IsDataLoss(ReadFrame(sv[1], 50, absl::InfiniteFuture()).status()));
  EXPECT_TRUE(absl::IsOutOfRange(ReadFrame(sv[1], 50, absl::InfiniteFuture()).status()));
  close(sv[1]);

  // Nothing arrives: the deadline (already past) answers, the reader does not hang.
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  EXPECT_TRUE(absl::IsDeadlineExceeded(ReadFrame(sv[1], 50, absl::Now()).status()));
  close(sv[0]);
  close(sv[1]);
}

}  // namespace
}  // namespace sn::install::fetchwire
