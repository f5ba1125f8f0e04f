// One typed cause (common/error_cause.h) on every failure the four error producers make — the
// release verification, privhelper's preparation steps, the helper manager and the Engine
// client — and on every refusal a preparation or collection step returns: with untyped causes
// fatal, each is converted to its wire diagnostic as privhelper's RPCs do (PrepDiagnosticOf).
#include <string>
#include <vector>

#include "common/error_cause.h"
#include "common/release/failure.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "privhelper/docker/engine.h"
#include "privhelper/docker/probe.h"
#include "privhelper/store/prep_failure.h"
#include "tests/privhelper/store/store_fixture.h"

namespace sn::privhelper::store {
namespace {

using ::sn::docker::ClassifyTransportError;

TEST(ErrorCauseSchemesTest, ReleaseFailuresAreRuntimeDownloadFailedWithTheirClass) {
  const std::vector<std::pair<absl::Status, release::FailureClass>> cases = {
      {release::ProvenanceFailure("p"), release::FailureClass::kProvenance},
      {release::TransferFailure("t"), release::FailureClass::kTransfer},
      {release::ChecksumFailure("c"), release::FailureClass::kChecksum}};
  for (const auto& [s, c] : cases) {
    ASSERT_TRUE(CauseOf(s).has_value()) << s;
    EXPECT_EQ(CauseOf(s)->code, Diagnostic::kRuntimeDownloadFailed);
    EXPECT_EQ(CauseOf(s)->detail, release::FailureClassName(c));
    EXPECT_EQ(release::FailureClassOf(s), c);
  }
  // Another cause with the same code is no release class.
  EXPECT_FALSE(release::FailureClassOf(PrepFailure(absl::StatusCode::kUnavailable,
                                                   Diagnostic::kRuntimeDownloadFailed, "x"))
                   .has_value());
}

TEST(ErrorCauseSchemesTest, PrepFailuresCarryTheirDiagnostic) {
  for (const DiagnosticInfo& d : kDiagnostics) {
    absl::Status s = PrepFailure(absl::StatusCode::kFailedPrecondition, d.value, "why");
    ASSERT_TRUE(CauseOf(s).has_value());
    EXPECT_EQ(CauseOf(s)->code, d.value);
    EXPECT_EQ(PrepDiagnosticOf(s), d.value);
  }
}

TEST(ErrorCauseSchemesTest, EngineTransportFailuresCarryWhatTheProbeReports) {
  using docker::TransportFailure;
  const std::vector<std::pair<TransportFailure, Diagnostic>> cases = {
      {TransportFailure::kSocketMissing, Diagnostic::kDaemonUnreachable},
      {TransportFailure::kConnectionRefused, Diagnostic::kDaemonUnreachable},
      {TransportFailure::kPermissionDenied, Diagnostic::kDaemonPermissionDenied},
      {TransportFailure::kTimeout, Diagnostic::kProviderUnavailable},
      {TransportFailure::kMalformedResponse, Diagnostic::kProviderUnavailable},
      {TransportFailure::kResponseTooLarge, Diagnostic::kProviderUnavailable},
      {TransportFailure::kIo, Diagnostic::kProviderUnavailable}};
  for (const auto& [f, d] : cases) {
    absl::Status s = docker::TransportError(f, "detail");
    ASSERT_TRUE(CauseOf(s).has_value()) << s;
    EXPECT_EQ(CauseOf(s)->code, d) << s;
    EXPECT_EQ(CauseOf(s)->detail, docker::TransportFailureName(f));
    EXPECT_EQ(docker::GetTransportFailure(s), f);
    EXPECT_EQ(ClassifyTransportError(s), d);
  }
  EXPECT_FALSE(docker::GetTransportFailure(release::TransferFailure("t")).has_value());
  EXPECT_EQ(ClassifyTransportError(absl::UnavailableError("untyped")),
            Diagnostic::kProviderUnavailable);
}

// Every refusal a preparation or collection step makes, converted as privhelper's RPCs convert
// them, with an untyped cause fatal.
class TypedRefusalsTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    SetUntypedCauseFatalForTesting(true);
  }
  void TearDown() override { SetUntypedCauseFatalForTesting(false); }

