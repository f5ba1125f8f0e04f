// tools/release's publisher: the §6 layout, immutability of published releases, additions of
// declared artifacts only, conflicts that add nothing, --make-current, and crash points.
#include "tools/release/publisher.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/clock.h"
#include "common/release/artifact.h"
#include "common/release/layout.h"
#include "common/release/verify.h"
#include "gtest/gtest.h"
#include "tests/release/fixture.h"
#include "tools/release/files.h"

namespace sn::release_tool {
namespace {

using release::testing::MakeTempDir;
using release::testing::NewKey;

class PublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    inputs_ = MakeTempDir();
    releases_ = MakeTempDir() + "/releases";
    Input("python.tar", std::string(300000, 'p'));
    Input("helper", "#!/bin/sh\nexit 0\n");
    Input("seccomp.json", "{}");
  }

  // Writes an input file; returns its path.
  std::string Input(const std::string& name, const std::string& bytes) {
    const std::string path = inputs_ + "/" + name;
    unlink(path.c_str());
    EXPECT_TRUE(WriteFileAtomically(path, bytes, 0644).ok());
    return path;
  }
  std::string In(const std::string& name) { return inputs_ + "/" + name; }
  std::string Rel(const std::string& rest = "") {
    return releases_ + "/r1" + (rest.empty() ? "" : "/" + rest);
  }

  PublishRequest Request(std::vector<ArtifactInput> artifacts, bool make_current = false) {
    PublishRequest r;
    r.releases_dir = releases_;
    r.source = "r1";
    r.make_current = make_current;
    r.artifacts = std::move(artifacts);
    return r;
  }
  std::vector<ArtifactInput> All() {
    return {{"image", In("python.tar")}, {"helper", In("helper")}, {"seccomp", In("seccomp.json")}};
  }

  absl::StatusOr<PublishResult> Run(const PublishRequest& r) { return Publish(r, key_, clock_); }

  // Verifies the release the way a node does; returns the verified manifest's artifact count
  // present on disk with the right bytes, or -1 when the metadata does not verify.
  int VerifiedArtifacts() {
    auto m = ReadSmallFile(Rel("manifest.json"));
    auto s = ReadSmallFile(Rel("manifest.json.sig"));
    auto sums = ReadSmallFile(Rel("SHA256SUMS"));
    if (!m.ok() || !s.ok() || !sums.ok()) return -1;
    auto v = release::VerifyRelease("r1", *m, *s, *sums, key_.public_key());
    if (!v.ok()) return -1;
    int ok = 0;
    for (const auto& a : v->manifest().artifacts) {
      if (release::VerifyFile(Rel(a.name), a).ok()) ++ok;
    }
    return ok;
  }

  std::vector<std::string> Entries(const std::string& dir) {
    return ListDir(dir).value_or(std::vector<std::string>{});
  }

  release::PrivateKey key_ = NewKey();
  SimulatedClock clock_{absl::FromUnixSeconds(1795000000)};
  std::string inputs_;
  std::string releases_;
};

