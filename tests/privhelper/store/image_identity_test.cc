// An image a generation runs is the one its signed archive produces (spec §6 `images`, rev 5):
// the identity is derived from the verified archive's bytes and must be among the
// specification's identities; an image the backend already holds for another reason is never
// adopted; a generation published before the derivation existed is checked once at start and
// refused when its recorded image is not its archive's.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "privhelper/store/generations.h"
#include "tests/privhelper/store/store_fixture.h"

namespace sn::privhelper::store {
namespace {

const std::string kOtherImage = "sha256:" + std::string(64, 'b');

class ImageIdentityTest : public StoreTest {};

TEST_F(ImageIdentityTest, ASpecificationNamingAnImageTheDaemonHoldsButTheArchiveDoesNotMakeIsRefused) {
  // The attack: the daemon holds another image (another installation's, with its secrets); the
  // specification names it as the identity of the signed archive's image.
  importer_.held.insert(kOtherImage);
  identities_ = {kOtherImage};
  absl::Status s = Prepare(1, {image_, helper_});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(DiagnosticOf(s), Diagnostic::kConfigurationInvalid) << s;
  EXPECT_EQ(generations_->Find(1), nullptr);
  struct stat st {};
  EXPECT_NE(stat(Gen("1.json").c_str(), &st), 0) << "a final configuration was published";
  EXPECT_EQ(importer_.loads, 0) << "nothing is loaded for a specification that is refused";
}

TEST_F(ImageIdentityTest, TheArchivesOwnImageIsChosenWhateverTheSpecificationsOrder) {
  importer_.held.insert(kOtherImage);
  identities_ = {kOtherImage, kImageId};
  ASSERT_TRUE(Prepare(1, {image_, helper_}).ok());
  std::shared_ptr<const HeldGeneration> held = generations_->Find(1);
  ASSERT_NE(held, nullptr);
  ASSERT_NE(held->NativeImage("busybox"), nullptr);
  EXPECT_EQ(*held->NativeImage("busybox"), kImageId);
  EXPECT_EQ(importer_.loads, 1);
}

TEST_F(ImageIdentityTest, AnArchiveThatDoesNotTellItsImageIsRefused) {
  image_.bytes = "not an image archive at all";
  absl::Status s = Prepare(1, {image_, helper_});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(DiagnosticOf(s), Diagnostic::kConfigurationInvalid) << s;
  EXPECT_EQ(generations_->Find(1), nullptr);
}

TEST_F(ImageIdentityTest, APreparationRecordsThatItsImagesWereDerived) {
  ASSERT_TRUE(Prepare(1, {image_, helper_}).ok());
  EXPECT_NE(Slurp(Gen("1.images")).find("final_sha256"), std::string::npos);
  Reopen();
  const int before = importer_.derivations;
  generations_->Recheck(&importer_, /*verify_bytes=*/true);
  EXPECT_EQ(importer_.derivations, before) << "a recorded derivation is not made again";
  EXPECT_EQ(StatusOf(1).state, GenerationState::kReady);
}

TEST_F(ImageIdentityTest, AGenerationPublishedBeforeTheDerivationIsCheckedOnceAtStart) {
  ASSERT_TRUE(Prepare(1, {image_, helper_}).ok());
  ASSERT_EQ(unlink(Gen("1.images").c_str()), 0);  // as main before this rule published it
  Reopen();
  const int before = importer_.derivations;
  generations_->Recheck(&importer_, /*verify_bytes=*/true);
  EXPECT_EQ(importer_.derivations, before + 1);
  EXPECT_EQ(StatusOf(1).state, GenerationState::kReady);
  EXPECT_NE(Slurp(Gen("1.images")).find("final_sha256"), std::string::npos);
  Reopen();
  generations_->Recheck(&importer_, /*verify_bytes=*/true);
  EXPECT_EQ(importer_.derivations, before + 1) << "checked again after it was recorded";
  EXPECT_EQ(StatusOf(1).state, GenerationState::kReady);
}

TEST_F(ImageIdentityTest, AnOldGenerationThatRecordedAnotherImageIsRefusedAtStartAndKept) {
  importer_.held.insert(kOtherImage);
  ASSERT_TRUE(Prepare(1, {image_, helper_}).ok());
  // What the old resolver could publish: the final configuration names another image.
  ASSERT_EQ(unlink(Gen("1.images").c_str()), 0);
  std::string final_record = Slurp(Gen("1.json"));
  size_t at = final_record.find(kImageId);
  ASSERT_NE(at, std::string::npos);
  final_record.replace(at, kImageId.size(), kOtherImage);
  {
    std::ofstream out(Gen("1.json"), std::ios::trunc);
    out << final_record;
  }
  Reopen();
  generations_->Recheck(&importer_, /*verify_bytes=*/true);
  GenerationStatus st = StatusOf(1);
  EXPECT_EQ(st.state, GenerationState::kFailed);
  ASSERT_TRUE(st.diagnostic.has_value());
  EXPECT_EQ(*st.diagnostic, Diagnostic::kConfigurationInvalid);
  EXPECT_EQ(Slurp(Gen("1.json")), final_record) << "the refused record is kept as found";
  struct stat sb {};
  EXPECT_NE(stat(Gen("1.images").c_str(), &sb), 0) << "a mismatch is never recorded as derived";
  EXPECT_FALSE(generations_->Ready(1));
}

}  // namespace
}  // namespace sn::privhelper::store
