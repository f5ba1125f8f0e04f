// The overlapped image load (issue 9) attacked as the agent's uid against the real privhelper
// executable and the host's dockerd, with an image archive made here (an image ID and tag no
// daemon holds): an upload whose last chunk is corrupted leaves no image in the daemon,
// publishes nothing and leaves the plan visible with import_started true; the right bytes then
// prepare the generation without a second load. A header naming a generation without a plan,
// or an artifact its plan does not name, gets no overlapped load (refused, for the reason
// privhelper logs).
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/store/overlapped_load.h"
#include "tests/privhelper/audit/audit_fixture.h"
#include "tests/privhelper/docker/image_archive.h"

namespace sn::testing {
namespace {

constexpr char kSource[] = "overlap-1";

class OverlapAuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SN_REQUIRE_ROOT();
    SN_REQUIRE_DOCKERD();
    ph_ = PrivhelperProcess::Start({});
    ASSERT_NE(ph_, nullptr);
    image_ = MakeImageArchive(3 << 20, privhelper::store::OverlappedLoad::kWithheldBytes);
    const std::string dir = ph_->File("archives");
    ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
    archive_ = dir + "/overlap.tar";
    Write(archive_, image_.archive);
    std::string corrupted = image_.archive;
    corrupted.back() ^= 1;
    corrupted_ = ph_->File("corrupted.tar");
    Write(corrupted_, corrupted);
    const std::string releases = ph_->File("releases");
    mkdir(releases.c_str(), 0755);
    ASSERT_EQ(system(absl::StrCat(ph_->File("bin/release"), " publish --releases-dir=", releases,
                                  " --source=", kSource, " --private-key=",
                                  ph_->File("release.key"), " image=", archive_,
                                  " >/dev/null 2>&1")
                         .c_str()),
              0);
    wire::SpecificationDocument d;
    d.generation = 1;
    d.provider = "docker";
    d.runtime_source = kSource;
    d.artifacts.push_back({"overlap.tar", "image", Sha256Hex(image_.archive),
                           static_cast<int64_t>(image_.archive.size())});
    d.images.push_back({"overlap", "overlap.tar", {image_.image_id}});
    spec_ = wire::EncodeSpecificationDocument(d);
    spec_path_ = ph_->File("spec-1.json");
    Write(spec_path_, spec_);
  }
  void TearDown() override {
    if (!image_.image_id.empty()) {
      (void)engine_.Request("DELETE", absl::StrCat("/images/", image_.image_id, "?force=1"), "",
                            {});
    }
  }
  static void Write(const std::string& path, const std::string& bytes) {
    { std::ofstream(path, std::ios::binary) << bytes; }
    chmod(path.c_str(), 0644);
  }
  CallResult Step(const std::vector<std::string>& args) {
    std::vector<CallResult> r = ph_->Attack(args);
    EXPECT_EQ(r.size(), 1u) << args[0];
    return r.empty() ? CallResult{} : r[0];
  }
  void AdoptAndBegin() {
    EXPECT_EQ(Step({"--method=AdoptRelease",
                    absl::StrCat("--release_dir=", ph_->File("releases"), "/", kSource),
                    absl::StrCat("--request=source: \"", kSource, "\"")})
                  .diagnostic,
              "DIAGNOSTIC_UNSPECIFIED")
        << ph_->Log();
    CallResult begin = Step({"--method=BeginPreparation", "--spec_file=" + spec_path_,
                             absl::StrCat("--request=generation: 1 specification_digest: \"",
                                          Sha256Hex(spec_), "\"")});
    EXPECT_EQ(begin.diagnostic, "DIAGNOSTIC_UNSPECIFIED") << ph_->Log();
    EXPECT_EQ(begin.missing, 1);
  }
  CallResult Put(const std::string& file, const std::string& header) {
    return Step({"--method=PutArtifact", "--artifact_file=" + file, "--request=" + header});
  }
  int InspectStatus(const std::string& name) {
    absl::StatusOr<docker::HttpResponse> r =
        engine_.Request("GET", absl::StrCat("/images/", name, "/json"), "", {});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->status : -1;
  }
  std::string Stored() const { return ph_->File(absl::StrCat("state/releases/", kSource,
                                                              "/overlap.tar")); }

  docker::BeastDockerEngine engine_{kHostDockerSocket};
  std::unique_ptr<PrivhelperProcess> ph_;
  CraftedImage image_;
  std::string archive_, corrupted_, spec_, spec_path_;
};

