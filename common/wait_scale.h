// The node's long retry waits are the spec's and the requirements' (the retention exchange's
// 60 s / 30 s / 30 min, the preparation backoff's 1 to 30 minutes). End-to-end tests that
// exercise those retries would wait minutes on the real clock, so a test-only build of the
// executable (//:sandbox-node-test-waits, `testonly`, compiled with SN_TEST_WAITS) divides
// them by SN_TEST_WAIT_DIVISOR before any program starts. The shipped executable
// (//:sandbox-node) never calls SetWaitDivisor and refuses to start when that variable is set,
// so no configuration, file or environment of a host can shorten a wait
// (sandbox_node_main.cc; docs/tests.md, "End-to-end waits").
//
// Thread safety: SetWaitDivisor runs in main before any thread exists; ScaledWait only reads.
#ifndef SANDBOX_NODE_COMMON_WAIT_SCALE_H_
#define SANDBOX_NODE_COMMON_WAIT_SCALE_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sn {

inline constexpr int kMaxWaitDivisor = 60;
inline constexpr const char kWaitDivisorEnv[] = "SN_TEST_WAIT_DIVISOR";

// `wait` divided by the divisor (1 unless a test build set one).
absl::Duration ScaledWait(absl::Duration wait);

// The divisor a test build reads from SN_TEST_WAIT_DIVISOR: a decimal from 1 to
// kMaxWaitDivisor, nothing else.
absl::StatusOr<int> ParseWaitDivisor(const char* text);

// Test builds only, in main, before any thread starts.
void SetWaitDivisor(int divisor);

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_WAIT_SCALE_H_
