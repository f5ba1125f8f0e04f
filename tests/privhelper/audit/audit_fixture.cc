#include "tests/privhelper/audit/audit_fixture.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/sha256.h"
#include "common/wire/http_bodies.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/docker/inventory.h"

extern char** environ;

namespace sn::testing {
namespace {

std::string Runfile(const std::string& rel) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  return (srcdir && ws) ? std::string(srcdir) + "/" + ws + "/" + rel : rel;
}

void Install(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
  chmod(to.c_str(), 0755);
}

bool SocketAccepts(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

CallResult ParseLine(const std::string& line) {
  CallResult r;
  for (absl::string_view field : absl::StrSplit(line, ' ')) {
    std::pair<std::string, std::string> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
    if (kv.first == "call") (void)absl::SimpleAtoi(kv.second, &r.call);
    if (kv.first == "status") (void)absl::SimpleAtoi(kv.second, &r.status);
    if (kv.first == "error_code") r.error_code = kv.second;
    if (kv.first == "refusal") r.refusal = kv.second;
    if (kv.first == "ms") (void)absl::SimpleAtoi(kv.second, &r.ms);
    if (kv.first == "diagnostic") r.diagnostic = kv.second;
    if (kv.first == "state") r.state = kv.second;
    if (kv.first == "missing") (void)absl::SimpleAtoi(kv.second, &r.missing);
    if (kv.first == "partial") (void)absl::SimpleAtoi(kv.second, &r.partial);
    if (kv.first == "outcome") r.outcome = kv.second;
    if (kv.first == "reason") r.reason = kv.second;
  }
  const size_t resp = line.find("response: ");
  if (resp != std::string::npos) r.response = line.substr(resp + 10);
  return r;
}

}  // namespace

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool PathExists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

ProcStatus ReadProcStatus(pid_t pid) {
  ProcStatus s;
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    auto value = [&line](const char* key, int64_t* out) {
      if (line.rfind(key, 0) != 0) return;
      std::string rest = line.substr(strlen(key));
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::StripSuffix(rest, "kB")), out);
    };
    value("VmHWM:", &s.vm_hwm_kib);
    value("VmRSS:", &s.vm_rss_kib);
    value("Threads:", &s.threads);
  }
  return s;
}

std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  const std::string task = absl::StrCat("/proc/", pid, "/task");
  DIR* d = opendir(task.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::istringstream in(Slurp(absl::StrCat(task, "/", e->d_name, "/children")));
    pid_t child;
    while (in >> child) out.push_back(child);
  }
  closedir(d);
  return out;
}

std::unique_ptr<PrivhelperProcess> PrivhelperProcess::Start(const Options& options) {
  std::unique_ptr<PrivhelperProcess> p(new PrivhelperProcess());
  const std::string bin = p->dir_.File("bin");
  mkdir(bin.c_str(), 0755);
  Install(Runfile("privhelper/privhelper"), bin + "/privhelper");
  Install(Runfile("privhelper/native/native_helper"), bin + "/native_helper");
  Install(Runfile("tests/privhelper/audit/attack_client"), bin + "/attack_client");
  Install(Runfile("tools/release/release"), bin + "/release");
  {
    const std::string cmd = absl::StrCat(bin, "/release keygen --private-key=",
                                         p->dir_.File("release.key"), " > ",
                                         p->dir_.File("release.pub"));
    EXPECT_EQ(system(cmd.c_str()), 0) << "release keygen";
    p->public_key_ = std::string(absl::StripAsciiWhitespace(Slurp(p->dir_.File("release.pub"))));
  }
  const std::string run = p->dir_.File("run");
  mkdir(run.c_str(), 0755);
  chmod(run.c_str(), 0755);
  p->socket_ = run + "/ph.sock";
  p->WriteConfig(options);
  if (!p->Spawn(/*truncate_log=*/true)) return nullptr;
  return p;
}

void PrivhelperProcess::WriteConfig(const Options& options) {
  nlohmann::json config = {{"socket", socket_},
                           {"agent_uid", kAgentUid},
                           {"state_dir", dir_.File("state")},
                           {"provider", "docker"},
                           {"docker_socket", options.docker_socket},
                           {"max_active", options.max_active},
                           {"max_retained", options.max_retained},
                           {"release_public_key", public_key_}};
  const std::string config_path = dir_.File("privhelper.json");
  { std::ofstream(config_path) << config.dump(); }
  chmod(config_path.c_str(), 0600);
}

