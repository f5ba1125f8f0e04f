// The store operations that exist today as crash cases (crash_points.h), each with the
// invariants a restart must find. Shared by store_crash_test (the green sweep) and
// store_crash_findings_test (the sweeps that expose the bugs listed there).
#ifndef SANDBOX_NODE_TESTS_PRIVHELPER_STORE_CRASH_CASES_H_
#define SANDBOX_NODE_TESTS_PRIVHELPER_STORE_CRASH_CASES_H_

#include <cstdint>
#include <string>

#include "tests/privhelper/crash_points.h"

namespace sn::privhelper::store {

inline constexpr uint32_t kOwner = 0;  // privhelper's uid (FaultFs creates as uid 0)
inline constexpr char kCaseInstallation[] = "0000aaaa-0000-4000-8000-0000000000aa";
inline constexpr int64_t kCaseGeneration = 3;

// A valid specification document of kCaseGeneration for Docker; `image` varies the bytes.
std::string CaseSpecification(const std::string& image);

// durable.h, in the directory "recs": publish `fresh` as "r" over `old` ("" = none there).
// A restart removes stray temporaries, fsyncs the directory (the reader rule that makes what
// it reads durable; see the findings test for readers that skip it) and reads the record: it
// is absent, `old`, or `fresh` — never anything else — and `fresh` whenever the publication
// returned OK; a write-once publication over an existing record never replaces it. Nothing
// but "r" is left in the directory.
CrashCase PublishOnceCase(const std::string& old, const std::string& fresh);
CrashCase PublishReplacingCase(const std::string& old, const std::string& fresh);

// installation.h: the first start creates the identity. A restart (LoadOrCreateInstallationId)
// starts, never refuses a torn identity left by the crash (none may be adopted), and returns
// the identity the operation returned whenever it returned one. Adopted: the identity.
// `temporaries_removed` additionally requires the state directory to hold nothing but
// installation.json after the restart (formats.md: stray temporaries are removed at start).
CrashCase InstallationCase(bool temporaries_removed);

// generations.h: GenerationStore::Open, then Register(kCaseGeneration), starting from an empty
// state directory (`from_empty_state`) or from one whose node/generations/ a completed earlier
// start made durable. A restart opens the store (it must open: no torn or foreign record adopted or left in the
// way) and finds the generation held with exactly the registered bytes (its specification
// record byte-exact, its digest, its image) or not held; then a registration with other bytes
// is refused whenever the specification is recorded, the same registration completes (and
// survives a further power loss), and other bytes are refused after it. A registration that
// returned OK is held at every restart. Adopted: "held <digest>" when Open found it held, ""
// otherwise.
CrashCase RegisterCase(bool from_empty_state);

// generations.h: GenerationStore::Open on an empty state directory. A restart opens the store
// (it must open) and finds no generation held and nothing in node/generations/.
CrashCase OpenCase();

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_TESTS_PRIVHELPER_STORE_CRASH_CASES_H_
