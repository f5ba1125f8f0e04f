#include "common/provider_operations.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace sn {
namespace {

nlohmann::json Fixture() {
  std::ifstream f("tests/testdata/provider-operations.json");
  std::stringstream ss;
  ss << f.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  EXPECT_FALSE(j.is_discarded());
  return j;
}

TEST(ProviderOperations, AuthoredSourceMatchesTheFixtureExactly) {
  nlohmann::json fixture = Fixture();
  size_t listed = 0;
  for (auto& [provider, ops] : fixture["providers"].items()) {
    for (auto& op : ops) {
      ++listed;
      auto d = FindDeclaration(AllOperationDeclarations(), provider,
                               op["operation"].get<std::string>());
      ASSERT_TRUE(d.has_value()) << provider << " " << op["operation"];
      EXPECT_EQ(d->supported, op["supported"].get<bool>());
      EXPECT_EQ(std::string(d->reason), op.value("reason", std::string()));
    }
  }
  EXPECT_EQ(listed, AllOperationDeclarations().size());
}

TEST(ProviderOperations, EveryDeclaredProviderIsComplete) {
  for (const auto& d : AllOperationDeclarations()) {
    EXPECT_TRUE(ValidateDeclarations(AllOperationDeclarations(), d.provider).ok()) << d.provider;
  }
}

TEST(ProviderOperations, IncompleteOrDuplicatedOrReasonlessDeclarationsAreRefused) {
  std::vector<OperationDeclaration> t(AllOperationDeclarations().begin(),
                                      AllOperationDeclarations().end());
  std::vector<OperationDeclaration> missing;  // docker's without its last declaration
  for (const OperationDeclaration& d : t) {
    if (d.provider == "docker" && d.operation != "observe") missing.push_back(d);
  }
  EXPECT_EQ(ValidateDeclarations(missing, "docker").code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<OperationDeclaration> dup = t;
  dup.push_back(t[0]);
  EXPECT_FALSE(ValidateDeclarations(dup, "docker").ok());
  std::vector<OperationDeclaration> reasonless = t;
  reasonless[2].supported = false;
  EXPECT_FALSE(ValidateDeclarations(reasonless, "docker").ok());
  std::vector<OperationDeclaration> unknown = t;
  unknown.push_back({"docker", "teleport", true, ""});
  EXPECT_FALSE(ValidateDeclarations(unknown, "docker").ok());
  EXPECT_FALSE(ValidateDeclarations(t, "no-such-provider").ok());
}

TEST(ProviderOperations, UnsupportedDeclarationCarriesItsAuthoredReason) {
  std::vector<OperationDeclaration> t(AllOperationDeclarations().begin(),
                                      AllOperationDeclarations().end());
  for (auto& d : t) {
    if (d.operation == "kill_compute") {
      d.supported = false;
      d.reason = "compute cannot be stopped separately from state on this backend";
    }
  }
  ASSERT_TRUE(ValidateDeclarations(t, "docker").ok());
  auto d = FindDeclaration(t, "docker", "kill_compute");
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->supported);
  EXPECT_EQ(d->reason, "compute cannot be stopped separately from state on this backend");
}

}  // namespace
}  // namespace sn
