// Whether this binary carries a sanitizer runtime (ASan, TSan, MSan, UBSan under clang; ASan
// or TSan under gcc): tests and fuzzing only, never a release. The helper sandbox then leaves
// the address space unlimited (ASan reserves terabytes of shadow memory) and lets the runtime
// read /proc (privhelper/native/seccomp_policy.cc); everything else stays as in a release.
#ifndef SANDBOX_NODE_PRIVHELPER_HELPERS_SANITIZER_BUILD_H_
#define SANDBOX_NODE_PRIVHELPER_HELPERS_SANITIZER_BUILD_H_

// SN_ASAN_BUILD: defined when AddressSanitizer (and so LeakSanitizer) is linked in.
#if defined(__SANITIZE_ADDRESS__)
#define SN_ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SN_ASAN_BUILD 1
#endif
#endif

namespace sn::privhelper {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer) || __has_feature(undefined_behavior_sanitizer)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif
#else
inline constexpr bool kSanitizerBuild = false;
#endif

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_HELPERS_SANITIZER_BUILD_H_
