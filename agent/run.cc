#include "agent/run.h"

#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/asio_timer_queue.h"
#include "agent/connection.h"
#include "agent/enroll.h"
#include "agent/host_metrics.h"
#include "agent/operation_record.h"
#include "agent/privhelper_client.h"
#include "agent/privhelper_executor.h"
#include "agent/probe_health.h"
#include "agent/request_queue.h"
#include "agent/state_files.h"
#include "agent/ws_transport.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "common/wire/http_bodies.h"
#include "common/wire/limits.h"

namespace sn::agent {
namespace {

constexpr char kConnectPath[] = "/api/v1/sandbox-node/connect";
// Completed operation records are kept at least this long (spec: >= 24 h).
constexpr absl::Duration kRecordRetention = absl::Hours(48);
constexpr absl::Duration kProbeDeadline = absl::Seconds(5);

struct LoadedSpecification {
  std::set<std::string> images;
  std::map<std::string, std::string> native_images;
};

// The enrolled generation's stored specification, verified again against its digest.
absl::StatusOr<LoadedSpecification> LoadSpecification(const StateFiles& files,
                                                      const NodeIdentity& identity) {
  const std::string path = files.SpecificationPath(identity.deployment_generation);
  absl::StatusOr<std::string> bytes = ReadSmallFile(path, wire::kMaxHttpBodyBytes);
  if (!bytes.ok()) return bytes.status();
  if (Sha256Hex(*bytes) != identity.specification_digest) {
    return absl::DataLossError(absl::StrCat(path, ": SHA-256 differs from the enrolled digest"));
  }
  absl::StatusOr<wire::SpecificationDocument> doc = wire::DecodeSpecificationDocument(*bytes);
  if (!doc.ok()) return doc.status();
  LoadedSpecification spec;
  for (const wire::SpecImage& image : doc->images) {
    spec.images.insert(image.name);
    spec.native_images[image.name] = image.identities.front();
  }
  return spec;
}

}  // namespace

int RunAgent(const AgentConfig& config) {
  StateFiles files(config.state_dir);
  absl::StatusOr<NodeIdentity> identity = files.ReadIdentity();
  if (!identity.ok()) {
    LogError("this node is not enrolled or its identity is unreadable; run `agent enroll`",
             {{"error", std::string(identity.status().message())}});
    return kExitFailure;
  }
  absl::StatusOr<std::string> credential = files.ReadCredential();
  if (!credential.ok()) {
    LogError("cannot read the node credential",
             {{"error", std::string(credential.status().message())}});
    return kExitFailure;
  }
  std::string secret(absl::StripTrailingAsciiWhitespace(*credential));
  absl::StatusOr<Origin> origin = ParseOrigin(identity->core_origin, config.insecure_allow_http);
  if (!origin.ok()) {
    LogError("the enrolled Core origin is not usable with this configuration",
             {{"core_origin", identity->core_origin},
              {"error", std::string(origin.status().message())}});
    return kExitUsage;
  }
  if (origin->text != config.origin.text) {
    LogWarning("core_origin differs from the enrolled origin; dialing the enrolled one",
               {{"enrolled", origin->text}, {"configured", config.origin.text}});
  }

  RequestQueueOptions queue_options;
  queue_options.enrolled_generation = identity->deployment_generation;
  PrivhelperExecutorOptions exec_options;
  exec_options.socket_path = config.privhelper_socket;
  exec_options.specification_digest = identity->specification_digest;
  exec_options.installation_id = identity->installation_id;
  exec_options.max_active = config.max_active;
  exec_options.max_retained = config.max_retained;
  absl::StatusOr<LoadedSpecification> spec = LoadSpecification(files, *identity);
  if (spec.ok()) {
    queue_options.images = spec->images;
    exec_options.native_images = spec->native_images;
  } else {
    LogError("the enrolled generation's specification is missing or invalid; create answers "
             "unconfirmed",
             {{"error", std::string(spec.status().message())}});
  }

  boost::asio::io_context io;
  auto post = [&io](std::function<void()> fn) { boost::asio::post(io, std::move(fn)); };
  const Clock* clock = SystemClock::Get();
  AsioTimerQueue timers(io);

  OperationRecord record(absl::StrCat(config.state_dir, "/operations"), clock);
  absl::Status recovered = record.Recover(kRecordRetention);
  if (!recovered.ok()) {
    LogError("cannot recover the operation record",
             {{"error", std::string(recovered.message())}});
    return kExitFailure;
  }
  PrivhelperExecutor executor(exec_options, post);
  RequestQueue queue(queue_options, clock, &timers, &record, &executor);

  GrpcProber prober(config.privhelper_socket, kProbeDeadline, post);
  ProcHostMetrics host(config.state_dir);
  ProbeHealthSource health(&prober, &host, clock, identity->deployment_generation,
                           identity->installation_id);
  FileEpochStore epochs(files.OwnerEpochPath());

  WsTarget target;
  target.origin = *origin;
  target.target = absl::StrCat(kConnectPath, "?node_id=", identity->node_id);
  target.credential = secret;
  target.ca_bundle = config.ca_bundle;
  absl::StatusOr<std::unique_ptr<WsTransport>> transport =
      WsTransport::Create(io, std::move(target));
  if (!transport.ok()) {
    LogError("cannot set up the connection to Core",
             {{"error", std::string(transport.status().message())}});
    return kExitUsage;
  }

  ConnectionParams params;
  params.node_id = identity->node_id;
  params.installation_id = identity->installation_id;
  params.provider = identity->provider;
  params.deployment_generation = identity->deployment_generation;
  params.specification_digest = identity->specification_digest;
  params.max_active = config.max_active;
  params.max_retained = config.max_retained;
  params.generation_management = config.generation_management;

  absl::Status final_status = absl::OkStatus();
  Connection connection(params, transport->get(), clock, &timers, &health, &epochs,
                        Backoff(DefaultUniformRandom()), &queue, [&](absl::Status st) {
                          final_status = std::move(st);
                          io.stop();
                        });

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  std::unique_ptr<Timer> stop_deadline;
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    LogInfo("stopping", {{"signal", signo}});
    connection.Stop();
    // The close handshake is bounded; do not wait for it forever.
    stop_deadline = timers.After(absl::Seconds(10), [&io] { io.stop(); });
  });

  LogInfo("agent starting", {{"node_id", identity->node_id},
                             {"core_origin", origin->text},
                             {"deployment_generation", identity->deployment_generation}});
  connection.Start();
  io.run();

  if (absl::IsUnauthenticated(final_status)) {
    LogError(absl::StrCat("exiting: ", final_status.message(),
                          "; re-enroll the node with `agent enroll`"));
    return kExitCredentialRejected;
  }
  if (!final_status.ok()) return kExitFailure;
  LogInfo("agent stopped");
  return kExitOk;
}

}  // namespace sn::agent
