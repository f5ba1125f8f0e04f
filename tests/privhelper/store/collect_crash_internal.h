// The pieces of the collection crash cases (collect_crash_world.cc, collect_crash_cases.cc) that
// collect_crash_findings_test drives by hand.
#ifndef SANDBOX_NODE_TESTS_PRIVHELPER_STORE_COLLECT_CRASH_INTERNAL_H_
#define SANDBOX_NODE_TESTS_PRIVHELPER_STORE_COLLECT_CRASH_INTERNAL_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/lease.h"
#include "tests/privhelper/store/collect_crash_cases.h"

namespace sn::privhelper::store {

using fs::FaultFs;

inline constexpr char kGenerationsDir[] = "node/generations";
inline std::string ReleaseDir() { return absl::StrCat("releases/", kCaseSource); }
inline std::string ReleasePath(const std::string& name) {
  return absl::StrCat(ReleaseDir(), "/", name);
}
inline std::string GenerationPath(const std::string& name) {
  return absl::StrCat(kGenerationsDir, "/", name);
}

// What the setup of a stage left (durable), read once per case.
struct Baseline {
  std::map<std::string, std::string> files;  // node/generations/* and releases/<source>/*
  std::map<int64_t, FileInfo> leases;        // each generation's lease file
  std::set<std::string> own_stored;          // generation 3's own artifacts stored
  bool journal = false;                      // generation 3's journal recorded
  std::set<std::string> survivors;           // release files an uninterrupted run leaves
};

void SetupCollection(FaultFs& fs, const CollectWorld& w, CollectStage stage);
Baseline TakeBaseline(const CollectWorld& w, CollectStage stage);

// Hooks as CollectGeneration's on a node where nothing references the generation; the
// native cleanup is counted (and its images kept, as Docker's).
CollectHooks CountingHooks(int* native_calls, std::vector<std::string>* images);
absl::Status CollectThree(Privhelper& p, const CollectWorld& w, const CollectHooks& hooks);

// Stat of a '/'-separated path from the root, through the Fs seam.
inline absl::StatusOr<FileInfo> StatPath(FaultFs& fs, const std::string& path) {
  absl::StatusOr<Dir> dir = fs.Root();
  std::string rest = path;
  for (size_t slash = rest.find('/'); dir.ok() && slash != std::string::npos;
       slash = rest.find('/')) {
    dir = fs.OpenDirAt(*dir, rest.substr(0, slash));
    rest = rest.substr(slash + 1);
  }
  if (!dir.ok()) return dir.status();
  return fs.StatAt(*dir, rest);
}

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_TESTS_PRIVHELPER_STORE_COLLECT_CRASH_INTERNAL_H_
