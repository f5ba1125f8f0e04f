// The strict reader of durable records and trusted configuration (common/json/record.h):
// torn or foreign (DataLoss) apart from malformed (InvalidArgument), duplicate and unknown
// members refused by name, typed members, bounded size.
#include "common/json/record.h"

#include <string>

#include "gtest/gtest.h"

namespace sn::json {
namespace {

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(RecordTest, AWholeRecordReadsMemberByMember) {
  absl::StatusOr<RecordObject> r = RecordObject::Parse(
      R"({"schema":1,"name":"a\u00e9","n":-7,"u":18446744073709551615,"b":true,"z":null,)"
      R"("o":{"k":"v"},"list":[{"i":1},{"i":2}]})" "\n",
      "test record");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->Schema(1).ok());
  EXPECT_EQ(*r->String("name"), "a\xc3\xa9");
  EXPECT_EQ(*r->Int("n"), -7);
  EXPECT_EQ(*r->Uint("u"), UINT64_MAX);
  EXPECT_TRUE(*r->Bool("b"));
  EXPECT_EQ(*r->NullableString("z"), std::nullopt);
  absl::StatusOr<RecordObject> o = r->Object("o");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(*o->String("k"), "v");
  EXPECT_TRUE(o->Finish().ok());
  absl::StatusOr<std::vector<RecordObject>> list = r->Objects("list");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ(*(*list)[1].Int("i"), 2);
  EXPECT_EQ(r->OptionalInt("absent")->has_value(), false);
  EXPECT_TRUE(r->Finish().ok());
}

TEST(RecordTest, AnArrayOfStringsIsTakenWholeAndAnyOtherElementIsMalformed) {
  absl::StatusOr<RecordObject> r =
      RecordObject::Parse(R"({"argv":["sh","-c",""],"mixed":["a",1],"empty":[]})", "test record");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r->Strings("argv"), (std::vector<std::string>{"sh", "-c", ""}));
  EXPECT_TRUE(r->Strings("empty")->empty());
  absl::StatusOr<std::vector<std::string>> mixed = r->Strings("mixed");
  EXPECT_TRUE(IsMalformedRecord(mixed.status())) << mixed.status();
  EXPECT_NE(mixed.status().message().find("[1] must be a string"), absl::string_view::npos);
  EXPECT_TRUE(IsMalformedRecord(r->Strings("argv").status()));  // taken already
}

TEST(RecordTest, BytesThatAreNotOneWholeObjectAreTornOrForeign) {
  for (const char* torn : {"", "\n", "{", R"({"schema":1)", R"({"schema":1,})", "[]", "1",
                           R"("text")", R"({"schema":1}{})", R"({"schema":1} x)", "\xff",
                           R"({"a":"\ud800"})", R"({"schema":1,"a":[[[[[[[[[1]]]]]]]]]})"}) {
    absl::StatusOr<RecordObject> r = RecordObject::Parse(torn, "test record");
    ASSERT_FALSE(r.ok()) << torn;
    EXPECT_TRUE(IsTornRecord(r.status())) << torn << ": " << r.status();
    EXPECT_FALSE(IsMalformedRecord(r.status()));
    EXPECT_EQ(Message(r.status()).rfind("test record: torn or foreign record: ", 0), 0u)
        << r.status();
  }
}

TEST(RecordTest, ALargerRecordThanItsBoundIsTorn) {
  const std::string text = R"({"s":")" + std::string(100, 'x') + R"("})";
  EXPECT_TRUE(RecordObject::Parse(text, "r", text.size()).ok());
  absl::StatusOr<RecordObject> r = RecordObject::Parse(text, "r", text.size() - 1);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsTornRecord(r.status())) << r.status();
}

TEST(RecordTest, AnotherOrNoSchemaIsForeign) {
  for (const char* foreign : {R"({"schema":2})", R"({"schema":"1"})", R"({"schema":1.0})",
                              R"({"other":1})"}) {
    absl::StatusOr<RecordObject> r = RecordObject::Parse(foreign, "r");
    ASSERT_TRUE(r.ok()) << foreign;
    absl::Status s = r->Schema(1);
    EXPECT_TRUE(IsTornRecord(s)) << foreign << ": " << s;
  }
}

