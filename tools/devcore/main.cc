// devcore: Core's side of the node protocol for development and tests (see devcore.h).
//   devcore --listen=127.0.0.1:0 --state-dir=DIR [--specification=FILE]
//           [--releases-dir=DIR] [--tls-cert=FILE --tls-key=FILE]
//   devcore --help | --version   (standard output, exit 0; common/build_info.h)
// The first stdout line is `listening on http(s)://HOST:PORT`. SIGINT/SIGTERM stop it.
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/signal_set.hpp>

#include "absl/status/status.h"
#include "common/build_info.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/process_init.h"
#include "common/asio_timer_queue.h"
#include "common/atomic_file.h"
#include "common/release/verify.h"
#include "common/wire/limits.h"
#include "tools/devcore/deployment.h"
#include "tools/devcore/devcore.h"
#include "tools/devcore/node_store.h"
#include "tools/devcore/server.h"
#include "tools/devcore/specification.h"

namespace {

constexpr char kUsage[] =
    "usage: devcore --state-dir=DIR [--listen=HOST:PORT] [--specification=FILE]\n"
    "               [--releases-dir=DIR] [--tls-cert=FILE --tls-key=FILE]\n"
    "       devcore --help | --version\n"
    "  --listen         HOST:PORT to listen on, HOST an IP address; port 0 picks a free port\n"
    "                   (default 127.0.0.1:0)\n"
    "  --state-dir      directory of devcore's durable state (required)\n"
    "  --specification  a spec section 6 specification document: the current deployment\n"
    "  --releases-dir   serve the spec section 6 release routes from DIR (tools/release)\n"
    "  --tls-cert       PEM certificate chain: serve https/wss (with --tls-key)\n"
    "  --tls-key        PEM private key of --tls-cert\n";

int Fail(const std::string& message) {
  std::fprintf(stderr, "devcore: %s\n", message.c_str());
  return 2;
}

struct Flags {
  std::string listen = "127.0.0.1:0";
  std::string state_dir;
  std::string specification;
  std::string releases_dir;
  std::string tls_cert;
  std::string tls_key;
};

// --name=value flags only; an unknown or malformed flag is an error naming it.
std::optional<std::string> ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) {
      return "expected --name=value, got: " + arg;
    }
    const std::string name = arg.substr(2, eq - 2);
    const std::string value = arg.substr(eq + 1);
    if (name == "listen") {
      flags->listen = value;
    } else if (name == "state-dir") {
      flags->state_dir = value;
    } else if (name == "specification") {
      flags->specification = value;
    } else if (name == "releases-dir") {
      flags->releases_dir = value;
    } else if (name == "tls-cert") {
      flags->tls_cert = value;
    } else if (name == "tls-key") {
      flags->tls_key = value;
    } else {
      return "unknown flag --" + name;
    }
  }
  return std::nullopt;
}

// Adds the specification at `path` and makes it current; with releases, the current
// generation must name its release's artifacts exactly.
absl::Status LoadSpecification(const std::string& path, const sn::devcore::ReleaseRoutes& releases,
                               sn::devcore::GenerationStore& generations) {
  auto bytes = sn::ReadSmallFile(path, sn::wire::kMaxHttpBodyBytes);
  if (!bytes.ok()) return bytes.status();
  auto spec = sn::devcore::ParseSpecification(*std::move(bytes));
  if (!spec.ok()) {
    return absl::InvalidArgumentError(path + ": " + std::string(spec.status().message()));
  }
  if (releases.enabled()) {
    auto manifest = releases.Manifest(spec->runtime_source);
    if (!manifest.ok()) {
      return absl::FailedPreconditionError("release " + spec->runtime_source + " of " + path +
                                           ": " + std::string(manifest.status().message()));
    }
    absl::Status ok = sn::release::CheckSpecificationAgainstManifest(spec->document, *manifest);
    if (!ok.ok()) return absl::InvalidArgumentError(path + ": " + std::string(ok.message()));
  }
  auto added = generations.Add(*spec);
  if (!added.ok()) return added.status();
  return generations.SetCurrent(spec->generation);
}

// Every generation a node's recorded deployment names must still be held.
absl::Status CheckDeploymentsHeld(const sn::devcore::NodeStore& store,
                                  const sn::devcore::GenerationStore& generations,
                                  const std::string& state_dir) {
  for (const sn::devcore::NodeRecord* node : store.Nodes()) {
    if (node->generation_management &&
        !sn::devcore::DeploymentFor(*node, generations).has_value()) {
      return absl::FailedPreconditionError(
          "node " + node->node_id + "'s deployment names a generation whose specification is "
          "not in " + state_dir + "/specifications");
    }
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view first = sn::FirstArgument(argc, argv);
  if (first == "-h") first = "--help";
  if (std::optional<int> answered = sn::AnswerHelpOrVersion(first, "devcore", kUsage)) {
    return *answered;
  }
  Flags flags;
  if (std::optional<std::string> error = ParseFlags(argc, argv, &flags)) {
    std::fputs(kUsage, stderr);
    return Fail(*error);
  }
  sn::InitProcess("devcore");
  const std::string& state_dir = flags.state_dir;
  if (state_dir.empty()) return Fail("--state-dir is required");

  auto store = sn::devcore::NodeStore::Open(state_dir);
  if (!store.ok()) return Fail(std::string(store.status().message()));

  auto generations = sn::devcore::GenerationStore::Open(state_dir);
  if (!generations.ok()) return Fail(std::string(generations.status().message()));
  const sn::devcore::ReleaseRoutes releases(flags.releases_dir);
  if (!flags.specification.empty()) {
    absl::Status loaded = LoadSpecification(flags.specification, releases, **generations);
    if (!loaded.ok()) return Fail(std::string(loaded.message()));
  }
  absl::Status held = CheckDeploymentsHeld(**store, **generations, state_dir);
  if (!held.ok()) return Fail(std::string(held.message()));

  boost::asio::io_context ioc(1);
  sn::AsioTimerQueue timers(ioc);
  sn::devcore::Devcore devcore(*std::move(store), *std::move(generations), flags.releases_dir,
                               sn::SystemClock::Get(), &timers);
  // One thread for the heavy, pure part of provider requests (Devcore::SetOffload); one, so
  // requests reach their nodes in the order they arrived.
  boost::asio::thread_pool offload(1);
  devcore.SetOffload([&ioc, &offload](std::function<void()> work, std::function<void()> then) {
    boost::asio::post(offload, [work = std::move(work), then = std::move(then),
                                guard = boost::asio::make_work_guard(ioc)]() mutable {
      work();
      boost::asio::post(guard.get_executor(), std::move(then));
    });
  });
  sn::devcore::ServerOptions options;
  options.listen = flags.listen;
  options.tls_cert = flags.tls_cert;
  options.tls_key = flags.tls_key;
  auto server = sn::devcore::Server::Start(ioc, &devcore, options);
  if (!server.ok()) return Fail(std::string(server.status().message()));

  std::printf("listening on %s\n", (*server)->url().c_str());
  std::fflush(stdout);
  sn::LogInfo("devcore started", {{"url", (*server)->url()}});

  boost::asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    sn::LogInfo("devcore stopping");
    (*server)->Stop();
  });
  ioc.run();
  offload.join();
  return 0;
}
