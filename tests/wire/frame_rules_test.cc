// The §2 rules applied to every frame type: each test takes one valid frame per type (from
// tests/testdata/wire/vectors) and breaks one rule.
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "common/wire/codec.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace sn::wire {
namespace {

using ojson = nlohmann::ordered_json;

struct Base {
  const char* file;
  Role role;
  std::set<std::string> optional;  // top-level members that may be omitted
};

std::ostream& operator<<(std::ostream& os, const Base& b) { return os << b.file; }

std::string Load(const Base& b) {
  std::ifstream in(std::string("tests/testdata/wire/vectors/") + b.file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

ojson Parse(const std::string& s) { return ojson::parse(s, nullptr, false); }

class FrameRulesTest : public ::testing::TestWithParam<Base> {
 protected:
  std::string base_ = Load(GetParam());
  Role role_ = GetParam().role;

  absl::Status Err(const std::string& s) {
    absl::StatusOr<Frame> f = Decode(s, role_);
    if (f.ok()) return absl::OkStatus();
    return f.status();
  }
};

TEST_P(FrameRulesTest, ValidFrameDecodesAndRoundTrips) {
  absl::StatusOr<Frame> f = Decode(base_, role_);
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<Frame> g = Decode(Encode(*f), role_);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(*f == *g);
}

TEST_P(FrameRulesTest, MembersInAnyOrderDecodeToTheSameFrame) {
  ojson j = Parse(base_);
  ojson rev = ojson::object();
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  for (auto k = keys.rbegin(); k != keys.rend(); ++k) rev[*k] = j[*k];
  absl::StatusOr<Frame> a = Decode(base_, role_);
  absl::StatusOr<Frame> b = Decode(rev.dump(), role_);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(*a == *b);
}

TEST_P(FrameRulesTest, UnknownMemberIsInvalid) {
  absl::Status s = Err("{\"bogus\":1," + base_.substr(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("unknown member 'bogus'"), std::string::npos) << s;
}

TEST_P(FrameRulesTest, CaseAliasOfEveryMemberIsInvalid) {
  ojson j = Parse(base_);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "type") continue;
    ojson k = ojson::object();
    for (auto jt = j.begin(); jt != j.end(); ++jt) {
      std::string name = jt.key();
      if (name == it.key()) name[0] = static_cast<char>(std::toupper(name[0]));
      k[name] = jt.value();
    }
    absl::Status s = Err(k.dump());
    // Without `version` the frame fails on the missing version before its members are read.
    const char* want = it.key() == "version" ? "missing member 'version'" : "unknown member";
    EXPECT_NE(std::string(s.message()).find(want), std::string::npos) << it.key() << s;
  }
}

TEST_P(FrameRulesTest, DuplicateMemberWithAnEqualValueIsInvalid) {
  absl::Status s = Err("{\"version\":1," + base_.substr(1));
  EXPECT_NE(std::string(s.message()).find("duplicate member 'version'"), std::string::npos) << s;
}

TEST_P(FrameRulesTest, EscapedMemberNameEqualsItsUnescapedForm) {
  // "\u0074ype" is "type": accepted as the type member, and a second "type" is a duplicate.
  std::string escaped = base_;
  escaped.replace(escaped.find("\"type\""), 6, "\"\\u0074ype\"");
  EXPECT_TRUE(Decode(escaped, role_).ok());
  absl::Status s = Err("{\"\\u0074ype\":\"x\"," + base_.substr(1));
  EXPECT_NE(std::string(s.message()).find("duplicate member 'type'"), std::string::npos) << s;
}

TEST_P(FrameRulesTest, NullForEveryMemberIsInvalid) {
  ojson j = Parse(base_);
  for (auto it = j.begin(); it != j.end(); ++it) {
    ojson k = j;
    k[it.key()] = nullptr;
    absl::Status s = Err(k.dump());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << it.key();
  }
}

TEST_P(FrameRulesTest, MissingRequiredMemberIsInvalidAndNamed) {
  ojson j = Parse(base_);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (GetParam().optional.count(it.key())) continue;
    ojson k = j;
    k.erase(it.key());
    absl::Status s = Err(k.dump());
    const std::string m(s.message());
    // A "present iff" pair names the pair instead.
    EXPECT_TRUE(m.find("missing member") != std::string::npos ||
                m.find("must be present exactly when") != std::string::npos)
        << it.key() << " " << s;
  }
}

TEST_P(FrameRulesTest, VersionOtherThanTheIntegerOneIsInvalid) {
  for (const char* v : {"2", "0", "-1", "1.0", "1e0", "\"1\"", "true", "null", "[1]"}) {
    ojson j = Parse(base_);
    std::string s = j.dump();
    s.replace(s.find("\"version\":1"), 11, std::string("\"version\":") + v);
    EXPECT_EQ(Err(s).code(), absl::StatusCode::kInvalidArgument) << v;
  }
}

TEST_P(FrameRulesTest, TrailingWhitespaceIsAcceptedAndTrailingDataIsNot) {
  EXPECT_TRUE(Decode(base_ + " \n\t\r", role_).ok());
  EXPECT_NE(std::string(Err(base_ + " x").message()).find("trailing data"), std::string::npos);
  EXPECT_NE(std::string(Err(base_ + "{}").message()).find("trailing data"), std::string::npos);
}

TEST_P(FrameRulesTest, NestingDeeperThanEightIsInvalid) {
  absl::Status s = Err("{\"x\":[[[[[[[[1]]]]]]]]," + base_.substr(1));
  EXPECT_NE(std::string(s.message()).find("nesting deeper than 8"), std::string::npos) << s;
}

TEST_P(FrameRulesTest, InvalidUtf8AnywhereIsInvalid) {
  std::string s = base_;
  const size_t at = s.find("\"type\"");
  s.insert(at, "\"x\xff\":1,");
  EXPECT_NE(std::string(Err(s).message()).find("invalid UTF-8"), std::string::npos);
}

TEST_P(FrameRulesTest, TheOtherPeerRejectsTheFrameType) {
  const Role other = role_ == Role::kNode ? Role::kCore : Role::kNode;
  absl::StatusOr<Frame> f = Decode(base_, other);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(std::string(f.status().message()).find("does not accept"), std::string::npos);
}

TEST_P(FrameRulesTest, OverTheReceiversSizeLimitIsTooLarge) {
  absl::StatusOr<Frame> f = Decode(base_, role_, base_.size() - 1);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CloseCodeForDecodeError(f.status()), kCloseTooLarge);
}