TEST(RecordTest, AMemberNamedTwiceAnywhereIsMalformedAndNamed) {
  for (const char* twice :
       {R"({"a":1,"a":1})", R"({"a":1,"b":2,"a":"x"})", R"({"o":{"k":1,"k":2}})",
        R"({"l":[{"i":1},{"i":1,"i":1}]})", R"({"\u0061":1,"a":1})"}) {
    absl::StatusOr<RecordObject> r = RecordObject::Parse(twice, "r");
    ASSERT_FALSE(r.ok()) << twice;
    EXPECT_TRUE(IsMalformedRecord(r.status())) << twice << ": " << r.status();
    EXPECT_NE(Message(r.status()).find("malformed record: duplicate member '"),
              std::string::npos)
        << r.status();
  }
  // Cut short as well: torn wins (the bytes are not a record at all).
  EXPECT_TRUE(IsTornRecord(RecordObject::Parse(R"({"a":1,"a":1)", "r").status()));
}

TEST(RecordTest, AMemberTheRecordDoesNotTakeIsUnknownAndNamed) {
  absl::StatusOr<RecordObject> r = RecordObject::Parse(R"({"known":1,"extra":2})", "r");
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->Int("known").ok());
  absl::Status s = r->Finish();
  EXPECT_TRUE(IsMalformedRecord(s)) << s;
  EXPECT_EQ(Message(s), "r: malformed record: member 'extra' is unknown");

  absl::StatusOr<RecordObject> nested =
      RecordObject::Parse(R"({"list":[{"i":1},{"i":2,"j":3}]})", "r");
  ASSERT_TRUE(nested.ok());
  absl::StatusOr<std::vector<RecordObject>> list = nested->Objects("list");
  ASSERT_TRUE(list.ok());
  ASSERT_TRUE((*list)[1].Int("i").ok());
  EXPECT_EQ(Message((*list)[1].Finish()),
            "r: malformed record: in 'list'[1]: member 'j' is unknown");
}

TEST(RecordTest, MissingAndMistypedMembersAreMalformedAndNamed) {
  absl::StatusOr<RecordObject> r = RecordObject::Parse(
      R"({"s":1,"i":"1","f":1.5,"neg":-1,"z":-0,"big":9223372036854775808,"b":"true","o":[]})",
      "r");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Message(r->String("missing").status()),
            "r: malformed record: member 'missing' is missing");
  EXPECT_EQ(Message(r->String("s").status()), "r: malformed record: member 's' must be a string");
  EXPECT_TRUE(IsMalformedRecord(r->Int("i").status()));
  EXPECT_TRUE(IsMalformedRecord(r->Int("f").status()));
  EXPECT_TRUE(IsMalformedRecord(r->Uint("neg").status()));
  EXPECT_TRUE(IsMalformedRecord(r->Int("z").status()));
  EXPECT_TRUE(IsMalformedRecord(r->Int("big").status()));
  EXPECT_TRUE(IsMalformedRecord(r->Bool("b").status()));
  EXPECT_TRUE(IsMalformedRecord(r->Object("o").status()));
  EXPECT_TRUE(IsMalformedRecord(r->NullableString("o").status()));
}

TEST(RecordTest, ADecoderMayRecodeEitherKindAndKeepsTheMessage) {
  absl::Status s = absl::InvalidArgumentError("r: malformed record: member 'a' is unknown");
  absl::Status recoded = Recoded(s, absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::IsFailedPrecondition(recoded));
  EXPECT_EQ(recoded.message(), s.message());
  EXPECT_TRUE(Recoded(absl::OkStatus(), absl::StatusCode::kDataLoss).ok());
}

TEST(RecordTest, Uint64IsExact) {
  EXPECT_EQ(ParseUint64("0"), 0u);
  EXPECT_EQ(ParseUint64("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(ParseUint64("18446744073709551616"), std::nullopt);
  EXPECT_EQ(ParseUint64("01"), std::nullopt);
  EXPECT_EQ(ParseUint64("-1"), std::nullopt);
  EXPECT_EQ(ParseUint64("1e3"), std::nullopt);
  EXPECT_EQ(ParseUint64(""), std::nullopt);
}

}  // namespace
}  // namespace sn::json
