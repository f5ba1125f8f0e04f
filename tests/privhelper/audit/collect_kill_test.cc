// A real kill -9 of the privhelper executable while CollectGeneration runs (issue 10), called as
// the agent's uid would, on the host's dockerd. Generation 1 has 20 release files of its own
// (2 MiB each, every one checksummed before the journal and again before its removal) beside
// the image archive and four files generation 2 (READY, retained) shares. Each collection is
// killed at a moment observed from outside — privhelper holding the installation lock
// (/proc/locks) with no journal yet, the journal written, native_done recorded in it, the first
// file gone, half the files gone, the dropped marker written — then privhelper is started again
// on the same state and checked from outside: records (generation 1's specification and images
// record gone once its marker is, byte for byte otherwise) and files, ListGenerations, Execute
// refused on generation 1 once it is collecting and served on 2, BeginPreparation of 1 refused,
// the Docker image still in the daemon. The first kill leaves generation 1 READY and untouched;
// each next collection resumes from what the kill left; the last call finishes. A moment that
// passed before it could be observed is reported ("KILL-9 ... hit=0"); the FaultFs sweeps
// (collect_crash_test) cover every step regardless.
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"
#include "privhelper/docker/beast_engine.h"
#include "tests/privhelper/audit/audit_fixture.h"

namespace sn::testing {
namespace {

constexpr char kSource[] = "kill-1";
constexpr int kFiles = 24;  // profile-00 .. profile-23
constexpr int kShared = 4;  // profile-00 .. profile-03 are generation 2's too
constexpr size_t kFileBytes = 2 << 20;

std::string ProfileName(int i) { return absl::StrCat("profile-", i < 10 ? "0" : "", i, ".json"); }

// The state of `generation` in a ListGenerations text response ("" when not listed).
std::string StateIn(const std::string& listed, int64_t generation) {
  const std::string key = absl::StrCat("generation: ", generation, " ");
  const size_t at = listed.find(key);
  if (at == std::string::npos) return "";
  const size_t state = listed.find("state: ", at);
  if (state == std::string::npos) return "";
  const size_t end = listed.find(' ', state + 7);
  return listed.substr(state + 7, end - state - 7);
}

class CollectKillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SN_REQUIRE_ROOT();
    SN_REQUIRE_DOCKERD();
    image_ = BusyboxImageId();
    ASSERT_FALSE(image_.empty()) << "docker import of the busybox image failed";
    ph_ = PrivhelperProcess::Start({});
    ASSERT_NE(ph_, nullptr);
    installation_ = ph_->InstallationId();
  }
  void TearDown() override {
    if (ph_ != nullptr) RemoveInstallationContainers(installation_);
  }

  std::string Gen(const std::string& name) const {
    return ph_->File("state/node/generations/" + name);
  }
  std::string Stored(const std::string& name) const {
    return ph_->File(absl::StrCat("state/releases/", kSource, "/", name));
  }
  CallResult One(const std::vector<std::string>& args) {
    std::vector<CallResult> r = ph_->Attack(args);
    EXPECT_EQ(r.size(), 1u) << args[0];
    return r.empty() ? CallResult{} : r[0];
  }
  std::string Spec(int64_t generation, int profiles) {
    wire::SpecificationDocument d;
    d.generation = generation;
    d.provider = "docker";
    d.runtime_source = kSource;
    d.artifacts.push_back({"busybox.tar", "image", digests_["busybox.tar"],
                           static_cast<int64_t>(Slurp(BusyboxArchive()).size())});
    for (int i = 0; i < profiles; ++i) {
      d.artifacts.push_back(
          {ProfileName(i), "seccomp", digests_[ProfileName(i)], static_cast<int64_t>(kFileBytes)});
    }
    d.images.push_back({"busybox", "busybox.tar", {image_}});
    const std::string spec = wire::EncodeSpecificationDocument(d);
    const std::string path = ph_->File(absl::StrCat("spec-", generation, ".json"));
    { std::ofstream(path) << spec; }
    chmod(path.c_str(), 0644);
    return spec;
  }

