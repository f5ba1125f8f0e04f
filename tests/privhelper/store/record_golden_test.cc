// privhelper's durable records as main 9855679 wrote them (tests/testdata/records) still read
// to the values they were written from, and today's writers still produce those bytes.
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "privhelper/store/collection_records.h"
#include "privhelper/store/final_config.h"
#include "privhelper/store/installation.h"
#include "privhelper/store/lease.h"
#include "privhelper/store/plan.h"
#include "tests/common/record_strictness.h"
#include "tests/fakes/fault_fs.h"

namespace sn::privhelper::store {

using fs::FaultFs;
namespace {

constexpr char kInst[] = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
constexpr char kSource[] = "host-1.2.3";
const std::string kD1(64, '1');
const std::string kD2(64, 'a');

std::string Golden(const std::string& name) { return ::sn::testing::GoldenRecord(name); }

std::vector<PlannedArtifact> Artifacts() {
  return {PlannedArtifact{"image.tar", "image", std::string(64, 'b'), 1048576,
                          ArtifactPath(kSource, "image.tar")},
          PlannedArtifact{"helper", "helper", std::string(64, 'c'), 4096,
                          ArtifactPath(kSource, "helper")}};
}

TEST(RecordGoldenTest, InstallationIdentityReadsAndIsWrittenAlike) {
  FaultFs fs;
  ASSERT_TRUE(fs.WriteFile(kInstallationFile, Golden("installation.json")).ok());
  absl::StatusOr<Dir> root = fs.Root();
  ASSERT_TRUE(root.ok());
  absl::StatusOr<std::string> id = LoadOrCreateInstallationId(fs, *root, 0);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, kInst);

