// privhelper --config=FILE
// Runs as root; serves the agent's uid only (see docs and privhelper/peer.h). Exits 2 on a
// configuration or start-up error, 0 after SIGTERM/SIGINT.
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "common/atomic_file.h"
#include "common/entry_points.h"
#include "common/log.h"
#include "common/process_init.h"
#include "privhelper/capabilities.h"
#include "privhelper/config.h"
#include "common/release/ed25519.h"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/docker/importer.h"
#include "privhelper/docker/docker_provider.h"
#include "privhelper/helpers/helper_manager.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/installation.h"
#include "privhelper/store/state_dir.h"
#include "privhelper/store/release_store.h"
#include "privhelper/rpc/listener.h"
#include "privhelper/rpc/server.h"

namespace {

// The path of `name` in the directory of this executable.
std::string BesideExecutable(const std::string& name) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return name;
  std::string self(buf, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + name;
}

// The native helper: beside this executable (an installation), else in native/ beside it (the
// build tree, //privhelper/native:native_helper).
std::string NativeHelperPath() {
  std::string installed = BesideExecutable("native_helper");
  if (access(installed.c_str(), X_OK) == 0) return installed;
  return BesideExecutable("native/native_helper");
}

int Fail(std::string_view what, const absl::Status& s) {
  sn::LogError(what, {{"error", std::string(s.ToString())}});
  return 2;
}

}  // namespace