TEST_F(PublisherTest, NewReleaseIsTheSignedSection6LayoutAndVerifiesAsANodeWould) {
  absl::StatusOr<PublishResult> r = Run(Request(All()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->created);
  EXPECT_FALSE(r->made_current);
  EXPECT_EQ(Entries(Rel()), (std::vector<std::string>{"SHA256SUMS", "helper", "manifest.json",
                                                      "manifest.json.sig", "python.tar",
                                                      "seccomp.json"}));
  EXPECT_EQ(VerifiedArtifacts(), 3);
  auto manifest = wire::DecodeReleaseManifest(*ReadSmallFile(Rel("manifest.json")));
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(manifest->published_at, "2026-11-18T11:06:40Z");  // the injected clock
  ASSERT_EQ(manifest->artifacts.size(), 3u);
  EXPECT_EQ(manifest->artifacts[0].name, "helper");  // sorted by name
  EXPECT_EQ(manifest->artifacts[2].name, "seccomp.json");
  EXPECT_EQ(manifest->artifacts[1].kind, "image");
  EXPECT_EQ(manifest->artifacts[1].size, 300000);
  struct stat st;
  ASSERT_EQ(stat(Rel().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(stat(Rel("python.tar").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  // Nothing but the release and the lock file in the releases directory: no current yet.
  EXPECT_EQ(Entries(releases_), (std::vector<std::string>{".publish.lock", "r1"}));
}

TEST_F(PublisherTest, MakeCurrentPointsCurrentAtTheSourceWithOneNewline) {
  ASSERT_TRUE(Run(Request(All(), /*make_current=*/true)).ok());
  EXPECT_EQ(*ReadSmallFile(releases_ + "/current"), "r1\n");
  PublishRequest r2 = Request({{"agent", Input("agent", "agent v2")}}, true);
  r2.source = "r2";
  ASSERT_TRUE(Run(r2).ok());
  EXPECT_EQ(*ReadSmallFile(releases_ + "/current"), "r2\n");
}

TEST_F(PublisherTest, RepublishingTheSameArtifactsChangesNoByte) {
  ASSERT_TRUE(Run(Request(All())).ok());
  const std::string manifest = *ReadSmallFile(Rel("manifest.json"));
  const std::string sig = *ReadSmallFile(Rel("manifest.json.sig"));
  clock_.Advance(absl::Hours(1));
  absl::StatusOr<PublishResult> again = Run(Request(All(), true));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created);
  EXPECT_TRUE(again->added.empty());
  EXPECT_TRUE(again->made_current);
  EXPECT_EQ(*ReadSmallFile(Rel("manifest.json")), manifest);
  EXPECT_EQ(*ReadSmallFile(Rel("manifest.json.sig")), sig);
}

TEST_F(PublisherTest, AnArtifactThePublishedManifestDoesNotDeclareIsAConflictAndAddsNothing) {
  ASSERT_TRUE(Run(Request({{"image", In("python.tar")}})).ok());
  const std::string manifest = *ReadSmallFile(Rel("manifest.json"));
  absl::StatusOr<PublishResult> r = Run(Request({{"helper", In("helper")}}, true));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(Entries(Rel()), (std::vector<std::string>{"SHA256SUMS", "manifest.json",
                                                      "manifest.json.sig", "python.tar"}));
  EXPECT_EQ(*ReadSmallFile(Rel("manifest.json")), manifest);
  EXPECT_EQ(TypeOf(releases_ + "/current").value(), EntryType::kMissing);
}

TEST_F(PublisherTest, OtherBytesForAPresentArtifactAreAConflictAndOverwriteNothing) {
  ASSERT_TRUE(Run(Request(All())).ok());
  Input("helper", "#!/bin/sh\nexit 1\n");
  EXPECT_EQ(Run(Request({{"helper", In("helper")}})).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*ReadSmallFile(Rel("helper")), "#!/bin/sh\nexit 0\n");
}

TEST_F(PublisherTest, ADeclaredKindMustMatch) {
  ASSERT_TRUE(Run(Request(All())).ok());
  EXPECT_EQ(Run(Request({{"native_helper", In("helper")}})).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(PublisherTest, MissingDeclaredArtifactsAreAddedOnlyWithTheDeclaredBytes) {
  ASSERT_TRUE(Run(Request(All())).ok());
  ASSERT_EQ(unlink(Rel("python.tar").c_str()), 0);
  ASSERT_EQ(unlink(Rel("helper").c_str()), 0);
  EXPECT_EQ(VerifiedArtifacts(), 1);
  // One right, one wrong: the conflict adds neither.
  const std::string good_helper = *ReadSmallFile(In("helper"));
  Input("python.tar", std::string(300000, 'q'));
  absl::StatusOr<PublishResult> bad =
      Run(Request({{"helper", In("helper")}, {"image", In("python.tar")}}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition) << bad.status();
  EXPECT_EQ(Entries(Rel()), (std::vector<std::string>{"SHA256SUMS", "manifest.json",
                                                      "manifest.json.sig", "seccomp.json"}));
  // Only the helper: added; the image is still missing and reported so.
  absl::StatusOr<PublishResult> one = Run(Request({{"helper", In("helper")}}));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->added, std::vector<std::string>{"helper"});
  EXPECT_EQ(one->missing, std::vector<std::string>{"python.tar"});
  EXPECT_EQ(*ReadSmallFile(Rel("helper")), good_helper);
  // An incomplete release never becomes current, and that is refused before adding anything.
  EXPECT_EQ(Run(Request({}, true)).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(TypeOf(releases_ + "/current").value(), EntryType::kMissing);
  Input("python.tar", std::string(300000, 'p'));
  absl::StatusOr<PublishResult> rest = Run(Request({{"image", In("python.tar")}}, true));
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(rest->added, std::vector<std::string>{"python.tar"});
  EXPECT_TRUE(rest->missing.empty());
  EXPECT_EQ(VerifiedArtifacts(), 3);
  EXPECT_EQ(*ReadSmallFile(releases_ + "/current"), "r1\n");
}

TEST_F(PublisherTest, AChangedPublishedArtifactRefusesEveryAddition) {
  ASSERT_TRUE(Run(Request(All())).ok());
  ASSERT_EQ(unlink(Rel("helper").c_str()), 0);
  ASSERT_EQ(chmod(Rel("seccomp.json").c_str(), 0644), 0);
  ASSERT_TRUE(WriteFileAtomically(Rel("seccomp.json"), "{ }", 0644).ok());
  EXPECT_EQ(Run(Request({{"helper", In("helper")}})).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(TypeOf(Rel("helper")).value(), EntryType::kMissing);
}

TEST_F(PublisherTest, AForeignOrSymlinkedEntryRefusesEveryAddition) {
  ASSERT_TRUE(Run(Request(All())).ok());
  ASSERT_EQ(unlink(Rel("helper").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(Rel("notes.txt"), "x", 0644).ok());
  EXPECT_EQ(Run(Request({{"helper", In("helper")}})).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(unlink(Rel("notes.txt").c_str()), 0);
  ASSERT_EQ(symlink(In("helper").c_str(), Rel("helper").c_str()), 0);
  EXPECT_EQ(Run(Request({})).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(PublisherTest, AReleaseSignedByAnotherKeyOrWithBrokenMetadataIsAConflict) {
  ASSERT_TRUE(Run(Request(All())).ok());
  release::PrivateKey other = NewKey();
  EXPECT_EQ(Publish(Request({}), other, clock_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const std::string sums = *ReadSmallFile(Rel("SHA256SUMS"));
  ASSERT_TRUE(WriteFileAtomically(Rel("SHA256SUMS"), sums.substr(0, sums.find('\n') + 1), 0644)
                  .ok());
  EXPECT_EQ(Run(Request({})).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(unlink(Rel("SHA256SUMS").c_str()), 0);
  EXPECT_EQ(Run(Request({})).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(PublisherTest, UsageErrorsAreInvalidArgumentAndCreateNothing) {
  auto expect_usage = [&](PublishRequest r) {
    EXPECT_EQ(Run(r).status().code(), absl::StatusCode::kInvalidArgument) << r.source;
    EXPECT_NE(TypeOf(Rel()).value(), EntryType::kDirectory);
  };
  PublishRequest current = Request(All());
  current.source = "current";
  expect_usage(current);
  PublishRequest dotted = Request(All());
  dotted.source = ".staging-x";
  expect_usage(dotted);
  expect_usage(Request({{"Image", In("python.tar")}}));
  expect_usage(Request({{"image", In("python.tar")}, {"helper", inputs_ + "/../x/python.tar"}}));
  expect_usage(Request({{"agent", Input("manifest.json", "{}")}}));
  expect_usage(Request({{"agent", Input(".hidden", "x")}}));
  expect_usage(Request({}));                                  // a new release needs artifacts
  expect_usage(Request({{"agent", inputs_}}));                 // a directory
  EXPECT_EQ(Run(Request({{"agent", inputs_ + "/absent"}})).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(TypeOf(Rel()).value(), EntryType::kMissing);
}

// A crash at every durable step of a new release: the release is either absent or complete,
// and the next publish completes it with no leftovers.
TEST_F(PublisherTest, ACrashAtAnyStepOfANewReleaseNeverLeavesAPartialReleaseVisible) {
  const std::vector<std::string> steps = {"copy-artifacts", "write-metadata", "sync-staging",
                                          "rename-release", "sync-releases-dir",
                                          "write-current"};
  for (const std::string& step : steps) {
    SCOPED_TRACE(step);
    releases_ = MakeTempDir() + "/releases";
    PublishRequest r = Request(All(), /*make_current=*/true);
    r.step_hook = [&](std::string_view s) { return s != step; };
    EXPECT_EQ(Run(r).status().code(), absl::StatusCode::kAborted);
    const EntryType t = TypeOf(Rel()).value();
    if (t == EntryType::kDirectory) {
      EXPECT_EQ(VerifiedArtifacts(), 3);  // visible means complete
    } else {
      EXPECT_EQ(t, EntryType::kMissing);
    }
    EXPECT_EQ(TypeOf(releases_ + "/current").value(), EntryType::kMissing);
    ASSERT_TRUE(Run(Request(All(), true)).ok());
    EXPECT_EQ(VerifiedArtifacts(), 3);
    EXPECT_EQ(*ReadSmallFile(releases_ + "/current"), "r1\n");
    EXPECT_EQ(Entries(releases_),
              (std::vector<std::string>{".publish.lock", "current", "r1"}));
  }
}

// A crash at every durable step of an addition: published artifacts stay intact, a staged
// copy is never served, and the next publish finishes the addition.
TEST_F(PublisherTest, ACrashAtAnyStepOfAnAdditionKeepsTheReleaseValidAndIsFinishedLater) {
  for (const std::string step : {"stage-artifact", "rename-artifact", "sync-release-dir"}) {
    SCOPED_TRACE(step);
    releases_ = MakeTempDir() + "/releases";
    ASSERT_TRUE(Run(Request(All())).ok());
    ASSERT_EQ(unlink(Rel("python.tar").c_str()), 0);
    PublishRequest r = Request({{"image", In("python.tar")}});
    r.step_hook = [&](std::string_view s) { return s != step; };
    EXPECT_EQ(Run(r).status().code(), absl::StatusCode::kAborted);
    const int present = VerifiedArtifacts();
    EXPECT_TRUE(present == 2 || present == 3) << present;
    absl::StatusOr<PublishResult> again = Run(Request({{"image", In("python.tar")}}));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(VerifiedArtifacts(), 3);
    for (const std::string& e : Entries(Rel())) EXPECT_NE(e.rfind(".staging-", 0), 0u) << e;
  }
}

}  // namespace
}  // namespace sn::release_tool
