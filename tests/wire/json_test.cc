// The strict JSON reader, writer and base64 of common/json.
#include <string>

#include "common/json/base64.h"
#include "common/json/reader.h"
#include "common/json/writer.h"
#include "gtest/gtest.h"

namespace sn::json {
namespace {

TEST(ParseInt64Test, AcceptsExactIntegersAtBothEndsOfTheRange) {
  EXPECT_EQ(ParseInt64("0"), 0);
  EXPECT_EQ(ParseInt64("-1"), -1);
  EXPECT_EQ(ParseInt64("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(ParseInt64("-9223372036854775808"), INT64_MIN);
}

TEST(ParseInt64Test, RejectsFractionsExponentsMinusZeroLeadingZerosAndOverflow) {
  for (const char* t : {"1.0", "1e3", "1E3", "-0", "01", "-01", "9223372036854775808",
                        "-9223372036854775809", "", "-", "+1", "99999999999999999999"}) {
    EXPECT_FALSE(ParseInt64(t).has_value()) << t;
  }
}

TEST(ReaderTest, EscapeFreeStringsAreReturnedWithoutACopy) {
  const std::string text = "\"abcdefghijklmnopqrstuvwxyz\"";
  Reader r(text);
  absl::StatusOr<std::string_view> s = r.String();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->data(), text.data() + 1);
}

TEST(ReaderTest, EscapesDecodeIncludingSurrogatePairs) {
  Reader r(R"("a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00z")");
  absl::StatusOr<std::string_view> s = r.String();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, "a\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80z");
}

TEST(ReaderTest, RejectsNulEscapeUnpairedSurrogatesAndBadEscapes) {
  for (const char* t : {R"("\u0000")", R"("\ud800")", R"("\ud800\u0041")", R"("\udfff")",
                        R"("\x")", R"("\u12")", "\"a", "\"\x01\""}) {
    Reader r(t);
    EXPECT_FALSE(r.String().ok()) << t;
  }
}

TEST(ReaderTest, ValidatesUtf8WithoutOverlongsSurrogatesOrValuesAboveTheMaximum) {
  EXPECT_TRUE(IsValidUtf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
  for (const char* t : {"\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff",
                        "\xc3", "\xe2\x82"}) {
    EXPECT_FALSE(IsValidUtf8(t)) << t;
    const std::string quoted = std::string("\"") + t + "\"";
    Reader r(quoted);
    EXPECT_FALSE(r.String().ok());
  }
}

TEST(ReaderTest, NumbersFollowTheJsonGrammar) {
  for (const char* ok : {"0", "-0", "1.5", "1e3", "-1.25E-7", "10"}) {
    Reader r(ok);
    EXPECT_TRUE(r.Number().ok()) << ok;
    EXPECT_TRUE(r.Finish().ok()) << ok;
  }
  for (const char* bad : {"01", "-", "1.", ".5", "1e", "+1"}) {
    Reader r(bad);
    absl::StatusOr<std::string_view> n = r.Number();
    EXPECT_TRUE(!n.ok() || !r.Finish().ok()) << bad;
  }
}

TEST(ReaderTest, SkipDetectsDuplicateMembersAtAnyDepth) {
  Reader ok(R"({"a":{"b":1,"c":[{"d":1,"e":2}]},"b":2})");
  EXPECT_TRUE(ok.Skip().ok());
  Reader dup(R"({"a":{"c":[{"d":1,"d":1}]}})");
  EXPECT_FALSE(dup.Skip().ok());
  Reader escaped(R"({"ab":1,"a\u0062":1})");
  EXPECT_FALSE(escaped.Skip().ok());
  std::string big = "{";
  for (int i = 0; i < 100; ++i) big += "\"k" + std::to_string(i) + "\":1,";
  big += "\"k50\":1}";
  Reader many(big);
  EXPECT_FALSE(many.Skip().ok());
}

TEST(ReaderTest, DepthCountsTheTopLevelAsOne) {
  Reader eight("[[[[[[[[]]]]]]]]");
  EXPECT_TRUE(eight.Skip().ok());
  Reader nine("[[[[[[[[[]]]]]]]]]");
  EXPECT_FALSE(nine.Skip().ok());
}

TEST(WriterTest, EscapesControlCharactersQuotesAndBackslashes) {
  Writer w;
  w.BeginObject();
  w.Key("k\"");
  w.String(std::string("a\x01\n\\", 4));
  w.Key("n");
  w.Int(INT64_MIN);
  w.Key("b");
  w.Base64String("hi");
  w.EndObject();
  EXPECT_EQ(w.str(), R"({"k\"":"a\u0001\n\\","n":-9223372036854775808,"b":"aGk="})");
}

TEST(Base64Test, RoundTripsEveryLengthModuloThree) {
  std::string raw;
  for (int n = 0; n < 50; ++n) {
    const std::string enc = Base64Encode(raw);
    std::string dec;
    ASSERT_TRUE(Base64Decode(enc, 1000, &dec).ok()) << enc;
    EXPECT_EQ(dec, raw);
    raw.push_back(static_cast<char>(n * 37));
  }
}

TEST(Base64Test, RejectsNonCanonicalSpellings) {
  std::string out;
  for (const char* t : {"aGk", "aGk==", "aGl=", "aG==", "a===", "====", "aG k=", "aGk=\n",
                        "aGk=aGk=", "-_8=", "aGk\x80"}) {
    EXPECT_FALSE(Base64Decode(t, 100, &out).ok()) << t;
  }
}

TEST(Base64Test, ChecksTheDecodedLimitBeforeDecoding) {
  std::string out;
  absl::Status s = Base64Decode("aGVsbG8=", 4, &out);
  EXPECT_NE(std::string(s.message()).find("longer than 4 bytes"), std::string::npos);
  EXPECT_TRUE(Base64Decode("aGVsbG8=", 5, &out).ok());
}

}  // namespace
}  // namespace sn::json