TEST_F(OverlapAuditTest, ACorruptedLastChunkLeavesNoImageNothingPublishedAndTheImportVisible) {
  ASSERT_EQ(InspectStatus(image_.image_id), 404);
  AdoptAndBegin();
  CallResult put = Put(corrupted_, "generation: 1 name: \"overlap.tar\"");
  EXPECT_EQ(put.diagnostic, "RUNTIME_DOWNLOAD_FAILED") << ph_->Log();
  EXPECT_EQ(ph_->CountLog("loading the image archive while it streams"), 1) << ph_->Log();
  CallResult finish = Step({"--method=FinishPreparation", "--request=generation: 1"});
  EXPECT_NE(finish.diagnostic, "DIAGNOSTIC_UNSPECIFIED") << "the archive was never stored";
  // The cut load ends once the engine asks for its next piece (a real process: polled).
  for (int i = 0; i < 600 && ph_->CountLog("overlapped image load failed") == 0; ++i) {
    usleep(100 * 1000);
  }
  EXPECT_EQ(ph_->CountLog("overlapped image load failed"), 1) << ph_->Log();
  EXPECT_EQ(InspectStatus(image_.image_id), 404) << "no image with that ID";
  EXPECT_EQ(InspectStatus(image_.tag), 404) << "no new tag";
  EXPECT_FALSE(PathExists(Stored())) << "nothing published";
  EXPECT_FALSE(PathExists(ph_->File("state/node/generations/1.json")));
  const std::string plan = Slurp(ph_->File("state/node/generations/1.preparing"));
  EXPECT_TRUE(absl::StrContains(plan, "\"import_started\":true")) << plan;

  // The right bytes: loaded while they stream, and Finish does not load them again.
  EXPECT_EQ(Put(archive_, "generation: 1 name: \"overlap.tar\"").diagnostic,
            "DIAGNOSTIC_UNSPECIFIED")
      << ph_->Log();
  finish = Step({"--method=FinishPreparation", "--request=generation: 1"});
  EXPECT_EQ(finish.state, "GENERATION_STATE_READY") << ph_->Log();
  EXPECT_EQ(ph_->CountLog("the image was loaded while it streamed; not loaded again"), 1)
      << ph_->Log();
  EXPECT_EQ(ph_->CountLog("importing an image"), 0) << ph_->Log();
  EXPECT_EQ(InspectStatus(image_.image_id), 200);
  EXPECT_TRUE(PathExists(ph_->File("state/node/generations/1.json")));
}

// The attack of the second audit: the daemon holds another image (another installation's, made
// by root, holding a secret); the specification names the signed archive but gives that
// image's ID as its identity. The signed archive's bytes decide: what it produces is not among
// the identities, so nothing is published, and no generation ever runs the other image.
TEST_F(OverlapAuditTest, ASpecificationGivingAnotherHeldImagesIdentityIsRefused) {
  CraftedImage secret = MakeImageArchive(4096, 0);
  docker::RequestOptions load;
  load.timeout = absl::Seconds(60);
  load.content_type = "application/x-tar";
  absl::StatusOr<docker::HttpResponse> loaded =
      engine_.Request("POST", "/images/load?quiet=1", secret.archive, load);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->status, 200) << loaded->body;
  ASSERT_EQ(InspectStatus(secret.image_id), 200);

  wire::SpecificationDocument d = wire::DecodeSpecificationDocument(spec_).value();
  d.images[0].identities = {secret.image_id};
  spec_ = wire::EncodeSpecificationDocument(d);
  Write(spec_path_, spec_);
  AdoptAndBegin();
  EXPECT_EQ(Put(archive_, "generation: 1 name: \"overlap.tar\"").diagnostic,
            "DIAGNOSTIC_UNSPECIFIED")
      << ph_->Log();
  CallResult finish = Step({"--method=FinishPreparation", "--request=generation: 1"});
  EXPECT_EQ(finish.diagnostic, "CONFIGURATION_INVALID") << ph_->Log();
  EXPECT_NE(finish.state, "GENERATION_STATE_READY");
  EXPECT_FALSE(PathExists(ph_->File("state/node/generations/1.json")));
  EXPECT_GE(ph_->CountLog("msg=\"the specification's identities omit the image its archive "
                          "produces\""),
            1)
      << ph_->Log();
  (void)engine_.Request("DELETE", absl::StrCat("/images/", secret.image_id, "?force=1"), "", {});
}

TEST_F(OverlapAuditTest, AHeaderNamingNoBegunPlanOrAnArtifactItsPlanLacksGetsNoOverlappedLoad) {
  AdoptAndBegin();
  CallResult no_plan = Put(archive_, "generation: 5 name: \"overlap.tar\"");
  EXPECT_EQ(no_plan.diagnostic, "CONFIGURATION_INVALID") << ph_->Log();
  EXPECT_EQ(ph_->CountLog("no preparation of this generation began"), 1) << ph_->Log();
  CallResult other = Put(archive_, "generation: 1 name: \"busybox.tar\"");
  EXPECT_EQ(other.diagnostic, "CONFIGURATION_INVALID") << ph_->Log();
  EXPECT_EQ(ph_->CountLog("the plan names no such artifact"), 1) << ph_->Log();
  EXPECT_EQ(ph_->CountLog("loading the image archive while it streams"), 0) << ph_->Log();
  EXPECT_EQ(InspectStatus(image_.image_id), 404);
  EXPECT_FALSE(PathExists(Stored()));
  const std::string plan = Slurp(ph_->File("state/node/generations/1.preparing"));
  EXPECT_TRUE(absl::StrContains(plan, "\"import_started\":false")) << plan;
}

}  // namespace
}  // namespace sn::testing