  CollectHooks Hooks() {
    CollectHooks h;
    h.unreferenced = [] { return absl::OkStatus(); };
    h.native_cleanup = [](const std::vector<std::string>&,
                          const std::vector<store::PlannedArtifact>&) { return absl::OkStatus(); };
    return h;
  }
};

TEST_F(TypedRefusalsTest, PreparationRefusalsAreTyped) {
  const int64_t untyped = UntypedCauseCount();
  SignedRelease r = Release({image_});
  SignedRelease forged = r;
  forged.manifest_bytes[10] ^= 1;
  EXPECT_EQ(PrepDiagnosticOf(Adopt(forged)), Diagnostic::kRuntimeDownloadFailed);
  ASSERT_TRUE(Adopt(r).ok());
  const std::string spec = Spec(3, {image_});
  EXPECT_EQ(PrepDiagnosticOf(generations_->Begin(3, spec, Sha256Hex(spec + " ")).status()),
            Diagnostic::kConfigurationInvalid);
  EXPECT_EQ(PrepDiagnosticOf(generations_->Begin(4, spec, Sha256Hex(spec)).status()),
            Diagnostic::kConfigurationInvalid);
  EXPECT_EQ(PrepDiagnosticOf(generations_->Begin(0, spec, Sha256Hex(spec)).status()),
            Diagnostic::kConfigurationInvalid);
  const std::string unadopted = Spec(3, {image_}, "rel-2");
  EXPECT_EQ(PrepDiagnosticOf(generations_->Begin(3, unadopted, Sha256Hex(unadopted)).status()),
            Diagnostic::kConfigurationInvalid);
  // Steps out of order.
  EXPECT_EQ(PrepDiagnosticOf(generations_->WriteArtifact(3, image_.name).status()),
            Diagnostic::kConfigurationInvalid);
  EXPECT_EQ(PrepDiagnosticOf(generations_->Finish(3, importer_)),
            Diagnostic::kConfigurationInvalid);
  ASSERT_TRUE(generations_->Begin(3, spec, Sha256Hex(spec)).ok());
  EXPECT_EQ(PrepDiagnosticOf(generations_->WriteArtifact(3, "no-such-artifact").status()),
            Diagnostic::kConfigurationInvalid);
  EXPECT_EQ(PrepDiagnosticOf(Put(3, image_, image_.bytes + "x")),
            Diagnostic::kRuntimeDownloadFailed);
  EXPECT_EQ(PrepDiagnosticOf(generations_->Finish(3, importer_)),
            Diagnostic::kRuntimeDownloadFailed);
  // Another specification of a recorded generation.
  const std::string other = Spec(3, {image_, helper_});
  EXPECT_EQ(PrepDiagnosticOf(generations_->Begin(3, other, Sha256Hex(other)).status()),
            Diagnostic::kConfigurationInvalid);
  EXPECT_EQ(UntypedCauseCount(), untyped);
}

TEST_F(TypedRefusalsTest, CollectionRefusalsAndADroppedGenerationAreTyped) {
  const int64_t untyped = UntypedCauseCount();
  ASSERT_TRUE(Prepare(3, {image_}).ok());
  const std::string spec = Spec(3, {image_});
  EXPECT_EQ(PrepDiagnosticOf(generations_->Collect(3, std::string(64, 'b'), Hooks())),
            Diagnostic::kConfigurationInvalid);
  ASSERT_TRUE(generations_->Collect(3, Sha256Hex(spec), Hooks()).ok());
  EXPECT_EQ(PrepDiagnosticOf(generations_->Begin(3, spec, Sha256Hex(spec)).status()),
            Diagnostic::kConfigurationInvalid);
  EXPECT_EQ(UntypedCauseCount(), untyped);
}

}  // namespace
}  // namespace sn::privhelper::store
