// devcore: Core's side of the node protocol for development and tests (see devcore.h).
//   devcore --listen=127.0.0.1:0 --state-dir=DIR [--specification=FILE]
//           [--tls-cert=FILE --tls-key=FILE]
// The first stdout line is `listening on http(s)://HOST:PORT`. SIGINT/SIGTERM stop it.
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/clock.h"
#include "common/log.h"
#include "tools/devcore/asio_timer_queue.h"
#include "tools/devcore/devcore.h"
#include "tools/devcore/node_store.h"
#include "tools/devcore/server.h"
#include "tools/devcore/specification.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0", "HOST:PORT to listen on (port 0: any free port)");
ABSL_FLAG(std::string, state_dir, "", "directory of devcore's durable state (required)");
ABSL_FLAG(std::string, specification, "",
          "a spec §6 specification document: the current deployment generation");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain: serve https/wss (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "devcore: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "devcore --listen=HOST:PORT --state-dir=DIR [--specification=FILE] "
      "[--tls-cert=FILE --tls-key=FILE]");
  absl::ParseCommandLine(argc, argv);
  sn::InitLogging("devcore");
  const std::string state_dir = absl::GetFlag(FLAGS_state_dir);
  if (state_dir.empty()) return Fail("--state-dir is required");

  auto store = sn::devcore::NodeStore::Open(state_dir);
  if (!store.ok()) return Fail(std::string(store.status().message()));

  std::optional<sn::devcore::Specification> spec;
  if (const std::string path = absl::GetFlag(FLAGS_specification); !path.empty()) {
    auto loaded = sn::devcore::LoadSpecification(path);
    if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
    absl::Status published = sn::devcore::PublishSpecification(state_dir, *loaded);
    if (!published.ok()) return Fail(std::string(published.message()));
    spec = *std::move(loaded);
  }

  boost::asio::io_context ioc(1);
  sn::devcore::AsioTimerQueue timers(ioc);
  sn::devcore::Devcore devcore(*std::move(store), std::move(spec), sn::SystemClock::Get(),
                               &timers);
  sn::devcore::ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key = absl::GetFlag(FLAGS_tls_key);
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
  return 0;
}
