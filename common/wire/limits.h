// Every limit of spec/wire.md (protocol version 1, spec revision 3), named once. The decoder,
// the encoder, the agent, devcore and the tests all use these constants.
#ifndef SANDBOX_NODE_COMMON_WIRE_LIMITS_H_
#define SANDBOX_NODE_COMMON_WIRE_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace sn::wire {

inline constexpr int64_t kProtocolVersion = 1;

// §1 / §2.1 message sizes.
inline constexpr size_t kMaxFrameBytes = 75'497'472;   // 72 MiB
inline constexpr size_t kMaxControlFrameBytes = 32'768;  // 32 KiB
inline constexpr size_t kMaxWebSocketFragmentBytes = 1 << 20;  // senders fragment at 1 MiB
// §2.2 nesting depth, top-level object = 1.
inline constexpr int kMaxDepth = 8;

// §1 timing (seconds).
inline constexpr int kHelloDeadlineSeconds = 15;
inline constexpr int kHeartbeatIntervalSeconds = 10;
inline constexpr int kIdleTimeoutSeconds = 35;
inline constexpr int kRetentionAckTimeoutSeconds = 30;
inline constexpr int kBackoffInitialSeconds = 1;
inline constexpr int kBackoffMaxSeconds = 60;
inline constexpr int kBackoffResetAfterLiveSeconds = 60;

// §1 close codes.
inline constexpr int kCloseInvalidFrame = 1008;
inline constexpr int kCloseTooLarge = 1009;
inline constexpr int kCloseIdle = 4001;
inline constexpr int kCloseHelloTimeout = 4002;
inline constexpr int kCloseIdentityMismatch = 4003;
inline constexpr int kCloseCredentialRejected = 4004;
inline constexpr int kCloseEpochMismatch = 4005;
inline constexpr int kCloseCorrelation = 4006;
inline constexpr int kCloseQueueFull = 4007;
inline constexpr int kCloseRetentionTimeout = 4008;

// §3 hello / health / observation / retention.
inline constexpr size_t kMaxBackendFingerprintBytes = 256;
inline constexpr int64_t kMinMaxActive = 1;
inline constexpr int64_t kMaxMaxActive = 100'000;
inline constexpr int64_t kMinMaxRetained = 0;
inline constexpr int64_t kMaxMaxRetained = 1'000'000;
inline constexpr size_t kMaxGenerationObservations = 8;
inline constexpr size_t kMaxActiveOperations = 32;
inline constexpr size_t kMinRetentionEntries = 1;
inline constexpr size_t kMaxRetentionEntries = 8;
inline constexpr size_t kMaxCodeBytes = 64;  // "code": [a-z][a-z0-9_]{0,63}
inline constexpr int kMaxFractionDigits = 9;  // timestamps
inline constexpr int kMaxLoadIntegerDigits = 7;  // load_1m: (0|[1-9][0-9]{0,6})
inline constexpr int kMaxLoadFractionDigits = 6;  // load_1m: (\.[0-9]{1,6})?

// §4 requests.
inline constexpr size_t kMaxPendingRequests = 32;  // the 33rd closes with 4007
inline constexpr size_t kMinNodeWideOperations = 64;
inline constexpr int64_t kMinTimeoutMs = 1;
inline constexpr int64_t kMaxTimeoutMs = 3'600'000;

// §5 operation arguments and results.
inline constexpr size_t kMaxImageNameBytes = 128;
inline constexpr size_t kMaxCommandArgs = 64;
inline constexpr size_t kMaxArgBytes = 4096;
inline constexpr size_t kMaxEnvEntries = 64;
inline constexpr size_t kMaxEnvKeyBytes = 256;  // [A-Za-z_][A-Za-z0-9_]{0,255}
inline constexpr size_t kMaxEnvValueBytes = 4096;
inline constexpr int64_t kMinCpuMillis = 1;
inline constexpr int64_t kMaxCpuMillis = 256'000;
inline constexpr int64_t kMinMemoryBytes = int64_t{16} << 20;  // 16 MiB
inline constexpr int64_t kMaxMemoryBytes = int64_t{1} << 40;   // 1 TiB
inline constexpr size_t kMinExecArgv = 1;
inline constexpr size_t kMaxExecArgv = 64;
inline constexpr size_t kMaxStdinBytes = size_t{48} << 20;    // decoded
inline constexpr int64_t kMaxOutputLimitBytes = 33'554'432;   // stdout+stderr together
inline constexpr size_t kMaxFileContentBytes = size_t{48} << 20;  // write_file, decoded
inline constexpr int64_t kMaxFileMode = 511;
inline constexpr int64_t kMaxReadFileBytes = 50'331'648;
inline constexpr size_t kMaxPathBytes = 4096;
inline constexpr size_t kMaxNativeIdBytes = 128;
inline constexpr size_t kMaxUnsupportedReasonBytes = 200;

// §6 HTTP bodies.
inline constexpr size_t kMaxHttpBodyBytes = 1 << 20;
inline constexpr size_t kMaxOpaqueBytes = 256;  // enrollment_token, credential (non-empty)
inline constexpr size_t kMaxRuntimeArtifacts = 64;
inline constexpr size_t kMinSpecImages = 1;
inline constexpr size_t kMaxSpecImages = 16;
inline constexpr size_t kMinImageIdentities = 1;
inline constexpr size_t kMaxImageIdentities = 4;
inline constexpr size_t kMaxManifestArtifacts = 256;
inline constexpr size_t kMaxReleaseSourceBytes = 64;   // [A-Za-z0-9][A-Za-z0-9._-]{0,63}
inline constexpr size_t kMaxArtifactNameBytes = 128;   // [A-Za-z0-9][A-Za-z0-9._-]{0,127}

}  // namespace sn::wire

#endif  // SANDBOX_NODE_COMMON_WIRE_LIMITS_H_
