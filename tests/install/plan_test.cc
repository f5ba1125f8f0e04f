// The installer's pure parts: the layout, the pending/installed record and checksum record
// codecs, the rendered configuration files and units, and the plan of steps.
#include "tools/install/plan.h"

#include <map>
#include <set>
#include <string>

#include "agent/state/config.h"
#include "gtest/gtest.h"
#include "privhelper/config.h"
#include "tools/install/layout.h"
#include "tools/install/record.h"
#include "tools/install/units.h"

namespace sn::install {
namespace {

constexpr char kKey[] = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
const std::string kDigest(64, 'a');

InstallRecord Enrolled() {
  InstallRecord r;
  r.phase = Phase::kEnrolled;
  r.core_origin = "https://core.example";
  r.host_source = "host-1";
  r.host_manifest_sha256 = std::string(64, 'b');
  r.installation_id = "7d444840-9dc0-41d3-b5e2-d1e8f4f1e6a2";
  r.provider = "docker";
  r.agent_user = "sandbox-node";
  r.node_id = "0b0e2b8e-6f63-4c4b-9a59-3c1f8a4d2e10";
  r.credential = "secret-credential";
  r.deployment_generation = 7;
  r.specification_digest = kDigest;
  r.runtime_source = "runtime-3";
  return r;
}

PlanInputs Inputs(std::string root) {
  PlanInputs in;
  in.layout = *MakeLayout(root);
  in.core_origin = "http://127.0.0.1:8080";
  in.insecure_allow_http = true;
  in.release_public_key = kKey;
  in.docker_socket = "/var/run/docker.sock";
  in.agent_user = "sn-agent";
  in.agent_uid = 990;
  in.agent_gid = 990;
  for (const char* kind : {"agent", "privhelper", "native_helper"}) {
    in.binaries.push_back({{kind, kind, kDigest, 10}, std::string("/staged/") + kind});
  }
  in.host_record = "{}\n";
  in.runtime_record = "{}\n";
  return in;
}

TEST(LayoutTest, RootIsNormalisedAndMustBeAbsoluteWithoutDotComponents) {
  EXPECT_EQ(MakeLayout("")->root, "");
  EXPECT_EQ(MakeLayout("/")->root, "");
  EXPECT_EQ(MakeLayout("/tmp//x/")->root, "/tmp/x");
  EXPECT_EQ(MakeLayout("/tmp/x")->Socket(), "/tmp/x/run/sandbox-node/privhelper.sock");
  EXPECT_EQ(MakeLayout("")->Binary("agent"), "/usr/lib/sandbox-node/agent");
  EXPECT_EQ(MakeLayout("")->RuntimeRecord(), "/var/lib/sandbox-node/privhelper.runtime.json");
  EXPECT_FALSE(MakeLayout("relative").ok());
  EXPECT_FALSE(MakeLayout("/tmp/../etc").ok());
  EXPECT_FALSE(MakeLayout("/tmp/./x").ok());
  EXPECT_FALSE(MakeLayout("/" + std::string(100, 'r')).ok());  // the socket would not fit
}

TEST(InstallRecordTest, EnrolledRecordRoundTripsWithItsCredential) {
  const InstallRecord r = Enrolled();
  absl::StatusOr<InstallRecord> back = DecodeInstallRecord(EncodeInstallRecord(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
}

TEST(InstallRecordTest, InstalledRecordCarriesNoCredential) {
  InstallRecord r = Enrolled();
  r.phase = Phase::kInstalled;
  r.credential.clear();
  const std::string text = EncodeInstallRecord(r);
  EXPECT_EQ(text.find("credential"), std::string::npos);
  EXPECT_EQ(*DecodeInstallRecord(text), r);
}

TEST(InstallRecordTest, TornForeignOrInconsistentRecordsAreDataLoss) {
  const std::string good = EncodeInstallRecord(Enrolled());
  for (const std::string& bad : {
           std::string(""),
           good.substr(0, good.size() / 2),
           std::string("[]"),
           // an installed record that still holds the credential
           std::string(good).replace(good.find("\"enrolled\""), 10, "\"installed\""),
           // an unknown member
           std::string(good).insert(1, "\"extra\":1,"),
           // a wrong type
           std::string(good).replace(good.find("\"deployment_generation\":7"), 25,
                                     "\"deployment_generation\":\"7\""),
       }) {
    absl::StatusOr<InstallRecord> r = DecodeInstallRecord(bad);
    EXPECT_TRUE(absl::IsDataLoss(r.status())) << bad << " -> " << r.status();
  }
  InstallRecord no_cred = Enrolled();
  no_cred.credential.clear();
  EXPECT_TRUE(absl::IsDataLoss(DecodeInstallRecord(EncodeInstallRecord(no_cred)).status()));
}

TEST(ChecksumRecordTest, RuntimeAndHostRecordsRoundTripInTheirOwnForms) {
  ChecksumRecord runtime{"runtime-3",
                         kDigest,
                         7,
                         kDigest,
                         {{{"img.tar", "image", kDigest, 5}, ""}},
                         {{"busybox", "img.tar", {"sha256:" + kDigest}}}};
  EXPECT_EQ(*DecodeChecksumRecord(EncodeChecksumRecord(runtime, true), true), runtime);
  ChecksumRecord host{
      "host-1", kDigest, 0, "", {{{"agent", "agent", kDigest, 5}, "/usr/lib/x"}}, {}};
  EXPECT_EQ(*DecodeChecksumRecord(EncodeChecksumRecord(host, false), false), host);
  // One form is not the other.
  EXPECT_TRUE(
      absl::IsDataLoss(DecodeChecksumRecord(EncodeChecksumRecord(host, false), true).status()));
  EXPECT_TRUE(
      absl::IsDataLoss(DecodeChecksumRecord(EncodeChecksumRecord(runtime, true), false).status()));
}

TEST(RenderTest, BothConfigurationsParseWithTheProcessesOwnParsersAndNameTheTree) {
  const PlanInputs in = Inputs("/tmp/inst");
  absl::StatusOr<agent::AgentConfig> a = agent::ParseConfig(RenderAgentConfig(in));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->state_dir, "/tmp/inst/var/lib/sandbox-node/agent");
  EXPECT_EQ(a->privhelper_socket, "/tmp/inst/run/sandbox-node/privhelper.sock");
  EXPECT_TRUE(a->insecure_allow_http);
  EXPECT_FALSE(a->generation_management);
  EXPECT_FALSE(a->ca_bundle.has_value());
  absl::StatusOr<privhelper::Config> p = privhelper::ParseConfig(RenderPrivhelperConfig(in));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->socket, a->privhelper_socket);
  EXPECT_EQ(p->agent_uid, 990u);
  EXPECT_EQ(p->state_dir, "/tmp/inst/var/lib/sandbox-node/privhelper");
  EXPECT_EQ(p->release_public_key, kKey);
}

TEST(RenderTest, WithoutRootAndTheDefaultUserTheUnitsAreTheTemplatesThemselves) {
  const Layout root = *MakeLayout("");
  EXPECT_EQ(RenderUnit(AgentUnitTemplate(), root, kDefaultAgentUser), AgentUnitTemplate());
  EXPECT_EQ(RenderUnit(PrivhelperUnitTemplate(), root, kDefaultAgentUser),
            PrivhelperUnitTemplate());
}

TEST(RenderTest, UnderARootTheUnitsNameTheTreesFilesAndTheAgentsUser) {
  const Layout L = *MakeLayout("/tmp/inst");
  const std::string agent = RenderUnit(AgentUnitTemplate(), L, "sn-agent");
  EXPECT_NE(agent.find("\nExecStart=/tmp/inst/usr/lib/sandbox-node/agent run "
                       "--config=/tmp/inst/etc/sandbox-node/agent.json\n"),
            std::string::npos);
  EXPECT_NE(agent.find("\nUser=sn-agent\nGroup=sn-agent\n"), std::string::npos);
  EXPECT_NE(agent.find("\nReadWritePaths=/tmp/inst/var/lib/sandbox-node/agent\n"),
            std::string::npos);
  EXPECT_EQ(agent.find("\nStateDirectory"), std::string::npos);
  const std::string ph = RenderUnit(PrivhelperUnitTemplate(), L, "sn-agent");
  EXPECT_NE(ph.find("\nExecStart=/tmp/inst/usr/lib/sandbox-node/privhelper "
                    "--config=/tmp/inst/etc/sandbox-node/privhelper.json\n"),
            std::string::npos);
  EXPECT_NE(ph.find("[ ! -S /tmp/inst/run/sandbox-node/privhelper.sock ]"), std::string::npos);
  EXPECT_EQ(ph.find("\nRuntimeDirectory"), std::string::npos);
  // Every non-comment mention of the product's paths is under the root.
  for (const std::string& unit : {agent, ph}) {
    size_t pos = 0;
    while ((pos = unit.find("/sandbox-node", pos)) != std::string::npos) {
      const size_t line = unit.rfind('\n', pos) + 1;
      if (unit[line] != '#') {
        EXPECT_NE(unit.substr(line, pos - line).find("/tmp/inst"), std::string::npos)
            << unit.substr(line, unit.find('\n', pos) - line);
      }
      ++pos;
    }
  }
}

TEST(PlanTest, ProgramsWithDifferentBytesAreSeparateFiles) {
  PlanInputs in = Inputs("/tmp/inst");
  in.binaries[1].artifact.sha256 = std::string(64, 'b');  // privhelper built apart
  in.binaries[2].artifact.size = 11;                      // same digest, other size: not one
  for (const Step& s : PlanFiles(in)) {
    EXPECT_EQ(s.link_to, "") << s.path;
  }
}

TEST(PlanTest, EveryStepLiesUnderTheRootWithItsOwnerAndMode) {
  const PlanInputs in = Inputs("/tmp/inst");
  const std::vector<Step> steps = PlanFiles(in);
  std::set<std::string> paths;
  for (const Step& s : steps) {
    EXPECT_EQ(s.path.rfind("/tmp/inst/", 0), 0u) << s.path;
    EXPECT_TRUE(paths.insert(s.path).second) << "twice: " << s.path;
  }
  auto find = [&](const std::string& p) -> const Step& {
    for (const Step& s : steps) {
      if (s.path == p) return s;
    }
    ADD_FAILURE() << "not planned: " << p;
    return steps.front();
  };
  const Step& state = find("/tmp/inst/var/lib/sandbox-node/agent");
  EXPECT_EQ(state.kind, Step::Kind::kDir);
  EXPECT_EQ(state.uid, 990u);
  EXPECT_EQ(state.mode, 0700);
  EXPECT_EQ(find("/tmp/inst/var/lib/sandbox-node/privhelper").uid, 0u);
  EXPECT_EQ(find("/tmp/inst/etc/sandbox-node/privhelper.json").mode, 0600);
  EXPECT_EQ(find("/tmp/inst/etc/sandbox-node/agent.json").mode, 0644);
  EXPECT_EQ(find("/tmp/inst/var/lib/sandbox-node/privhelper.runtime.json").mode, 0600);
  const Step& nh = find("/tmp/inst/usr/lib/sandbox-node/native_helper");
  EXPECT_EQ(nh.kind, Step::Kind::kBinary);
  EXPECT_EQ(nh.mode, 0755);
  EXPECT_EQ(nh.source, "/staged/native_helper");
  // The three programs are one executable (the same bytes): the first is copied, the others
  // are hard links to it.
  EXPECT_EQ(find("/tmp/inst/usr/lib/sandbox-node/agent").link_to, "");
  EXPECT_EQ(find("/tmp/inst/usr/lib/sandbox-node/privhelper").link_to,
            "/tmp/inst/usr/lib/sandbox-node/agent");
  EXPECT_EQ(nh.link_to, "/tmp/inst/usr/lib/sandbox-node/agent");
  find("/tmp/inst/etc/systemd/system/sandbox-node-agent.service");
  find("/tmp/inst/etc/systemd/system/sandbox-node-privhelper.service");
  // Directories come before anything inside them.
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t j = i + 1; j < steps.size(); ++j) {
      EXPECT_NE(steps[i].path.rfind(steps[j].path + "/", 0), 0u)
          << steps[j].path << " after " << steps[i].path;
    }
  }
}

