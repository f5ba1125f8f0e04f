// Probe classification against a scripted fake engine.
#include "privhelper/docker/probe.h"

#include "gtest/gtest.h"
#include "tests/privhelper/test_util.h"

namespace sn::privhelper {
namespace {

using docker::TransportError;
using docker::TransportFailure;
using docker::ProbeDocker;
using sn::testing::FakeEngine;

constexpr char kVersion[] = R"({"Version":"20.10.24+dfsg1","ApiVersion":"1.41"})";
constexpr char kInfo[] = R"({"Driver":"overlay2","CgroupDriver":"systemd","Name":"h"})";

TEST(DockerProbeTest, AllAnswersOkIsReadyWithFingerprint) {
  FakeEngine e;
  e.PushOk(200, "OK");
  e.PushOk(200, kVersion);
  e.PushOk(200, kInfo);
  ProbeResult r = ProbeDocker(e);
  EXPECT_TRUE(r.ready);
  EXPECT_FALSE(r.diagnostic.has_value());
  EXPECT_EQ(r.fingerprint, "docker/20.10.24+dfsg1 overlay2 systemd");
  ASSERT_EQ(e.targets.size(), 3u);
  EXPECT_EQ(e.targets[0], "/_ping");
  EXPECT_EQ(e.targets[1], "/version");
  EXPECT_EQ(e.targets[2], "/info");
}

struct Case {
  const char* name;
  TransportFailure failure;
  Diagnostic want;
};

class TransportClassificationTest : public ::testing::TestWithParam<Case> {};

TEST_P(TransportClassificationTest, PingTransportFailureMapsToItsDiagnostic) {
  FakeEngine e;
  e.Push(TransportError(GetParam().failure, "/some/host/path detail"));
  ProbeResult r = ProbeDocker(e);
  EXPECT_FALSE(r.ready);
  ASSERT_TRUE(r.diagnostic.has_value());
  EXPECT_EQ(*r.diagnostic, GetParam().want);
  EXPECT_EQ(r.fingerprint, "");
}

INSTANTIATE_TEST_SUITE_P(
    Failures, TransportClassificationTest,
    ::testing::Values(
        Case{"missing", TransportFailure::kSocketMissing, Diagnostic::kDaemonUnreachable},
        Case{"refused", TransportFailure::kConnectionRefused, Diagnostic::kDaemonUnreachable},
        Case{"eacces", TransportFailure::kPermissionDenied, Diagnostic::kDaemonPermissionDenied},
        Case{"timeout", TransportFailure::kTimeout, Diagnostic::kProviderUnavailable},
        Case{"malformed", TransportFailure::kMalformedResponse, Diagnostic::kProviderUnavailable},
        Case{"too_large", TransportFailure::kResponseTooLarge, Diagnostic::kProviderUnavailable},
        Case{"io", TransportFailure::kIo, Diagnostic::kProviderUnavailable}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

TEST(DockerProbeTest, UntypedErrorIsProviderUnavailable) {
  FakeEngine e;
  e.Push(absl::InternalError("something odd"));
  ProbeResult r = ProbeDocker(e);
  ASSERT_TRUE(r.diagnostic.has_value());
  EXPECT_EQ(*r.diagnostic, Diagnostic::kProviderUnavailable);
}

TEST(DockerProbeTest, ServerErrorIsProviderUnavailable) {
  FakeEngine e;
  e.PushOk(500, R"({"message":"boom"})");
  ProbeResult r = ProbeDocker(e);
  EXPECT_FALSE(r.ready);
  EXPECT_EQ(r.diagnostic, Diagnostic::kProviderUnavailable);
}

TEST(DockerProbeTest, ForbiddenIsDaemonPermissionDenied) {
  FakeEngine e;
  e.PushOk(200, "OK");
  e.PushOk(403, R"({"message":"authorization denied by plugin"})");
  ProbeResult r = ProbeDocker(e);
  EXPECT_EQ(r.diagnostic, Diagnostic::kDaemonPermissionDenied);
}

TEST(DockerProbeTest, MalformedVersionIsProviderUnavailable) {
  FakeEngine e;
  e.PushOk(200, "OK");
  e.PushOk(200, "not json");
  ProbeResult r = ProbeDocker(e);
  EXPECT_EQ(r.diagnostic, Diagnostic::kProviderUnavailable);
  EXPECT_EQ(r.fingerprint, "");
}

TEST(DockerProbeTest, InfoWithoutCgroupDriverIsProviderUnavailable) {
  FakeEngine e;
  e.PushOk(200, "OK");
  e.PushOk(200, kVersion);
  e.PushOk(200, R"({"Driver":"overlay2"})");
  ProbeResult r = ProbeDocker(e);
  EXPECT_EQ(r.diagnostic, Diagnostic::kProviderUnavailable);
}

TEST(DockerProbeTest, FingerprintFieldWithSpacesOrControlCharsIsRefused) {
  FakeEngine e;
  e.PushOk(200, "OK");
  e.PushOk(200, R"({"Version":"20.10 /etc/passwd"})");
  ProbeResult r = ProbeDocker(e);
  EXPECT_FALSE(r.ready);
  EXPECT_EQ(r.fingerprint, "");
}

TEST(DockerProbeTest, InfoTimeoutAfterVersionIsProviderUnavailable) {
  FakeEngine e;
  e.PushOk(200, "OK");
  e.PushOk(200, kVersion);
  e.Push(TransportError(TransportFailure::kTimeout, "deadline"));
  ProbeResult r = ProbeDocker(e);
  EXPECT_EQ(r.diagnostic, Diagnostic::kProviderUnavailable);
}

TEST(TransportErrorTest, FailureKindSurvivesTheStatus) {
  absl::Status s = TransportError(TransportFailure::kPermissionDenied, "x");
  EXPECT_EQ(docker::GetTransportFailure(s), TransportFailure::kPermissionDenied);
  EXPECT_EQ(docker::GetTransportFailure(absl::OkStatus()), std::nullopt);
  EXPECT_EQ(docker::GetTransportFailure(absl::UnavailableError("x")), std::nullopt);
}

}  // namespace
}  // namespace sn::privhelper
