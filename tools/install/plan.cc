#include "tools/install/plan.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tools/install/units.h"

namespace sn::install {

std::string_view InstalledName(std::string_view kind) {
  for (std::string_view k : {"agent", "privhelper", "native_helper", "preparer"}) {
    if (kind == k) return k;
  }
  return {};
}

std::string RenderAgentConfig(const PlanInputs& in) {
  nlohmann::ordered_json doc = {{"core_origin", in.core_origin},
                                {"state_dir", in.layout.AgentState()},
                                {"privhelper_socket", in.layout.Socket()},
                                {"release_public_key", in.release_public_key}};
  if (in.ca_bundle.has_value()) doc["ca_bundle"] = in.layout.CaBundle();
  if (in.insecure_allow_http) doc["insecure_allow_http"] = true;
  if (in.generation_management) doc["generation_management"] = true;
  return doc.dump(2) + "\n";
}

std::string RenderPrivhelperConfig(const PlanInputs& in) {
  nlohmann::ordered_json doc = {{"socket", in.layout.Socket()},
                                {"agent_uid", in.agent_uid},
                                {"state_dir", in.layout.PrivhelperState()},
                                {"provider", in.provider}};
  if (in.microvm.has_value()) {
    doc["microvm"] = {{"store_dir", in.layout.VmStore()},
                      {"vm_uid", in.microvm->vm_uid},
                      {"vm_gid", in.microvm->vm_gid},
                      {"accel", in.microvm->accel}};
  } else {
    doc["docker_socket"] = in.docker_socket;
  }
  doc["release_public_key"] = in.release_public_key;
  return doc.dump(2) + "\n";
}

std::string RenderUnit(std::string_view unit_template, const Layout& layout,
                       std::string_view agent_user) {
  const std::string user(agent_user);
  std::string out;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(unit_template.data(), unit_template.size()), '\n')) {
    std::string l(line);
    if (!absl::StartsWith(l, "#")) {
      if (!layout.root.empty()) {
        if (l == "StateDirectory=sandbox-node/agent") {
          l = "ReadWritePaths=" + layout.AgentState();
        } else if (l == "StateDirectory=sandbox-node/privhelper") {
          l = "ReadWritePaths=" + layout.PrivhelperState();
        } else if (l == "RuntimeDirectory=sandbox-node") {
          l = "ReadWritePaths=" + layout.RunDir();
        } else if (l == "ReadWritePaths=/var/lib/sandbox-node/vm") {  // microvm.conf
          l = "ReadWritePaths=" + layout.VmStore();
        } else if (absl::StartsWith(l, "StateDirectoryMode=") ||
                   absl::StartsWith(l, "RuntimeDirectoryMode=")) {
          continue;
        }
      }
      if (l == "User=sandbox-node") l = "User=" + user;
      if (l == "Group=sandbox-node") l = "Group=" + user;
      l = absl::StrReplaceAll(l, {{"/usr/lib/sandbox-node/", layout.BinDir() + "/"},
                                  {"/etc/sandbox-node/", layout.EtcDir() + "/"},
                                  {"/run/sandbox-node/privhelper.sock", layout.Socket()}});
    }
    absl::StrAppend(&out, l, "\n");
  }
  out.pop_back();  // StrSplit yields one piece after the last "\n"
  return out;
}

std::vector<Step> PlanFiles(const PlanInputs& in) {
  const Layout& L = in.layout;
  std::vector<Step> steps;
  auto dir = [&steps](std::string path, int mode, uid_t uid = 0, gid_t gid = 0) {
    Step s;
    s.kind = Step::Kind::kDir;
    s.path = std::move(path);
    s.mode = mode;
    s.uid = uid;
    s.gid = gid;
    steps.push_back(std::move(s));
  };
  auto file = [&steps](std::string path, std::string contents, int mode) {
    Step s;
    s.kind = Step::Kind::kFile;
    s.path = std::move(path);
    s.contents = std::move(contents);
    s.mode = mode;
    steps.push_back(std::move(s));
  };
  dir(L.BinDir(), 0755);
  dir(L.EtcDir(), 0755);
  dir(L.UnitDir(), 0755);
  dir(L.VarDir(), 0755);
  dir(L.PrivhelperState(), 0700);
  dir(L.AgentState(), 0700, in.agent_uid, in.agent_gid);
  dir(L.RunDir(), 0755);
  // qemu, as the VM's uid, traverses to its VM's files; privhelper makes each VM's own
  // directory root 0700 inside (docs/formats.md, "The microVM store").
  if (in.microvm.has_value()) dir(L.VmStore(), 0755);
  // Each host executable under its installed name; with the microVM provider privhelper's
  // also as vm_supervisor (the node's one executable has that fourth program; the host
  // release has no artifact kind of its own for it: docs/protocol.md 24h).
  std::vector<std::pair<std::string, const HostBinary*>> names;
  for (const HostBinary& b : in.binaries) {
    names.emplace_back(std::string(InstalledName(b.artifact.kind)), &b);
    if (in.microvm.has_value() && b.artifact.kind == "privhelper") {
      names.emplace_back("vm_supervisor", &b);
    }
  }
  std::vector<size_t> binaries;  // their indices in `steps`
  for (const auto& [name, bp] : names) {
    const HostBinary& b = *bp;
    Step s;
    s.kind = Step::Kind::kBinary;
    s.path = L.Binary(name);
    s.mode = 0755;
    s.artifact = b.artifact;
    s.source = b.staged;
    for (size_t i : binaries) {
      const Step& earlier = steps[i];
      if (earlier.artifact.sha256 == s.artifact.sha256 && earlier.artifact.size == s.artifact.size) {
        s.link_to = earlier.link_to.empty() ? earlier.path : earlier.link_to;
        break;
      }
    }
    binaries.push_back(steps.size());
    steps.push_back(std::move(s));
  }
  if (in.ca_bundle.has_value()) file(L.CaBundle(), *in.ca_bundle, 0644);
  file(L.AgentConfig(), RenderAgentConfig(in), 0644);
  file(L.PrivhelperConfig(), RenderPrivhelperConfig(in), 0600);
  file(L.Unit(kPrivhelperUnitName), RenderUnit(PrivhelperUnitTemplate(), L, in.agent_user), 0644);
  file(L.Unit(kAgentUnitName), RenderUnit(AgentUnitTemplate(), L, in.agent_user), 0644);
  if (in.microvm.has_value()) {
    dir(L.PrivhelperDropInDir(), 0755);
    file(L.MicrovmDropIn(), RenderUnit(MicrovmDropInTemplate(), L, in.agent_user), 0644);
  }
  file(L.HostRecord(), in.host_record, 0644);
  file(L.RuntimeRecord(), in.runtime_record, 0600);
  return steps;
}

std::string PrivhelperCommand(const Layout& layout) {
  return absl::StrCat(layout.Binary("privhelper"), " --config=", layout.PrivhelperConfig());
}

std::string AgentCommand(const Layout& layout, std::string_view agent_user) {
  return absl::StrCat("runuser -u ", std::string(agent_user), " -- ", layout.Binary("agent"),
                      " run --config=", layout.AgentConfig());
}

}  // namespace sn::install
