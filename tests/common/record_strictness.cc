#include "tests/common/record_strictness.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace sn::testing {
namespace {

void ExpectRefused(const StrictRecordCase& c, const std::string& text, absl::StatusCode refused,
                   const std::string& wanted) {
  absl::Status s = c.read(text);
  EXPECT_EQ(s.code(), refused) << c.golden << ": " << s << "\n" << text;
  EXPECT_NE(std::string(s.message()).find(wanted), std::string::npos)
      << c.golden << ": " << s << "\n" << text;
}

std::string MemberName(const std::string& member_text) {
  return member_text.substr(1, member_text.find('"', 1) - 1);
}

}  // namespace

std::string GoldenRecord(const std::string& name) {
  std::ifstream f("tests/testdata/records/" + name, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

void ExpectDuplicateMembersRefused(const std::vector<StrictRecordCase>& cases,
                                   absl::StatusCode refused) {
  for (const StrictRecordCase& c : cases) {
    const std::string golden = GoldenRecord(c.golden);
    ASSERT_TRUE(c.read(golden).ok()) << c.golden;
    const std::string name = MemberName(c.top_member);
    ExpectRefused(c, "{" + c.top_member + golden.substr(1), refused,
                  "duplicate member '" + name + "'");
    if (c.nested.empty()) continue;
    std::string twice = golden;
    const size_t at = twice.find(c.nested);
    ASSERT_NE(at, std::string::npos) << c.golden;
    const std::string nested_name = MemberName(c.nested);
    twice.insert(at, "\"" + nested_name + "\":\"x\",");
    ExpectRefused(c, twice, refused, "duplicate member '" + nested_name + "'");
  }
}

void ExpectUnknownMembersRefused(const std::vector<StrictRecordCase>& cases,
                                 absl::StatusCode refused) {
  for (const StrictRecordCase& c : cases) {
    const std::string golden = GoldenRecord(c.golden);
    ExpectRefused(c, R"({"comment":"x",)" + golden.substr(1), refused,
                  "member 'comment' is unknown");
    if (c.nested.empty()) continue;
    std::string extra = golden;
    const size_t at = extra.find(c.nested);
    ASSERT_NE(at, std::string::npos) << c.golden;
    extra.insert(at, R"("comment":"x",)");
    ExpectRefused(c, extra, refused, "member 'comment' is unknown");
  }
}

void ExpectCutShortRefused(const std::vector<StrictRecordCase>& cases, absl::StatusCode refused,
                           bool schema_required) {
  for (const StrictRecordCase& c : cases) {
    const std::string golden = GoldenRecord(c.golden);
    for (size_t cut : {size_t{0}, size_t{1}, golden.size() / 2, golden.size() - 2}) {
      ExpectRefused(c, golden.substr(0, cut), refused, "torn or foreign record");
    }
    std::string other_schema = golden;
    const size_t schema = other_schema.find(R"("schema":)");
    if (schema == std::string::npos) {
      EXPECT_FALSE(schema_required) << c.golden << " has no schema member";
      continue;
    }
    other_schema[schema + 9] = '7';  // another format version
    ExpectRefused(c, other_schema, refused, "torn or foreign record");
  }
}

}  // namespace sn::testing
