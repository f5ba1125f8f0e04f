// release: the console release tool (spec/wire.md §6).
//   release keygen --private-key=FILE
//   release publish --releases-dir=DIR --source=NAME --private-key=FILE [--make-current]
//                   KIND=PATH...
// Exit status: 0 done; 1 refused (a conflict with what is published, a release that does not
// verify, an existing key file, or a local I/O error; nothing was added and `current` is
// unchanged); 2 usage error. See tools/release/README.md.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/process_init.h"
#include "tools/release/keyfile.h"
#include "tools/release/publisher.h"

namespace {

constexpr char kUsage[] =
    "usage: release keygen --private-key=FILE\n"
    "       release publish --releases-dir=DIR --source=NAME --private-key=FILE\n"
    "                       [--make-current] KIND=PATH...\n"
    "  keygen   writes a new Ed25519 key to FILE (mode 0600, never overwriting) and prints\n"
    "           the public key (base64 of its 32 raw bytes) for the nodes' configuration\n"
    "  publish  publishes DIR/NAME/ (manifest.json, manifest.json.sig, SHA256SUMS and the\n"
    "           artifacts, each named by its file's base name); for a published release,\n"
    "           verifies it and adds only declared artifacts that are missing\n"
    "  KIND     agent, privhelper, native_helper, preparer, helper, firmware, kernel,\n"
    "           seccomp or image\n"
    "  --make-current  then points DIR/current at NAME (the release must be complete)\n";

int Usage(const std::string& message) {
  std::fprintf(stderr, "release: %s\n%s", message.c_str(), kUsage);
  return 2;
}

int Refused(const std::string& message) {
  std::fprintf(stderr, "release: %s\n", message.c_str());
  return 1;
}

struct Args {
  std::optional<std::string> private_key;
  std::optional<std::string> releases_dir;
  std::optional<std::string> source;
  bool make_current = false;
  std::vector<sn::release_tool::ArtifactInput> artifacts;
};

// --name=value flags (each at most once), --make-current, and KIND=PATH operands.
std::optional<std::string> Parse(int argc, char** argv, Args* args) {
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--make-current") {
      args->make_current = true;
      continue;
    }
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) return "expected --name=value or KIND=PATH: " + arg;
    const std::string name = arg.substr(0, eq);
    const std::string value = arg.substr(eq + 1);
    if (name.rfind("--", 0) != 0) {
      if (value.empty()) return "KIND=PATH needs a path: " + arg;
      args->artifacts.push_back({name, value});
      continue;
    }
    std::optional<std::string>* slot = nullptr;
    if (name == "--private-key") slot = &args->private_key;
    if (name == "--releases-dir") slot = &args->releases_dir;
    if (name == "--source") slot = &args->source;
    if (slot == nullptr) return "unknown flag " + name;
    if (slot->has_value()) return name + " given twice";
    if (value.empty()) return name + " needs a value";
    *slot = value;
  }
  return std::nullopt;
}

int Keygen(const Args& args) {
  if (!args.private_key || args.releases_dir || args.source || args.make_current ||
      !args.artifacts.empty()) {
    return Usage("keygen takes exactly --private-key=FILE");
  }
  absl::StatusOr<std::string> pub = sn::release_tool::CreatePrivateKeyFile(*args.private_key);
  if (!pub.ok()) return Refused(std::string(pub.status().message()));
  std::printf("%s\n", pub->c_str());
  return 0;
}

int Publish(const Args& args) {
  if (!args.private_key || !args.releases_dir || !args.source) {
    return Usage("publish needs --releases-dir, --source and --private-key");
  }
  absl::StatusOr<sn::release::PrivateKey> key =
      sn::release_tool::ReadPrivateKeyFile(*args.private_key);
  if (!key.ok()) return Refused(std::string(key.status().message()));
  sn::release_tool::PublishRequest req;
  req.releases_dir = *args.releases_dir;
  req.source = *args.source;
  req.make_current = args.make_current;
  req.artifacts = args.artifacts;
  absl::StatusOr<sn::release_tool::PublishResult> r =
      sn::release_tool::Publish(req, *key, *sn::SystemClock::Get());
  if (absl::IsInvalidArgument(r.status())) return Usage(std::string(r.status().message()));
  if (!r.ok()) return Refused(std::string(r.status().message()));
  if (r->created) {
    std::printf("published release %s (%zu artifact%s)\n", req.source.c_str(),
                req.artifacts.size(), req.artifacts.size() == 1 ? "" : "s");
  }
  for (const std::string& a : r->added) {
    std::printf("added artifact %s to release %s\n", a.c_str(), req.source.c_str());
  }
  if (!r->created && r->added.empty()) {
    std::printf("release %s verified; nothing to add\n", req.source.c_str());
  }
  for (const std::string& a : r->missing) {
    std::printf("release %s still lacks artifact %s\n", req.source.c_str(), a.c_str());
  }
  if (r->made_current) std::printf("current release: %s\n", req.source.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc < 2) return Usage("a command is required");
  sn::InitProcess("release");
  Args args;
  if (std::optional<std::string> error = Parse(argc, argv, &args)) return Usage(*error);
  const std::string command = argv[1];
  if (command == "keygen") return Keygen(args);
  if (command == "publish") return Publish(args);
  return Usage("unknown command " + command);
}