  // The release (the image archive and kFiles profiles), generation 1 with all of them,
  // generation 2 with the archive and the first kShared.
  void PrepareBoth() {
    const std::string files = ph_->File("files");
    mkdir(files.c_str(), 0755);
    std::string publish =
        absl::StrCat(ph_->File("bin/release"), " publish --releases-dir=", ph_->File("releases"),
                     " --source=", kSource, " --private-key=", ph_->File("release.key"),
                     " image=", BusyboxArchive());
    digests_["busybox.tar"] = Sha256Hex(Slurp(BusyboxArchive()));
    for (int i = 0; i < kFiles; ++i) {
      std::string bytes(kFileBytes, '\0');
      for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<char>((k * 131 + i) & 0xff);
      const std::string path = files + "/" + ProfileName(i);
      { std::ofstream(path, std::ios::binary) << bytes; }
      chmod(path.c_str(), 0644);
      digests_[ProfileName(i)] = Sha256Hex(bytes);
      absl::StrAppend(&publish, " seccomp=", path);
    }
    mkdir(ph_->File("releases").c_str(), 0755);
    ASSERT_EQ(system((publish + " >/dev/null").c_str()), 0) << "release publish";
    const std::string dir = ph_->File(absl::StrCat("releases/", kSource));
    ASSERT_EQ(One({"--method=AdoptRelease", "--release_dir=" + dir,
                   absl::StrCat("--request=source: \"", kSource, "\"")})
                  .diagnostic,
              "DIAGNOSTIC_UNSPECIFIED");
    for (auto [generation, profiles] : {std::pair{1, kFiles}, std::pair{2, kShared}}) {
      const std::string spec = Spec(generation, profiles);
      digest_[generation] = Sha256Hex(spec);
      CallResult begun =
          One({"--method=BeginPreparation",
               "--spec_file=" + ph_->File(absl::StrCat("spec-", generation, ".json")),
               absl::StrCat("--request=generation: ", generation, " specification_digest: \"",
                            digest_[generation], "\"")});
      ASSERT_EQ(begun.diagnostic, "DIAGNOSTIC_UNSPECIFIED") << ph_->Log();
      if (generation == 2) {
        EXPECT_EQ(begun.missing, 0) << "2's files were stored for 1";
      }
      if (begun.missing > 0) {
        std::vector<std::string> names = {"busybox.tar"};
        for (int i = 0; i < kFiles; ++i) names.push_back(ProfileName(i));
        for (const std::string& name : names) {
          ASSERT_EQ(One({"--method=PutArtifact", "--artifact_file=" + dir + "/" + name,
                         absl::StrCat("--request=generation: 1 name: \"", name, "\"")})
                        .status,
                    0);
        }
      }
      CallResult finished =
          One({"--method=FinishPreparation", absl::StrCat("--request=generation: ", generation)});
      ASSERT_EQ(finished.state, "GENERATION_STATE_READY") << ph_->Log();
    }
    for (const char* name : {"1.lease", "1.lease-identity", "1.json", "1.specification", "2.lease",
                             "2.lease-identity", "2.json", "2.specification"}) {
      records_[name] = Slurp(Gen(name));
      struct stat st {};
      ASSERT_EQ(lstat(Gen(name).c_str(), &st), 0);
      inodes_[name] = st.st_ino;
    }
  }

  CallResult Collect1() {
    return One(
        {"--method=CollectGeneration", "--deadline_ms=300000",
         absl::StrCat("--request=generation: 1 specification_digest: \"", digest_[1], "\"")});
  }