int sn::privhelper::Main(int argc, char** argv) {
  // gRPC's "poll" engine, before gRPC starts. With its default (epoll1), the sync server's
  // polling threads hand the one epoll set of the process to each other on every event, so an
  // Execute woke two or three of them (5.4 voluntary switches per inspect); with "poll", the
  // thread that reads a call runs it and no other wakes (2.0: the call, the helper's answer).
  // Calls are still served concurrently (docs/performance.md, "Node overhead on inspect").
  setenv("GRPC_POLL_STRATEGY", "poll", 1);
  sn::InitProcess("privhelper");
  // Two malloc arenas instead of glibc's 8 per core: idle anonymous memory stays under 3 MiB
  // (docs/performance.md, "Idle memory"); privhelper's calls are few and short.
  mallopt(M_ARENA_MAX, 2);
  sn::KeepFreedMemoryWhileStreaming();
  std::string config_path;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    constexpr std::string_view kFlag = "--config=";
    if (arg.substr(0, kFlag.size()) == kFlag && arg.size() > kFlag.size()) {
      config_path = std::string(arg.substr(kFlag.size()));
    } else {
      fprintf(stderr, "usage: privhelper --config=FILE\n");
      return 2;
    }
  }
  if (config_path.empty()) {
    fprintf(stderr, "usage: privhelper --config=FILE\n");
    return 2;
  }

  absl::StatusOr<sn::privhelper::Config> config = sn::privhelper::LoadConfig(config_path);
  if (!config.ok()) return Fail("invalid configuration", config.status());
  namespace store = sn::privhelper::store;
  store::PosixFs& fs = *store::PosixFs::Get();
  const uint32_t self = geteuid();
  absl::StatusOr<store::Dir> state = store::OpenStateDir(fs, config->state_dir, self);
  if (!state.ok()) return Fail("state_dir refused", state.status());

  // Signals are taken synchronously by this thread; block them before any thread starts.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::string> installation = store::LoadOrCreateInstallationId(fs, *state, self);
  if (!installation.ok()) return Fail("installation identity refused", installation.status());
  sn::LogInfo("installation identity", {{"installation_id", *installation}});
  absl::StatusOr<sn::release::PublicKey> key =
      sn::release::PublicKey::FromBase64(config->release_public_key);
  if (!key.ok()) return Fail("release_public_key refused", key.status());
  absl::StatusOr<std::unique_ptr<store::ReleaseStore>> releases =
      store::ReleaseStore::Open(fs, *state, config->state_dir, self, *std::move(key));
  if (!releases.ok()) return Fail("release store refused", releases.status());
  absl::StatusOr<std::unique_ptr<store::GenerationStore>> generations =
      store::GenerationStore::Open(fs, *state, self, *installation, config->provider,
                                   releases->get());
  if (!generations.ok()) return Fail("generation records refused", generations.status());
  store::GenerationStore* held = generations->get();
  held->SetMaxGenerations(config->max_generations);


  auto engine = std::make_unique<sn::docker::BeastDockerEngine>(config->docker_socket);
  auto provider = std::make_unique<sn::privhelper::DockerProvider>(std::move(engine), *installation);
  sn::docker::BeastDockerEngine import_engine(config->docker_socket);
  sn::privhelper::DockerImporter importer(&import_engine);
  // Restart recovery: every ready generation's Runtime bytes verified and its images looked
  // up before anything is served; what is missing needs repair (generations.h).
  held->Recheck(&importer, /*verify_bytes=*/true);
  // The socket is bound while privhelper still has one thread (the helper manager's reaper is
  // its first), so that every capability but CAP_SETPCAP (the helpers' spawn) is dropped
  // before any thread could inherit it. It appears once the installation identity is durable
  // and every ready generation was checked, as before.
  absl::StatusOr<std::unique_ptr<sn::privhelper::Listener>> listener =
      sn::privhelper::Listener::Create(config->socket, config->agent_uid);
  if (!listener.ok()) return Fail("cannot create the socket", listener.status());
  if (absl::Status dropped = sn::privhelper::DropCapabilitiesAfterStartup(); !dropped.ok()) {
    return Fail("cannot drop capabilities", dropped);
  }

  sn::privhelper::HelperOptions ho;
  ho.helper_path = NativeHelperPath();
  ho.installation_id = *installation;
  ho.docker_socket = config->docker_socket;
  ho.provider = config->provider;
  ho.idle_timeout = absl::Seconds(config->helper_idle_seconds);  // the reaper thread uses it
  // A helper runs the generation's own Runtime helper when its release has one, and holds the
  // generation's lease (shared) for its whole life.
  ho.helper_path_for = [held](int64_t g) { return held->HelperPath(g); };
  ho.open_lease = [held](int64_t g) -> absl::StatusOr<int> {
    absl::StatusOr<std::unique_ptr<store::FileLock>> lease = held->LockShared(g);
    if (!lease.ok()) return lease.status();
    // The helper manager keeps its own descriptor of the same open file description (the lock
    // goes with the description) and closes it only after waitpid.
    const int fd = fcntl((*lease)->fd(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return sn::ErrnoStatus(errno, "dup lease");
    return fd;
  };
  auto helpers = std::make_shared<sn::privhelper::HelperManager>(ho);
  sn::privhelper::ServerOptions opts;
  opts.socket_path = config->socket;
  opts.agent_uid = config->agent_uid;
  opts.helpers = helpers;
  opts.installation_id = *installation;
  opts.generations = held;
  opts.releases = releases->get();
  opts.importer = &importer;
  opts.max_active = config->max_active;
  opts.max_retained = config->max_retained;
  absl::StatusOr<std::unique_ptr<sn::privhelper::PrivHelperServer>> server =
      sn::privhelper::PrivHelperServer::Start(opts, std::move(provider), *std::move(listener));
  if (!server.ok()) return Fail("cannot start", server.status());

  // Once start-up is over, its pages and its freed heap go back to the kernel
  // (common/process_init.h).
  const timespec release_after{sn::kReleaseStartupPagesAfterSeconds, 0};
  int sig = sigtimedwait(&sigs, nullptr, &release_after);
  if (sig < 0) {
    sn::ReleaseStartupPages();
    sn::ReturnFreedMemory();
    sigwait(&sigs, &sig);
  }
  sn::LogInfo("privhelper stopping", {{"signal", sig}});
  (*server)->Shutdown();
  server->reset();
  held->StopOverlappedLoad();  // its thread uses `importer`, which goes first
  helpers.reset();  // closes helper sockets and waits for every helper (waitpid)
  return 0;
}
