// The one typed cause of a failed Status (common/error_cause.h).
#include "common/error_cause.h"

#include "gtest/gtest.h"

namespace sn {
namespace {

TEST(ErrorCauseTest, SetAndReadBack) {
  absl::Status s = SetCause(absl::UnavailableError("x"), Diagnostic::kDaemonUnreachable,
                            "socket_missing");
  ASSERT_TRUE(CauseOf(s).has_value());
  EXPECT_EQ(*CauseOf(s), (ErrorCause{Diagnostic::kDaemonUnreachable, "socket_missing"}));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "x");

  absl::Status bare = CausedError(absl::StatusCode::kFailedPrecondition, "y",
                                  Diagnostic::kOwnershipRefused);
  EXPECT_EQ(*CauseOf(bare), (ErrorCause{Diagnostic::kOwnershipRefused, ""}));
  EXPECT_EQ(bare.code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ErrorCauseTest, ASecondCauseReplacesTheFirst) {
  absl::Status s = SetCause(absl::InternalError("x"), Diagnostic::kDaemonUnreachable, "a");
  s = SetCause(std::move(s), Diagnostic::kConfigurationInvalid);
  EXPECT_EQ(*CauseOf(s), (ErrorCause{Diagnostic::kConfigurationInvalid, ""}));
}

TEST(ErrorCauseTest, OkAndUntypedHaveNone) {
  EXPECT_TRUE(SetCause(absl::OkStatus(), Diagnostic::kConfigurationInvalid).ok());
  EXPECT_FALSE(CauseOf(absl::OkStatus()).has_value());
  EXPECT_FALSE(CauseOf(absl::UnavailableError("untyped")).has_value());
}

TEST(ErrorCauseTest, ReportedDiagnosticIsTheCause) {
  const int64_t before = UntypedCauseCount();
  EXPECT_EQ(ReportedDiagnostic(SetCause(absl::DataLossError("x"),
                                        Diagnostic::kRuntimeDownloadFailed, "checksum"),
                               "test"),
            Diagnostic::kRuntimeDownloadFailed);
  EXPECT_EQ(UntypedCauseCount(), before);
}

TEST(ErrorCauseTest, AnUntypedErrorIsCountedAndAnsweredSafely) {
  const int64_t before = UntypedCauseCount();
  EXPECT_EQ(ReportedDiagnostic(absl::InternalError("nobody typed me"), "test"),
            Diagnostic::kProviderUnavailable);
  EXPECT_EQ(UntypedCauseCount(), before + 1);
}

TEST(ErrorCauseDeathTest, AnUntypedErrorIsFatalWhenTestsAskForIt) {
  EXPECT_DEATH(
      {
        SetUntypedCauseFatalForTesting(true);
        ReportedDiagnostic(absl::InternalError("nobody typed me"), "test");
      },
      "");
}

}  // namespace
}  // namespace sn