  // Collects generation 1 in the background and kills privhelper as soon as `moment` holds
  // (polled on the filesystem). True when the kill came before the call returned.
  bool CollectAndKillWhen(const std::function<bool()>& moment) {
    std::atomic<bool> done{false};
    std::thread call([&] {
      Collect1();
      done = true;
    });
    bool hit = false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (!done && std::chrono::steady_clock::now() < until) {
      if (moment()) {
        ph_->Kill();
        hit = true;
        at_kill_ = absl::StrCat("journal=", PathExists(Gen("1.collecting")),
                                " marker=", PathExists(Gen("1.dropped")),
                                " own_files_left=", OwnFilesLeft());
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    call.join();
    if (!hit) {
      ph_->Kill();  // the collection returned first: kill the idle process anyway
      at_kill_ = "after the call returned";
    }
    return hit;
  }

  // privhelper holds node/installation.lock exclusively (/proc/locks): a collection runs.
  bool InstallationLocked() const {
    struct stat st {};
    if (lstat(ph_->File("state/node/installation.lock").c_str(), &st) != 0) return false;
    const std::string inode = absl::StrCat(":", st.st_ino, " ");
    std::ifstream in("/proc/locks");
    std::string line;
    while (std::getline(in, line)) {
      if (absl::StrContains(line, "FLOCK") && absl::StrContains(line, "WRITE") &&
          absl::StrContains(line, inode)) {
        return true;
      }
    }
    return false;
  }

  int OwnFilesLeft() const {
    int n = 0;
    for (int i = kShared; i < kFiles; ++i) n += PathExists(Stored(ProfileName(i))) ? 1 : 0;
    return n;
  }

  // After a restart, from outside. Returns generation 1's state.
  std::string CheckFromOutside(const std::string& moment, bool hit) {
    const bool dropped = PathExists(Gen("1.dropped"));
    for (const auto& [name, bytes] : records_) {
      if (dropped && name == "1.specification") {
        // Reclaimed once the marker is durable (issue #23, finding 3); kept until then.
        EXPECT_FALSE(PathExists(Gen(name))) << name << " beside the marker after a start";
        EXPECT_FALSE(PathExists(Gen("1.images"))) << "1.images beside the marker after a start";
        continue;
      }
      EXPECT_EQ(Slurp(Gen(name)), bytes) << name << " changed";
      struct stat st {};
      EXPECT_EQ(lstat(Gen(name).c_str(), &st), 0) << name;
      EXPECT_EQ(st.st_ino, inodes_[name]) << name << " was replaced";
    }
    // What generation 2 references is never removed; what is left of 1's is exact.
    EXPECT_EQ(Sha256Hex(Slurp(Stored("busybox.tar"))), digests_["busybox.tar"]);
    for (int i = 0; i < kFiles; ++i) {
      const std::string path = Stored(ProfileName(i));
      if (i < kShared || PathExists(path)) {
        EXPECT_EQ(Sha256Hex(Slurp(path)), digests_[ProfileName(i)]) << ProfileName(i);
      }
    }
    const bool journal = PathExists(Gen("1.collecting"));
    const bool marker = PathExists(Gen("1.dropped"));
    const int left = OwnFilesLeft();
    if (left < kFiles - kShared) {
      EXPECT_TRUE(journal || marker) << "files gone without a journal";
    }
    if (marker) {
      EXPECT_FALSE(journal) << "a journal beside the marker after a start";
      EXPECT_EQ(left, 0) << "a marker before every file was removed";
    }
    const std::string journal_text = journal ? Slurp(Gen("1.collecting")) : "";
    const bool native_done = absl::StrContains(journal_text, "\"native_done\":true");
    if (journal && !native_done) {
      EXPECT_EQ(left, kFiles - kShared) << "removed before native_done";
    }
    std::vector<CallResult> listed = ph_->Attack({"--method=ListGenerations"});
    EXPECT_EQ(listed.size(), 1u);
    const std::string list = listed.empty() ? "" : listed[0].response;
    const std::string state = StateIn(list, 1);
    EXPECT_EQ(StateIn(list, 2), "GENERATION_STATE_READY") << list;
    EXPECT_EQ(state, marker    ? "GENERATION_STATE_DROPPED"
                     : journal ? "GENERATION_STATE_COLLECTING"
                               : "GENERATION_STATE_READY")
        << list;
    // Never usable, never prepared again; generation 2 serves; the daemon keeps the image.
    const std::string inspect = absl::StrCat(" inspect { sandbox_id: \"", RandomUuid(), "\" }");
    auto request = [&](int64_t g) {
      return absl::StrCat("--request=request_id: \"", RandomUuid(), "\" generation: ", g,
                          " budget_ms: 60000 installation_id: \"", installation_, "\"", inspect);
    };
    // (A call on a READY generation 1 would start its helper, which holds the next collection.)
    if (journal || marker) {
      EXPECT_EQ(One({"--method=Execute", request(1)}).refusal, "REFUSAL_GENERATION_NOT_HELD");
      CallResult again =
          One({"--method=BeginPreparation", "--spec_file=" + ph_->File("spec-1.json"),
               absl::StrCat("--request=generation: 1 specification_digest: \"", digest_[1], "\"")});
      EXPECT_EQ(again.diagnostic, "CONFIGURATION_INVALID");
    }
    EXPECT_EQ(One({"--method=Execute", request(2)}).error_code, "ERROR_CODE_NONE") << ph_->Log();
    docker::BeastDockerEngine e(kHostDockerSocket);
    docker::RequestOptions o;
    o.timeout = absl::Seconds(30);
    absl::StatusOr<docker::HttpResponse> image =
        e.Request("GET", "/images/" + image_ + "/json", "", o);
    EXPECT_TRUE(image.ok() && image->status == 200) << "collection never removes a Docker image";
    std::cout << "KILL-9 " << moment << ": hit=" << hit << " (at the kill " << at_kill_
              << "); after the restart state=" << state << " own_files_left=" << left
              << " journal=" << journal << " native_done=" << native_done << " marker=" << marker
              << std::endl;
    return state;
  }

  std::unique_ptr<PrivhelperProcess> ph_;
  std::string image_;
  std::string installation_;
  std::map<std::string, std::string> digests_;
  std::map<int64_t, std::string> digest_;
  std::map<std::string, std::string> records_;
  std::map<std::string, ino_t> inodes_;
  std::string at_kill_;  // what the filesystem held right after the last kill
};

TEST_F(CollectKillTest, KilledAtEveryObservableMomentTheNextStartRecoversAndANewCallFinishes) {
  PrepareBoth();
  if (HasFatalFailure()) return;
  const int own = kFiles - kShared;
  const std::vector<std::pair<std::string, std::function<bool()>>> moments = {
      {"installation lock taken, files being verified (no journal yet)",
       [&] { return InstallationLocked() && !PathExists(Gen("1.collecting")); }},
      {"journal written", [&] { return PathExists(Gen("1.collecting")); }},
      {"native_done recorded",
       [&] { return absl::StrContains(Slurp(Gen("1.collecting")), "\"native_done\":true"); }},
      {"first file gone", [&] { return OwnFilesLeft() < own; }},
      {"half the files gone", [&] { return OwnFilesLeft() <= own / 2; }},
      {"dropped marker written", [&] { return PathExists(Gen("1.dropped")); }},
  };
  int hits = 0;
  for (const auto& [name, moment] : moments) {
    const bool hit = CollectAndKillWhen(moment);
    hits += hit ? 1 : 0;
    ASSERT_TRUE(ph_->Restart()) << ph_->Log();
    CheckFromOutside(name, hit);
    if (HasFailure()) return;
  }
  // Removing a 2 MiB file takes a checksum of it first, so the file moments are always
  // observable; the others may pass between two polls on a loaded machine (then the FaultFs
  // sweeps alone cover them).
  EXPECT_GE(hits, 2);
  std::cout << "KILL-9 moments hit: " << hits << " of " << moments.size() << std::endl;
  // A new call finishes what the kills left; and again changes nothing.
  CallResult done = Collect1();
  EXPECT_EQ(done.outcome, "COLLECT_OUTCOME_DROPPED") << done.reason << ph_->Log();
  EXPECT_EQ(OwnFilesLeft(), 0);
  EXPECT_TRUE(PathExists(Gen("1.dropped")));
  EXPECT_FALSE(PathExists(Gen("1.collecting")));
  at_kill_ = "none: privhelper kept running";
  EXPECT_EQ(CheckFromOutside("after the last call", false), "GENERATION_STATE_DROPPED");
  EXPECT_EQ(Collect1().outcome, "COLLECT_OUTCOME_DROPPED");
}

}  // namespace
}  // namespace sn::testing