TEST_P(FrameRulesTest, ControlFramesOver32KiBAreTooLargeWhateverTheState) {
  absl::StatusOr<Frame> f = Decode(base_, role_);
  ASSERT_TRUE(f.ok());
  std::string padded = base_;
  padded.insert(padded.size() - 1, kMaxControlFrameBytes, ' ');
  absl::StatusOr<Frame> g = Decode(padded, role_, kMaxFrameBytes);
  if (IsControlFrame(TypeOf(*f))) {
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kResourceExhausted);
  } else {
    EXPECT_TRUE(g.ok()) << g.status();
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllFrameTypes, FrameRulesTest,
    ::testing::Values(
        Base{"valid_core_hello.json", Role::kCore, {}},
        Base{"valid_core_hello_gm.json", Role::kCore, {}},
        Base{"valid_node_welcome_deployment.json", Role::kNode, {"deployment"}},
        Base{"valid_core_heartbeat.json", Role::kCore, {}},
        Base{"valid_core_heartbeat_gm.json", Role::kCore, {}},
        Base{"valid_node_heartbeat_ack.json", Role::kNode, {"deployment"}},
        Base{"valid_core_retention.json", Role::kCore, {}},
        Base{"valid_node_retention_ack.json", Role::kNode, {}},
        Base{"valid_node_request_create.json", Role::kNode, {}},
        Base{"valid_node_request_write_file.json", Role::kNode, {}},
        Base{"valid_core_response_create.json", Role::kCore, {"result"}},
        Base{"valid_core_response_failed_settled.json", Role::kCore, {"error_code", "info"}}));

}  // namespace
}  // namespace sn::wire