bool PrivhelperProcess::RestartWithLimits(int64_t max_active, int64_t max_retained) {
  Stop();
  Options o;
  o.max_active = max_active;
  o.max_retained = max_retained;
  WriteConfig(o);
  return Spawn(/*truncate_log=*/false);
}

bool PrivhelperProcess::Spawn(bool truncate_log) {
  std::string exe = dir_.File("bin/privhelper");
  std::string flag = "--config=" + dir_.File("privhelper.json");
  std::vector<char*> argv = {exe.data(), flag.data(), nullptr};
  const std::string log = dir_.File("privhelper.log");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(),
                                   O_WRONLY | O_CREAT | (truncate_log ? O_TRUNC : O_APPEND), 0600);
  if (posix_spawn(&pid_, exe.c_str(), &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_GT(pid_, 0);
  // A real process: poll (bounded) until its socket accepts connections.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!SocketAccepts(socket_)) {
    if (std::chrono::steady_clock::now() > until || !Alive()) {
      ADD_FAILURE() << "privhelper did not start:\n" << Log();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void PrivhelperProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

bool PrivhelperProcess::Restart() {
  if (pid_ > 0) return false;
  return Spawn(/*truncate_log=*/false);
}

PrivhelperProcess::~PrivhelperProcess() {
  if (pid_ > 0) Stop();
}

std::string PrivhelperProcess::Log() const { return Slurp(dir_.File("privhelper.log")); }

int PrivhelperProcess::CountLog(const std::string& needle) const {
  const std::string log = Log();
  int n = 0;
  for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
  return n;
}

bool PrivhelperProcess::Alive() const {
  int status = 0;
  return pid_ > 0 && waitpid(pid_, &status, WNOHANG) == 0;
}

int PrivhelperProcess::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<CallResult> PrivhelperProcess::Attack(const std::vector<std::string>& args) const {
  static std::atomic<int> counter{0};  // tests call Attack from several threads
  const std::string out_path = dir_.File(absl::StrCat("attack-", ++counter, ".out"));
  int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  std::vector<std::string> all = {dir_.File("bin/attack_client"), "--socket=" + socket_};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  char* envp[] = {nullptr};
  int rc = RunAsUser(kAgentUid, kAgentGid, [&]() -> int {
    dup2(out, 1);
    execve(argv[0], argv.data(), envp);
    return 127;
  });
  close(out);
  EXPECT_EQ(rc, 0) << "attack_client failed to run";
  std::vector<CallResult> results;
  std::istringstream in(Slurp(out_path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("call=", 0) == 0) results.push_back(ParseLine(line));
  }
  return results;
}

std::string PrivhelperProcess::InstallationId() const {
  nlohmann::json doc = nlohmann::json::parse(Slurp(dir_.File("state/installation.json")), nullptr, false);
  return doc.is_object() && doc.contains("installation_id") ? doc["installation_id"].get<std::string>()
                                                            : "";
}

bool DockerAnswers() {
  docker::BeastDockerEngine engine(kHostDockerSocket);
  absl::StatusOr<docker::HttpResponse> ping = engine.Request("GET", "/_ping", "", {});
  return ping.ok() && ping->status == 200;
}

std::string BusyboxImageId() {
  static const std::string id = [] {
    ShortTempDir dir;
    const std::string root = dir.File("rootfs");
    const std::string cmd = absl::StrCat(
        "set -e; mkdir -p ", root, "/bin ", root, "/tmp; chmod 1777 ", root,
        "/tmp; cp /bin/busybox ", root, "/bin/; for a in sh sleep cat echo ls head true false "
        "touch test yes; do ln -s busybox ", root, "/bin/$a; done; tar -C ", root,
        " -cf - . | docker import - sn-audit-busybox:1 >/dev/null && docker image inspect "
        "--format '{{.Id}}' sn-audit-busybox:1 > ", dir.File("id"));
    if (system(cmd.c_str()) != 0) return std::string();
    return std::string(absl::StripAsciiWhitespace(Slurp(dir.File("id"))));
  }();
  return id;
}

std::string BusyboxArchive() {
  static const std::string path = [] {
    static ShortTempDir dir;  // lives for the test binary
    const std::string archive = dir.File("busybox.tar");
    // Saved by its ID, not its tag: test binaries running at once each import the image and
    // move the tag, and the archive must produce exactly the ID this binary's specifications
    // name (privhelper derives the identity from the archive: docs/protocol.md 21a).
    const std::string cmd = absl::StrCat("docker save ", BusyboxImageId(), " -o ", archive,
                                         " && chmod 0644 ", archive);
    if (BusyboxImageId().empty() || system(cmd.c_str()) != 0) return std::string();
    return archive;
  }();
  return path;
}

std::vector<CallResult> PrivhelperProcess::PrepareBusybox(int64_t generation,
                                                          const std::string& source) {
  const std::string archive = BusyboxArchive();
  EXPECT_FALSE(archive.empty()) << "docker save of the busybox image failed";
  const std::string releases = dir_.File("releases");
  mkdir(releases.c_str(), 0755);
  const std::string publish =
      absl::StrCat(dir_.File("bin/release"), " publish --releases-dir=", releases, " --source=",
                   source, " --private-key=", dir_.File("release.key"), " image=", archive,
                   " >/dev/null 2>&1");
  EXPECT_EQ(system(publish.c_str()), 0) << "release publish";
  const std::string bytes = Slurp(archive);
  wire::SpecificationDocument d;
  d.generation = generation;
  d.provider = "docker";
  d.runtime_source = source;
  d.artifacts.push_back(
      {"busybox.tar", "image", Sha256Hex(bytes), static_cast<int64_t>(bytes.size())});
  d.images.push_back({"busybox", "busybox.tar", {BusyboxImageId()}});
  const std::string spec = wire::EncodeSpecificationDocument(d);
  const std::string spec_path = dir_.File(absl::StrCat("spec-", generation, ".json"));
  { std::ofstream(spec_path) << spec; }
  chmod(spec_path.c_str(), 0644);
  std::vector<CallResult> steps;
  auto step = [&](std::vector<std::string> args) {
    std::vector<CallResult> r = Attack(args);
    EXPECT_EQ(r.size(), 1u);
    if (r.empty()) return false;
    EXPECT_EQ(r[0].status, 0) << args[0];
    EXPECT_EQ(r[0].diagnostic, "DIAGNOSTIC_UNSPECIFIED") << args[0] << "\n" << Log();
    steps.push_back(r[0]);
    return r[0].status == 0 && r[0].diagnostic == "DIAGNOSTIC_UNSPECIFIED";
  };
  const std::string g = absl::StrCat(generation);
  if (!step({"--method=AdoptRelease", "--release_dir=" + releases + "/" + source,
             "--request=source: \"" + source + "\""})) {
    return steps;
  }
  if (!step({"--method=BeginPreparation", "--spec_file=" + spec_path,
             absl::StrCat("--request=generation: ", g, " specification_digest: \"",
                          Sha256Hex(spec), "\"")})) {
    return steps;
  }
  if (steps.back().missing > 0 &&
      !step({"--method=PutArtifact", "--artifact_file=" + releases + "/" + source + "/busybox.tar",
             absl::StrCat("--request=generation: ", g, " name: \"busybox.tar\"")})) {
    return steps;
  }
  step({"--method=FinishPreparation", "--request=generation: " + g});
  return steps;
}

std::string BusyboxSpecification(int64_t generation, const std::string& image_id) {
  wire::SpecificationDocument d;
  d.generation = generation;
  d.provider = "docker";
  d.runtime_source = "audit-1";
  d.artifacts.push_back({"busybox.tar", "image", std::string(64, '1'), 0});
  d.images.push_back({"busybox", "busybox.tar", {image_id}});
  return wire::EncodeSpecificationDocument(d);
}

std::string RandomUuid() {
  unsigned char b[16];
  std::ifstream("/dev/urandom", std::ios::binary).read(reinterpret_cast<char*>(b), sizeof b);
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  char out[37];
  snprintf(out, sizeof out,
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
  return out;
}

void RemoveInstallationContainers(const std::string& installation) {
  if (installation.empty()) return;
  docker::BeastDockerEngine e(kHostDockerSocket);
  docker::RequestOptions o;
  o.timeout = absl::Seconds(30);
  absl::StatusOr<std::vector<docker::SandboxContainer>> all =
      docker::ListSandboxes(e, installation, "", o);
  if (!all.ok()) return;
  for (const docker::SandboxContainer& c : *all) {
    (void)e.Request("DELETE", absl::StrCat("/v1.41/containers/", c.id, "?force=1&v=1"), "", o);
  }
}

}  // namespace sn::testing
