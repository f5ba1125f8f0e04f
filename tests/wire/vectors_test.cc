// Runs every vector of tests/testdata/wire/MANIFEST through the decoder (via wirecheck's
// Check, so the tool's verdicts are tested too) and checks verdict and reason.
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/wire/codec.h"
#include "gtest/gtest.h"
#include "tools/wirecheck/check.h"

namespace sn::wire {
namespace {

constexpr char kDir[] = "tests/testdata/wire/";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Vector {
  std::string file, role, verdict, detail;
};

std::vector<Vector> LoadManifest() {
  std::vector<Vector> out;
  std::istringstream in(ReadFile(std::string(kDir) + "MANIFEST"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (f.size() != 4) continue;
    out.push_back({f[0], f[1], f[2], f[3]});
  }
  return out;
}

TEST(WireVectorsTest, ManifestListsValidAndInvalidVectorsOfEveryKind) {
  std::vector<Vector> v = LoadManifest();
  ASSERT_GT(v.size(), 100u);
  int ok = 0, invalid = 0, request = 0, large = 0;
  for (const Vector& x : v) {
    ok += x.verdict == "ok";
    invalid += x.verdict == "invalid";
    request += x.verdict == "invalid-request";
    large += x.verdict == "too-large";
  }
  EXPECT_GE(ok, 20);
  EXPECT_GE(invalid, 50);
  EXPECT_GE(request, 20);
  EXPECT_GE(large, 1);
}

TEST(WireVectorsTest, EveryVectorGetsItsExpectedVerdictAndReason) {
  for (const Vector& x : LoadManifest()) {
    SCOPED_TRACE(x.file);
    const std::string bytes = ReadFile(std::string(kDir) + "vectors/" + x.file);
    ASSERT_FALSE(bytes.empty());
    const Role role = x.role == "node" ? Role::kNode : Role::kCore;
    const wirecheck::Verdict v = wirecheck::Check(bytes, role);
    absl::StatusOr<Frame> f = Decode(bytes, role);
    if (x.verdict == "ok") {
      EXPECT_EQ(v.text, "ok " + x.detail);
      ASSERT_TRUE(f.ok()) << f.status();
      // Round trip: the encoding decodes to an equal frame.
      absl::StatusOr<Frame> again = Decode(Encode(*f), role);
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_TRUE(*again == *f);
    } else if (x.verdict == "invalid-request") {
      EXPECT_EQ(v.kind, wirecheck::Verdict::kInvalidRequest) << v.text;
      EXPECT_NE(v.text.find(x.detail), std::string::npos) << v.text;
    } else {
      EXPECT_EQ(v.kind, wirecheck::Verdict::kInvalid) << v.text;
      EXPECT_NE(v.text.find(x.detail), std::string::npos) << v.text;
      ASSERT_FALSE(f.ok());
      EXPECT_EQ(CloseCodeForDecodeError(f.status()),
                x.verdict == "too-large" ? kCloseTooLarge : kCloseInvalidFrame);
    }
  }
}

}  // namespace
}  // namespace sn::wire
