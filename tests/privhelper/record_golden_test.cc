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
#include "tests/fakes/fault_fs.h"

namespace sn::privhelper::store {

using fs::FaultFs;
namespace {

constexpr char kInst[] = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
constexpr char kSource[] = "host-1.2.3";
const std::string kD1(64, '1');
const std::string kD2(64, 'a');

std::string Golden(const std::string& name) {
  std::ifstream f("tests/testdata/records/" + name, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

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

// The strict record reader's rules, record by record: a member named twice (at the top or in
// a nested object) and a member the record does not define are refused with FailedPrecondition
// naming the member, where nlohmann took the last value or ignored nothing it could count.
struct Strict {
  const char* golden;
  const char* top_member;  // a scalar member, repeated at the front: '"<name>":<value>,'
  const char* nested;      // a nested member's text, "" when the record nests nothing
  std::function<absl::Status(const std::string&)> read;
};

std::vector<Strict> StrictCases() {
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

void ExpectRefused(const Strict& c, const std::string& text, const std::string& wanted) {
  absl::Status s = c.read(text);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << c.golden << ": " << s << "\n" << text;
  EXPECT_NE(std::string(s.message()).find(wanted), std::string::npos)
      << c.golden << ": " << s << "\n" << text;
}

TEST(RecordStrictnessTest, EveryRecordRefusesADuplicateMemberByName) {
  for (const Strict& c : StrictCases()) {
    const std::string golden = Golden(c.golden);
    ASSERT_TRUE(c.read(golden).ok()) << c.golden;
    const std::string top(c.top_member);
    const std::string name = top.substr(1, top.find('"', 1) - 1);
    ExpectRefused(c, "{" + top + golden.substr(1), "duplicate member '" + name + "'");
    const std::string nested(c.nested);
    if (nested.empty()) continue;
    std::string twice = golden;
    const size_t at = twice.find(nested);
    ASSERT_NE(at, std::string::npos) << c.golden;
    const std::string nested_name = nested.substr(1, nested.find('"', 1) - 1);
    twice.insert(at, "\"" + nested_name + "\":\"x\",");
    ExpectRefused(c, twice, "duplicate member '" + nested_name + "'");
  }
}

TEST(RecordStrictnessTest, EveryRecordRefusesAnUnknownMemberByName) {
  for (const Strict& c : StrictCases()) {
    const std::string golden = Golden(c.golden);
    ExpectRefused(c, R"({"comment":"x",)" + golden.substr(1), "member 'comment' is unknown");
    const std::string nested(c.nested);
    if (nested.empty()) continue;
    std::string extra = golden;
    extra.insert(extra.find(nested), R"("comment":"x",)");
    ExpectRefused(c, extra, "member 'comment' is unknown");
  }
}

// A record cut short is torn, not malformed: the message says which.
TEST(RecordStrictnessTest, EveryRecordCutShortIsTornOrForeign) {
  for (const Strict& c : StrictCases()) {
    const std::string golden = Golden(c.golden);
    for (size_t cut : {size_t{0}, size_t{1}, golden.size() / 2, golden.size() - 2}) {
      ExpectRefused(c, golden.substr(0, cut), "torn or foreign record");
    }
    std::string other_schema = golden;
    const size_t schema = other_schema.find(R"("schema":)");
    ASSERT_NE(schema, std::string::npos) << c.golden;
    other_schema[schema + 9] = '7';  // another format version
    ExpectRefused(c, other_schema, "torn or foreign record");
  }
}

}  // namespace
}  // namespace sn::privhelper::store