TEST(PlanTest, TheMicrovmProviderAddsItsStoreSupervisorNameAndUnitDropIn) {
  PlanInputs in = Inputs("/tmp/inst");
  in.provider = "microvm";
  in.microvm = MicrovmInputs{"auto", 991, 992};
  absl::StatusOr<privhelper::Config> p = privhelper::ParseConfig(RenderPrivhelperConfig(in));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->provider, "microvm");
  ASSERT_TRUE(p->microvm.has_value());
  EXPECT_EQ(p->microvm->store_dir, "/tmp/inst/var/lib/sandbox-node/vm");
  EXPECT_EQ(p->microvm->vm_uid, 991u);
  EXPECT_EQ(p->microvm->vm_gid, 992u);
  EXPECT_EQ(p->microvm->accel, "auto");
  EXPECT_EQ(RenderPrivhelperConfig(in).find("docker_socket"), std::string::npos);

  std::map<std::string, Step> steps;
  for (const Step& s : PlanFiles(in)) steps[s.path] = s;
  const Step& store = steps["/tmp/inst/var/lib/sandbox-node/vm"];
  EXPECT_EQ(store.kind, Step::Kind::kDir);
  EXPECT_EQ(store.mode, 0755);
  EXPECT_EQ(store.uid, 0u);
  // privhelper starts each VM's supervisor from beside itself: the executable's fourth name.
  const Step& sup = steps["/tmp/inst/usr/lib/sandbox-node/vm_supervisor"];
  EXPECT_EQ(sup.kind, Step::Kind::kBinary);
  EXPECT_EQ(sup.artifact.kind, "privhelper");
  EXPECT_EQ(sup.link_to, "/tmp/inst/usr/lib/sandbox-node/agent");
  const Step& dropin =
      steps["/tmp/inst/etc/systemd/system/sandbox-node-privhelper.service.d/microvm.conf"];
  EXPECT_EQ(dropin.mode, 0644);
  EXPECT_NE(dropin.contents.find("\nReadWritePaths=/tmp/inst/var/lib/sandbox-node/vm\n"),
            std::string::npos)
      << dropin.contents;
  EXPECT_NE(dropin.contents.find("\nKillMode=process\n"), std::string::npos);
  EXPECT_EQ(steps["/tmp/inst/etc/systemd/system/sandbox-node-privhelper.service.d"].kind,
            Step::Kind::kDir);
  // Without a root the drop-in is the shipped file itself; Docker's plan has none of these.
  EXPECT_EQ(RenderUnit(MicrovmDropInTemplate(), *MakeLayout(""), kDefaultAgentUser),
            MicrovmDropInTemplate());
  for (const Step& s : PlanFiles(Inputs("/tmp/inst"))) {
    EXPECT_EQ(s.path.find("/vm"), std::string::npos) << s.path;
    EXPECT_EQ(s.path.find(".service.d"), std::string::npos) << s.path;
  }
}

