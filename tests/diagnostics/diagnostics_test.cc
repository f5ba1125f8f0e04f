// Every projection of the §7 diagnostic codes agrees with tests/testdata/node-diagnostics.json:
// the C++ enum and string mapping, the protobuf enum (via its generated descriptor) and the
// docs table in docs/diagnostics.md. (devcore's normalizer is checked in devcore's tests.)
#include <google/protobuf/descriptor.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/diagnostics.h"
#include "gtest/gtest.h"
#include "proto/privhelper.pb.h"

namespace sn {
namespace {

using json = nlohmann::json;
using CodeCause = std::pair<std::string, std::string>;

std::string ReadRunfile(const std::string& rel) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  std::string path = (srcdir && ws) ? std::string(srcdir) + "/" + ws + "/" + rel : rel;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Fixture {
  std::vector<CodeCause> codes;
  std::string unknown_normalizes_to;
};

Fixture LoadFixture() {
  Fixture f;
  json doc = json::parse(ReadRunfile("tests/testdata/node-diagnostics.json"), nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("codes")) return f;
  for (const json& c : doc["codes"]) {
    if (!c.is_object() || !c.contains("code") || !c.contains("cause")) continue;
    f.codes.emplace_back(c["code"].get<std::string>(), c["cause"].get<std::string>());
  }
  if (doc.contains("unknown_normalizes_to") && doc["unknown_normalizes_to"].is_string()) {
    f.unknown_normalizes_to = doc["unknown_normalizes_to"].get<std::string>();
  }
  return f;
}

std::string Upper(const std::string& s) {
  std::string u = s;
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(' ');
  size_t e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Rows of the `| code | cause |` table, in order.
std::vector<CodeCause> DocsTable(const std::string& md) {
  std::vector<CodeCause> rows;
  std::istringstream in(md);
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line == "| code | cause |") {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (line.rfind("|---", 0) == 0) continue;
    if (line.empty() || line[0] != '|') break;
    // "| code | cause |": the code has no '|'; the cause is the rest up to the final '|'.
    size_t second = line.find('|', 1);
    if (second == std::string::npos || line.back() != '|') break;
    rows.emplace_back(Trim(line.substr(1, second - 1)),
                      Trim(line.substr(second + 1, line.size() - second - 2)));
  }
  return rows;
}

TEST(DiagnosticsTest, FixtureIsReadable) {
  Fixture f = LoadFixture();
  EXPECT_EQ(f.codes.size(), 13u);
  EXPECT_EQ(f.unknown_normalizes_to, "provider_unavailable");
}

TEST(DiagnosticsTest, CppEnumAndMappingMatchTheFixtureInOrder) {
  Fixture f = LoadFixture();
  ASSERT_EQ(kDiagnostics.size(), f.codes.size());
  for (size_t i = 0; i < f.codes.size(); ++i) {
    SCOPED_TRACE(f.codes[i].first);
    EXPECT_EQ(static_cast<size_t>(kDiagnostics[i].value), i);
    EXPECT_EQ(std::string(kDiagnostics[i].code), f.codes[i].first);
    EXPECT_EQ(std::string(kDiagnostics[i].cause), f.codes[i].second);
    EXPECT_EQ(std::string(DiagnosticCode(kDiagnostics[i].value)), f.codes[i].first);
    ASSERT_TRUE(ParseDiagnostic(f.codes[i].first).has_value());
    EXPECT_EQ(*ParseDiagnostic(f.codes[i].first), kDiagnostics[i].value);
    EXPECT_EQ(NormalizeDiagnostic(f.codes[i].first), kDiagnostics[i].value);
  }
}

TEST(DiagnosticsTest, UnknownCodesNormalizeAsTheFixtureSays) {
  Fixture f = LoadFixture();
  for (const char* unknown : {"", "PROVIDER_UNAVAILABLE", "daemon_unreachable ", "kvm_missing"}) {
    EXPECT_FALSE(ParseDiagnostic(unknown).has_value()) << unknown;
    EXPECT_EQ(std::string(DiagnosticCode(NormalizeDiagnostic(unknown))), f.unknown_normalizes_to)
        << unknown;
  }
}

TEST(DiagnosticsTest, ProtoEnumIsTheUppercaseCodesInOrderAfterUnspecified) {
  Fixture f = LoadFixture();
  const google::protobuf::EnumDescriptor* e = sn::privhelper::v1::Diagnostic_descriptor();
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(static_cast<size_t>(e->value_count()), f.codes.size() + 1);
  EXPECT_EQ(e->value(0)->name(), "DIAGNOSTIC_UNSPECIFIED");
  EXPECT_EQ(e->value(0)->number(), 0);
  for (size_t i = 0; i < f.codes.size(); ++i) {
    const google::protobuf::EnumValueDescriptor* v = e->value(static_cast<int>(i) + 1);
    EXPECT_EQ(v->name(), Upper(f.codes[i].first));
    EXPECT_EQ(v->number(), static_cast<int>(i) + 1) << v->name();
    // privhelper's mapping (server.cc) is the C++ enum value + 1.
    EXPECT_EQ(v->number(), static_cast<int>(kDiagnostics[i].value) + 1);
  }
}

TEST(DiagnosticsTest, DocsTableMatchesTheFixture) {
  std::vector<CodeCause> rows = DocsTable(ReadRunfile("docs/diagnostics.md"));
  Fixture f = LoadFixture();
  EXPECT_EQ(rows, f.codes) << "regenerate: bazel run //tests/diagnostics:diagnostics_md > "
                              "docs/diagnostics.md";
}

}  // namespace
}  // namespace sn
