// privhelper --config=FILE
// privhelper --help | --version   (standard output, exit 0; common/build_info.h)
// Runs as root; serves the agent's uid only (see docs and privhelper/peer.h). Exits 2 on a
// configuration or start-up error, 0 after SIGTERM/SIGINT.
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/atomic_file.h"
#include "common/build_info.h"
#include "common/entry_points.h"
#include "common/log.h"
#include "common/process_init.h"
#include "privhelper/capabilities.h"
#include "privhelper/config.h"
#include "common/release/ed25519.h"
#include "privhelper/backends.h"
#include "privhelper/helpers/helper_manager.h"
#include "privhelper/program_path.h"
#include "privhelper/store/durable.h"
#include "privhelper/store/generations.h"
#include "privhelper/store/installation.h"
#include "privhelper/store/state_dir.h"
#include "privhelper/store/release_store.h"
#include "privhelper/rpc/listener.h"
#include "privhelper/rpc/server.h"

namespace {

constexpr char kUsage[] =
    "usage: privhelper --config=FILE\n"
    "       privhelper --help | --version\n"
    "  Runs as root and serves the node's agent (only the configuration's agent_uid) on the\n"
    "  unix socket its configuration names; SIGTERM or SIGINT stop it. Exit status: 0 after\n"
    "  SIGTERM/SIGINT, 2 for a usage, configuration or start-up error.\n";

// The native helper: beside this executable (an installation), else in native/ beside it (the
// build tree, //privhelper/native:native_helper).
std::string NativeHelperPath() {
  return sn::privhelper::ProgramPath("native_helper", "native/native_helper");
}

int Fail(std::string_view what, const absl::Status& s) {
  sn::LogError(what, {{"error", std::string(s.ToString())}});
  return 2;
}

namespace privhelper = sn::privhelper;
namespace store = sn::privhelper::store;

// Process settings made before any thread starts.
void TuneProcess() {
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
}

// The one flag, --config=FILE; "" on a usage error.
std::string ConfigPathFromFlags(int argc, char** argv) {
  std::string config_path;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    constexpr std::string_view kFlag = "--config=";
    if (arg.substr(0, kFlag.size()) != kFlag || arg.size() == kFlag.size()) return "";
    config_path = std::string(arg.substr(kFlag.size()));
  }
  return config_path;
}

// Signals are taken synchronously by the main thread; blocked before any thread starts.
sigset_t BlockStopSignals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return sigs;
}

// What privhelper owns on disk, opened and checked before anything is served.
struct Stores {
  std::string installation_id;
  std::unique_ptr<store::ReleaseStore> releases;
  std::unique_ptr<store::GenerationStore> generations;
};

// Opens the installation identity, the release store and the generation records in `state`;
// 0, or the exit status after logging what was refused.
int OpenStores(store::PosixFs& fs, const privhelper::Config& config, const sn::fs::Dir& state,
               uint32_t self, Stores* out) {
  absl::StatusOr<std::string> installation = store::LoadOrCreateInstallationId(fs, state, self);
  if (!installation.ok()) return Fail("installation identity refused", installation.status());
  sn::LogInfo("installation identity", {{"installation_id", *installation}});
  out->installation_id = *installation;
  absl::StatusOr<sn::release::PublicKey> key =
      sn::release::PublicKey::FromBase64(config.release_public_key);
  if (!key.ok()) return Fail("release_public_key refused", key.status());
  absl::StatusOr<std::unique_ptr<store::ReleaseStore>> releases =
      store::ReleaseStore::Open(fs, state, config.state_dir, self, *std::move(key));
  if (!releases.ok()) return Fail("release store refused", releases.status());
  out->releases = *std::move(releases);
  absl::StatusOr<std::unique_ptr<store::GenerationStore>> generations =
      store::GenerationStore::Open(fs, state, self, out->installation_id, config.provider,
                                   out->releases.get());
  if (!generations.ok()) return Fail("generation records refused", generations.status());
  out->generations = *std::move(generations);
  out->generations->SetMaxGenerations(config.max_generations);
  return 0;
}