TEST(PlanTest, ACaBundleIsCopiedForTheAgentAndNamedByItsConfiguration) {
  PlanInputs in = Inputs("");
  in.ca_bundle = "-----BEGIN CERTIFICATE-----\n";
  bool planned = false;
  for (const Step& s : PlanFiles(in)) {
    if (s.path == "/etc/sandbox-node/ca-bundle.pem") {
      planned = true;
      EXPECT_EQ(s.contents, *in.ca_bundle);
      EXPECT_EQ(s.mode, 0644);
    }
  }
  EXPECT_TRUE(planned);
  EXPECT_EQ(agent::ParseConfig(RenderAgentConfig(in))->ca_bundle,
            std::optional<std::string>("/etc/sandbox-node/ca-bundle.pem"));
}

TEST(PlanTest, PrintedCommandsAreTheUnitsExecStartLines) {
  const Layout L = *MakeLayout("/tmp/inst");
  const std::string ph = RenderUnit(PrivhelperUnitTemplate(), L, "u");
  EXPECT_NE(ph.find("\nExecStart=" + PrivhelperCommand(L) + "\n"), std::string::npos);
  const std::string agent = RenderUnit(AgentUnitTemplate(), L, "u");
  const std::string cmd = AgentCommand(L, "u");
  ASSERT_EQ(cmd.rfind("runuser -u u -- ", 0), 0u) << cmd;
  EXPECT_NE(agent.find("\nExecStart=" + cmd.substr(16) + "\n"), std::string::npos);
}

}  // namespace
}  // namespace sn::install
