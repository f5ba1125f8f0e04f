// sandbox-node-install --core-origin=URL --token-file=PATH|- --release-public-key=B64
//     [--ca-bundle=FILE] [--insecure-allow-http] [--generation-management] [--bundle=DIR]
//     [--root=DIR] [--agent-user=NAME] [--docker-socket=PATH]
//     [--provider=docker|microvm] [--microvm-accel=auto|kvm|tcg] [--vm-user=NAME]
// sandbox-node-install --help | --version   (standard output, exit 0; common/build_info.h)
// Runs as root. What it does: tools/install/installer.h; docs/operator-guide.md.
// Exit codes: 0 installed (or already installed), 1 failed (Core, dockerd or privhelper
// unreachable, or the network child died or gave no answer in time: run it again), 2 usage,
// 3 refused (the message says exactly why; a token or credential Core rejected is refused
// too, and so is a network child that answered out of protocol).
// The token is read from --token-file (a file, or "-" for standard input; common/token_file.h):
// never from the command line, which every local user can read in /proc/<pid>/cmdline.
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/build_info.h"
#include "common/process_init.h"
#include "common/token_file.h"
#include "tools/install/installer.h"

namespace {

constexpr char kUsage[] =
    "usage: sandbox-node-install --core-origin=URL --token-file=PATH|- --release-public-key=B64\n"
    "         [--ca-bundle=FILE] [--insecure-allow-http] [--generation-management]\n"
    "         [--bundle=DIR] [--root=DIR] [--agent-user=NAME] [--docker-socket=PATH]\n"
    "         [--provider=docker|microvm] [--microvm-accel=auto|kvm|tcg] [--vm-user=NAME]\n"
    "       sandbox-node-install --help | --version\n";

constexpr char kHelp[] =
    "  Installs a node on this host (as root) from the console's current host program\n"
    "  release, enrolled with the token in --token-file (PATH, or - for standard input;\n"
    "  never --token=). Running it again is safe. docs/operator-guide.md has every option.\n"
    "  Exit status: 0 installed or already installed, 1 failed (run it again), 2 usage,\n"
    "  3 refused (the message says why).\n";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "sandbox-node-install: %s\n%s", problem.c_str(), kUsage);
  return 2;
}

bool Value(std::string_view arg, std::string_view flag, std::string* out) {
  if (arg.substr(0, flag.size()) != flag) return false;
  *out = std::string(arg.substr(flag.size()));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::optional<int> answered =
          sn::AnswerHelpOrVersion(sn::FirstArgument(argc, argv), "sandbox-node-install",
                                  std::string(kUsage) + kHelp)) {
    return *answered;
  }
  sn::InitProcess("sandbox-node-install");
  sn::install::Options o;
  std::string v;
  std::string token_file;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.substr(0, 8) == "--token=" || arg == "--token") {
      // Too late for this run's secret (it is in /proc/<pid>/cmdline already), but refused so
      // that no script keeps doing it. Never echo the argument.
      return Usage(
          "--token= is refused: every local user can read the command line; put the token in "
          "a file only you can read and give --token-file=PATH (or --token-file=- and the "
          "token on standard input)");
    }
    if (Value(arg, "--core-origin=", &o.core_origin) ||
        Value(arg, "--token-file=", &token_file) ||
        Value(arg, "--release-public-key=", &o.release_public_key) ||
        Value(arg, "--root=", &o.root) || Value(arg, "--agent-user=", &o.agent_user) ||
        Value(arg, "--docker-socket=", &o.docker_socket) ||
        Value(arg, "--provider=", &o.provider) ||
        Value(arg, "--microvm-accel=", &o.microvm_accel) || Value(arg, "--vm-user=", &o.vm_user)) {
      continue;
    }
    if (Value(arg, "--ca-bundle=", &v)) {
      o.ca_bundle = v;
    } else if (Value(arg, "--bundle=", &v)) {
      o.bundle = v;
    } else if (arg == "--insecure-allow-http") {
      o.insecure_allow_http = true;
    } else if (arg == "--generation-management") {
      o.generation_management = true;
    } else {
      // Never echo the argument: it might be a token given with a typo.
      return Usage("unknown argument #" + std::to_string(i));
    }
  }
  if (o.core_origin.empty()) return Usage("--core-origin=URL is required");
  if (token_file.empty()) return Usage("--token-file=PATH (or - for standard input) is required");
  if (o.release_public_key.empty()) return Usage("--release-public-key=B64 is required");
  if (geteuid() != 0) {
    std::fprintf(stderr, "sandbox-node-install: must run as root\n");
    return 2;
  }
  // As root: the file must be root's (common/token_file.h).
  absl::StatusOr<std::string> token = sn::ReadTokenFile(token_file);
  if (!token.ok()) return Usage("--token-file: " + std::string(token.status().message()));
  o.token = *std::move(token);
  absl::Status s = sn::install::Install(o, stdout);
  if (s.ok()) return 0;
  std::fprintf(stderr, "sandbox-node-install: %s\n", std::string(s.message()).c_str());
  if (absl::IsInvalidArgument(s)) return 2;
  if (absl::IsUnavailable(s) || absl::IsInternal(s) || absl::IsUnknown(s)) return 1;
  return 3;
}
