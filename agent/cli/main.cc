// agent: the unprivileged sandbox node process.
//   agent enroll --config=FILE --token-file=PATH|-   (the token from a file or standard input,
//                                                    common/token_file.h; never --token=)
//   agent enroll --config=FILE --resume   (finishes an enrollment someone else began, e.g.
//                                          sandbox-node-install; never uses a token)
//   agent run --config=FILE
//   agent generations --config=FILE [--json]   (read-only; generations_view.h)
//   agent status --config=FILE [--json]        (read-only; status_view.h)
//   agent --help | help, agent --version   (standard output, exit 0; common/build_info.h)
// Exit codes: 0 ok, 1 other failure (for `generations`: a partial view, privhelper
// unreachable or a file unreadable), 2 usage or configuration error, 3 credential rejected.
#include <cstdlib>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "agent/cli/enroll.h"
#include "agent/cli/generations_view.h"
#include "agent/cli/run.h"
#include "agent/cli/status_view.h"
#include "agent/state/config.h"
#include "common/build_info.h"
#include "common/entry_points.h"
#include "common/log.h"
#include "common/process_init.h"
#include "common/token_file.h"

namespace {

constexpr char kUsage[] =
    "usage:\n"
    "  agent enroll --config=FILE --token-file=PATH|-\n"
    "  agent enroll --config=FILE --resume\n"
    "  agent run --config=FILE\n"
    "  agent generations --config=FILE [--json]\n"
    "  agent status --config=FILE [--json]\n"
    "  agent --help | --version\n";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "agent: %s\n%s", problem.c_str(), kUsage);
  return sn::agent::kExitUsage;
}

}  // namespace

int sn::agent::Main(int argc, char** argv) {
  std::string_view first = sn::FirstArgument(argc, argv);
  if (first == "help") first = "--help";  // the subcommand an operator tries first
  if (std::optional<int> answered = sn::AnswerHelpOrVersion(first, "agent", kUsage)) {
    return *answered;
  }
  // gRPC's "poll" engine, before gRPC starts: a completion queue polls only its own calls'
  // descriptors, so the event loop alone reads privhelper's answers to its Execute calls while
  // a probe or an upload runs a call of its own on another thread (privhelper_executor.cc).
  setenv("GRPC_POLL_STRATEGY", "poll", 1);
  sn::InitProcess("agent");
  sn::KeepFreedMemoryWhileStreaming();
  if (argc < 2) return Usage("missing subcommand");
  const std::string command = argv[1];
  if (command != "enroll" && command != "run" && command != "generations" &&
      command != "status") {
    return Usage("unknown subcommand " + command);
  }
  std::string config_path;
  std::string token_file;
  bool have_token = false;
  bool resume = false;
  bool json = false;
  for (int i = 2; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.rfind("--config=", 0) == 0) {
      config_path = std::string(arg.substr(9));
    } else if (command == "enroll" && (arg.rfind("--token=", 0) == 0 || arg == "--token")) {
      // Every local user can read /proc/<pid>/cmdline (the agent's user is not the only one).
      // Never echo the argument.
      return Usage(
          "--token= is refused: every local user can read the command line; put the token in "
          "a file only this user can read and give --token-file=PATH (or --token-file=- and "
          "the token on standard input)");
    } else if (command == "enroll" && arg.rfind("--token-file=", 0) == 0) {
      token_file = std::string(arg.substr(13));
      have_token = true;
    } else if (command == "enroll" && arg == "--resume") {
      resume = true;
    } else if ((command == "generations" || command == "status") && arg == "--json") {
      json = true;
    } else {
      // Never echo the argument: it might be a token given with a typo.
      return Usage("unknown argument #" + std::to_string(i));
    }
  }
  if (config_path.empty()) return Usage("--config=FILE is required");
  if (command == "enroll" && resume && have_token) {
    return Usage("--resume and --token-file exclude each other");
  }
  if (command == "enroll" && !resume && (!have_token || token_file.empty())) {
    return Usage("--token-file=PATH (or - for standard input) is required");
  }
  // Read before the configuration: a token file the reader refuses is a usage error too.
  std::string token;
  if (command == "enroll" && !resume) {
    absl::StatusOr<std::string> read = sn::ReadTokenFile(token_file);
    if (!read.ok()) return Usage("--token-file: " + std::string(read.status().message()));
    token = *std::move(read);
  }
  absl::StatusOr<sn::agent::AgentConfig> config = sn::agent::LoadConfig(config_path);
  if (!config.ok()) {
    sn::LogError("invalid configuration", {{"file", config_path},
                                           {"error", std::string(config.status().message())}});
    return sn::agent::kExitUsage;
  }
  if (command == "run") return sn::agent::RunAgent(*config);
  if (command == "generations") {
    return sn::agent::RunGenerationsCommand(*config, json, stdout, stderr);
  }
  if (command == "status") return sn::agent::RunStatusCommand(*config, json, stdout, stderr);

  absl::Status st =
      resume ? sn::agent::ResumePendingEnrollment(*config) : sn::agent::Enroll(*config, token);
  if (st.ok()) return sn::agent::kExitOk;
  sn::LogError("enroll failed", {{"error", std::string(st.message())}});
  if (absl::IsUnauthenticated(st)) return sn::agent::kExitCredentialRejected;
  if (absl::IsInvalidArgument(st)) return sn::agent::kExitUsage;
  return sn::agent::kExitFailure;
}
