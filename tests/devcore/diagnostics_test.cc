// devcore's diagnostic normalization against the shared fixture
// tests/testdata/node-diagnostics.json: every listed code maps to itself, an unknown code to
// provider_unavailable.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/devcore/health_json.h"

namespace sn::devcore {
namespace {

using json = nlohmann::json;

json LoadFixture() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  std::string path = std::string(srcdir ? srcdir : ".") + "/" +
                     (workspace ? workspace : "sandbox_node") +
                     "/tests/testdata/node-diagnostics.json";
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path;
  return j;
}

TEST(DiagnosticsTest, EveryFixtureCodeNormalizesToItself) {
  json fixture = LoadFixture();
  ASSERT_TRUE(fixture.contains("codes"));
  ASSERT_FALSE(fixture["codes"].empty());
  for (const json& c : fixture["codes"]) {
    const std::string code = c["code"];
    EXPECT_EQ(NormalizedDiagnosticCode(code), code);
  }
}

TEST(DiagnosticsTest, UnknownCodeNormalizesToTheFixturesFallback) {
  json fixture = LoadFixture();
  const std::string fallback = fixture["unknown_normalizes_to"];
  EXPECT_EQ(fallback, "provider_unavailable");
  EXPECT_EQ(NormalizedDiagnosticCode("flux_capacitor_missing"), fallback);
  EXPECT_EQ(NormalizedDiagnosticCode(""), fallback);
  EXPECT_EQ(NormalizedDiagnosticCode("Daemon_Unreachable"), fallback);
}

}  // namespace
}  // namespace sn::devcore