  FaultFs fresh;
  absl::StatusOr<Dir> fresh_root = fresh.Root();
  ASSERT_TRUE(fresh_root.ok());
  absl::StatusOr<std::string> made = LoadOrCreateInstallationId(fresh, *fresh_root, 0);
  ASSERT_TRUE(made.ok()) << made.status();
  std::string want = Golden("installation.json");
  want.replace(want.find(kInst), std::string(kInst).size(), *made);
  EXPECT_EQ(*fresh.Contents(kInstallationFile), want);
}

TEST(RecordGoldenTest, PlanReadsAndIsWrittenAlike) {
  const Plan plan{kInst, 3, kD1, kSource, Artifacts(), /*import_started=*/true};
  absl::StatusOr<Plan> p = DecodePlan(Golden("3.preparing"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, plan);
  EXPECT_EQ(EncodePlan(plan), Golden("3.preparing"));
}

TEST(RecordGoldenTest, CollectionJournalAndDroppedMarkerReadAndAreWrittenAlike) {
  const CollectionJournal journal{kInst, 3, kD1, kSource, true, Artifacts(), false};
  absl::StatusOr<CollectionJournal> j = DecodeCollectionJournal(Golden("3.collecting"));
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(*j, journal);
  EXPECT_EQ(EncodeCollectionJournal(journal), Golden("3.collecting"));

  const DroppedMarker marker{kInst, 3, kD1};
  absl::StatusOr<DroppedMarker> m = DecodeDroppedMarker(Golden("3.dropped"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*m, marker);
  EXPECT_EQ(EncodeDroppedMarker(marker), Golden("3.dropped"));
}

TEST(RecordGoldenTest, FinalConfigurationsAndTheImagesRecordReadAndAreWrittenAlike) {
  HeldGeneration held;
  held.generation = 3;
  held.specification_digest = kD1;
  held.source = kSource;
  held.images = {HeldImage{"sandbox", "image.tar", "sha256:" + std::string(64, 'd')}};
  held.artifacts = Artifacts();
  held.helper_artifact = "helper";
  absl::StatusOr<HeldGeneration> h = DecodeFinal(Golden("3.json"), kInst, "docker");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->generation, 3);
  EXPECT_EQ(h->specification_digest, kD1);
  EXPECT_EQ(h->source, kSource);
  ASSERT_EQ(h->images.size(), 1u);
  EXPECT_EQ(h->images[0].name, "sandbox");
  EXPECT_EQ(h->images[0].artifact, "image.tar");
  EXPECT_EQ(h->images[0].native_image, held.images[0].native_image);
  EXPECT_EQ(h->artifacts, Artifacts());
  EXPECT_EQ(h->helper_artifact, "helper");
  EXPECT_EQ(EncodeFinal(held, kInst, "docker"), Golden("3.json"));

  HeldGeneration bare;
  bare.generation = 4;
  bare.specification_digest = kD2;
  bare.source = kSource;
  absl::StatusOr<HeldGeneration> b = DecodeFinal(Golden("4.json"), kInst, "docker");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->generation, 4);
  EXPECT_TRUE(b->images.empty());
  EXPECT_TRUE(b->artifacts.empty());
  EXPECT_EQ(b->helper_artifact, "");
  EXPECT_EQ(EncodeFinal(bare, kInst, "docker"), Golden("4.json"));

  EXPECT_TRUE(ImagesDerivedRecords(Golden("3.images"), 3, kInst, Golden("3.json")));
  EXPECT_EQ(EncodeImagesDerived(3, kInst, Golden("3.json")), Golden("3.images"));
}

TEST(RecordGoldenTest, LeaseIdentityReadsAndIsWrittenAlike) {
  const LeaseIdentity id{kInst, 3, kD1, 64769, 18446744073709551000ull, 1764000000123456789};
  absl::StatusOr<LeaseIdentity> got = DecodeLeaseIdentity(Golden("3.lease-identity"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, id);
  EXPECT_EQ(EncodeLeaseIdentity(id), Golden("3.lease-identity"));
}

// The strict record reader's rules over privhelper's records (tests/common/record_strictness.h):
// refused with FailedPrecondition naming the member.
std::vector<::sn::testing::StrictRecordCase> StrictCases() {
  auto installation = [](const std::string& text) {
    FaultFs fs;
    EXPECT_TRUE(fs.WriteFile(kInstallationFile, text).ok());
    absl::StatusOr<Dir> root = fs.Root();
    if (!root.ok()) return root.status();
    return LoadOrCreateInstallationId(fs, *root, 0).status();
  };
  return {
      {"installation.json", R"("schema":1,)", "", installation},
      {"3.preparing", R"("generation":3,)", R"("kind":"image")",
       [](const std::string& t) { return DecodePlan(t).status(); }},
      {"3.collecting", R"("native_done":false,)", R"("kind":"image")",
       [](const std::string& t) { return DecodeCollectionJournal(t).status(); }},
      {"3.dropped", R"("specification_digest":"x",)", "",
       [](const std::string& t) { return DecodeDroppedMarker(t).status(); }},
      {"3.json", R"("helper":null,)", R"("native_image":)",
       [](const std::string& t) { return DecodeFinal(t, kInst, "docker").status(); }},
      {"3.lease-identity", R"("inode":1,)", "",
       [](const std::string& t) { return DecodeLeaseIdentity(t).status(); }},
  };
}

TEST(RecordStrictnessTest, EveryRecordRefusesADuplicateMemberByName) {
  ::sn::testing::ExpectDuplicateMembersRefused(StrictCases(), absl::StatusCode::kFailedPrecondition);
}

TEST(RecordStrictnessTest, EveryRecordRefusesAnUnknownMemberByName) {
  ::sn::testing::ExpectUnknownMembersRefused(StrictCases(), absl::StatusCode::kFailedPrecondition);
}

// A record cut short is torn, not malformed: the message says which.
TEST(RecordStrictnessTest, EveryRecordCutShortIsTornOrForeign) {
  ::sn::testing::ExpectCutShortRefused(StrictCases(), absl::StatusCode::kFailedPrecondition,
                                 /*schema_required=*/true);
}

}  // namespace
}  // namespace sn::privhelper::store
