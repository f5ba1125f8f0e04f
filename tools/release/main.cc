// release: the console release tool (spec/wire.md §6).
//   release keygen --private-key=FILE
//   release publish --releases-dir=DIR --source=NAME --private-key=FILE [--make-current]
//                   KIND=PATH...
//   release rootfs --output=FILE (--docker-archive=TAR [--image=REF] | --dir=DIR)
//                  [--size-mib=N]
//   release --help | --version   (standard output, exit 0; common/build_info.h)
// Exit status: 0 done; 1 refused (a conflict with what is published, a release that does not
// verify, an existing key file, a refused image input, or a local I/O error; nothing was added,
// `current` is unchanged and no image was written); 2 usage error. See tools/release/README.md.
#include <cinttypes>
#include <clocale>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/build_info.h"
#include "common/clock.h"
#include "common/process_init.h"
#include "tools/release/keyfile.h"
#include "tools/release/publisher.h"
#include "tools/release/rootfs.h"

namespace {

constexpr char kUsage[] =
    "usage: release keygen --private-key=FILE\n"
    "       release publish --releases-dir=DIR --source=NAME --private-key=FILE\n"
    "                       [--make-current] KIND=PATH...\n"
    "       release rootfs --output=FILE (--docker-archive=TAR [--image=REF] | --dir=DIR)\n"
    "                      [--size-mib=N]\n"
    "       release --help | --version\n"
    "  keygen   writes a new Ed25519 key to FILE (mode 0600, never overwriting) and prints\n"
    "           the public key (base64 of its 32 raw bytes) for the nodes' configuration\n"
    "  publish  publishes DIR/NAME/ (manifest.json, manifest.json.sig, SHA256SUMS and the\n"
    "           artifacts, each named by its file's base name); for a published release,\n"
    "           verifies it and adds only declared artifacts that are missing\n"
    "  KIND     agent, privhelper, native_helper, preparer, helper, firmware, kernel,\n"
    "           seccomp or image\n"
    "  --make-current  then points DIR/current at NAME (the release must be complete)\n"
    "  rootfs   writes FILE, a deterministic ext4 image for an `image` artifact (the same\n"
    "           input gives the same bytes), and prints \"sha256:<hex> <bytes> FILE\";\n"
    "           from a `docker save` archive (layers applied in order, whiteouts honoured;\n"
    "           --image picks one of several images by RepoTag) or from DIR's tree as it\n"
    "           is. --docker-archive needs root: the publisher runs rootfs as root in a\n"
    "           throwaway directory beside FILE. Every time in the image is\n"
    "           SOURCE_DATE_EPOCH (default 1); --size-mib defaults to the tree's size and\n"
    "           a margin\n";

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
  // rootfs
  std::optional<std::string> output;
  std::optional<std::string> docker_archive;
  std::optional<std::string> image;
  std::optional<std::string> dir;
  std::optional<std::string> size_mib;

  bool HasRootfsFlags() const { return output || docker_archive || image || dir || size_mib; }
  bool HasPublishFlags() const {
    return private_key || releases_dir || source || make_current || !artifacts.empty();
  }
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
    if (name == "--output") slot = &args->output;
    if (name == "--docker-archive") slot = &args->docker_archive;
    if (name == "--image") slot = &args->image;
    if (name == "--dir") slot = &args->dir;
    if (name == "--size-mib") slot = &args->size_mib;
    if (slot == nullptr) return "unknown flag " + name;
    if (slot->has_value()) return name + " given twice";
    if (value.empty()) return name + " needs a value";
    *slot = value;
  }
  return std::nullopt;
}

int Keygen(const Args& args) {
  if (!args.private_key || args.releases_dir || args.source || args.make_current ||
      !args.artifacts.empty() || args.HasRootfsFlags()) {
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
  if (args.HasRootfsFlags()) return Usage("publish takes no rootfs flags");
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

int Rootfs(const Args& args) {
  if (args.HasPublishFlags()) {
    return Usage("rootfs takes --output, --docker-archive [--image] or --dir, and --size-mib");
  }
  sn::release_tool::RootfsRequest req;
  req.output = args.output.value_or("");
  req.docker_archive = args.docker_archive;
  req.image = args.image;
  req.dir = args.dir;
  if (args.size_mib) {
    absl::StatusOr<uint64_t> mib = sn::release_tool::ParseRootfsSizeMib(*args.size_mib);
    if (!mib.ok()) return Usage(std::string(mib.status().message()));
    req.size_mib = *mib;
  }
  absl::StatusOr<int64_t> epoch = sn::release_tool::RootfsEpochFromEnvironment();
  if (!epoch.ok()) return Usage(std::string(epoch.status().message()));
  req.epoch = *epoch;
  absl::Status valid = sn::release_tool::ValidateRootfsRequest(req);
  if (!valid.ok()) return Usage(std::string(valid.message()));
  // Layer names are UTF-8 (PAX); libarchive converts them to the locale's character set.
  std::setlocale(LC_CTYPE, "C.UTF-8");
  absl::StatusOr<sn::release_tool::RootfsResult> r = sn::release_tool::BuildRootfs(req);
  if (!r.ok()) return Refused(std::string(r.status().message()));
  std::printf("sha256:%s %" PRIu64 " %s\n", r->sha256.c_str(), r->size, req.output.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view first = sn::FirstArgument(argc, argv);
  if (first == "-h") first = "--help";
  if (std::optional<int> answered = sn::AnswerHelpOrVersion(first, "release", kUsage)) {
    return *answered;
  }
  if (argc < 2) return Usage("a command is required");
  sn::InitProcess("release");
  Args args;
  if (std::optional<std::string> error = Parse(argc, argv, &args)) return Usage(*error);
  const std::string command = argv[1];
  if (command == "keygen") return Keygen(args);
  if (command == "publish") return Publish(args);
  if (command == "rootfs") return Rootfs(args);
  return Usage("unknown command " + command);
}