// The native helpers' options: the generation's own Runtime helper when its release has one,
// each holding the generation's lease (shared) for its whole life.
privhelper::HelperOptions HelperOptionsFor(const privhelper::Config& config,
                                           const Stores& stores,
                                           const privhelper::Backend& backend) {
  store::GenerationStore* held = stores.generations.get();
  privhelper::HelperOptions ho;
  ho.helper_path = NativeHelperPath();
  ho.installation_id = stores.installation_id;
  ho.provider_flags = backend.helper_flags;
  ho.provider = config.provider;
  ho.idle_timeout = absl::Seconds(config.helper_idle_seconds);  // the reaper thread uses it
  ho.helper_path_for = [held](int64_t g) { return held->HelperPath(g); };
  if (backend.make_vm_actions) ho.vm_actions = backend.make_vm_actions(held);
  ho.open_lease = [held](int64_t g) -> absl::StatusOr<int> {
    absl::StatusOr<std::unique_ptr<store::FileLock>> lease = held->LockShared(g);
    if (!lease.ok()) return lease.status();
    // The helper manager keeps its own descriptor of the same open file description (the lock
    // goes with the description) and closes it only after waitpid.
    const int fd = fcntl((*lease)->fd(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return sn::ErrnoStatus(errno, "dup lease");
    return fd;
  };
  return ho;
}

// Waits for SIGTERM or SIGINT; once start-up is over, its pages and its freed heap go back to
// the kernel (common/process_init.h).
int WaitForStopSignal(const sigset_t& sigs) {
  const timespec release_after{sn::kReleaseStartupPagesAfterSeconds, 0};
  int sig = sigtimedwait(&sigs, nullptr, &release_after);
  if (sig < 0) {
    sn::ReleaseStartupPages();
    sn::ReturnFreedMemory();
    sigwait(&sigs, &sig);
  }
  return sig;
}

}  // namespace

int sn::privhelper::Main(int argc, char** argv) {
  if (std::optional<int> answered =
          sn::AnswerHelpOrVersion(sn::FirstArgument(argc, argv), "privhelper", kUsage)) {
    return *answered;
  }
  TuneProcess();
  const std::string config_path = ConfigPathFromFlags(argc, argv);
  if (config_path.empty()) {
    fprintf(stderr, "usage: privhelper --config=FILE\n");
    return 2;
  }
  absl::StatusOr<Config> config = LoadConfig(config_path);
  if (!config.ok()) return Fail("invalid configuration", config.status());
  store::PosixFs& fs = *store::PosixFs::Get();
  const uint32_t self = geteuid();
  absl::StatusOr<store::Dir> state = store::OpenStateDir(fs, config->state_dir, self);
  if (!state.ok()) return Fail("state_dir refused", state.status());
  const sigset_t sigs = BlockStopSignals();

  Stores stores;
  if (int rc = OpenStores(fs, *config, *state, self, &stores); rc != 0) return rc;
  // Before anything is served: the sandboxes an earlier privhelper's creates may still land in.
  absl::StatusOr<std::string> boot_id = SandboxFence::ReadBootId();
  if (!boot_id.ok()) return Fail("cannot learn the boot id", boot_id.status());
  absl::StatusOr<std::unique_ptr<SandboxFence>> fence =
      SandboxFence::Open(&fs, *state, *std::move(boot_id));
  if (!fence.ok()) return Fail("the sandbox fence cannot be opened", fence.status());
  absl::StatusOr<Backend> backend = MakeBackend(*config, stores.installation_id);
  if (!backend.ok()) return Fail("provider refused", backend.status());
  if (backend->recover) {
    if (absl::Status recovered = backend->recover(); !recovered.ok()) {
      return Fail("the provider's store cannot be recovered", recovered);
    }
  }
  store::GenerationStore* held = stores.generations.get();
  // Restart recovery: every ready generation's Runtime bytes verified and its images looked
  // up before anything is served; what is missing needs repair (generations.h).
  held->Recheck(backend->importer.get(), /*verify_bytes=*/true);
  // The socket is bound while privhelper still has one thread (the helper manager's reaper is
  // its first), so that every capability but CAP_SETPCAP (the helpers' spawn) is dropped
  // before any thread could inherit it. It appears once the installation identity is durable
  // and every ready generation was checked, as before.
  absl::StatusOr<std::unique_ptr<Listener>> listener =
      Listener::Create(config->socket, config->agent_uid);
  if (!listener.ok()) return Fail("cannot create the socket", listener.status());
  if (absl::Status dropped = DropCapabilitiesAfterStartup(backend->capabilities); !dropped.ok()) {
    return Fail("cannot drop capabilities", dropped);
  }

  auto helpers = std::make_shared<HelperManager>(HelperOptionsFor(*config, stores, *backend));
  ServerOptions opts;
  opts.socket_path = config->socket;
  opts.agent_uid = config->agent_uid;
  opts.helpers = helpers;
  opts.installation_id = stores.installation_id;
  opts.generations = held;
  opts.releases = stores.releases.get();
  opts.importer = backend->importer.get();
  opts.retirement = backend->retirement;
  opts.max_active = config->max_active;
  opts.max_retained = config->max_retained;
  opts.fence = fence->get();
  absl::StatusOr<std::unique_ptr<PrivHelperServer>> server =
      PrivHelperServer::Start(opts, std::move(backend->provider), *std::move(listener));
  if (!server.ok()) return Fail("cannot start", server.status());

  const int sig = WaitForStopSignal(sigs);
  LogInfo("privhelper stopping", {{"signal", sig}});
  (*server)->Shutdown();
  server->reset();
  held->StopOverlappedLoad();  // its thread uses the backend's importer, which goes first
  helpers.reset();  // closes helper sockets and waits for every helper (waitpid)
  return 0;
}
