#include "agent/run.h"

#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/connection.h"
#include "agent/host_metrics.h"
#include "agent/operation_record.h"
#include "agent/privhelper_client.h"
#include "agent/privhelper_executor.h"
#include "agent/probe_health.h"
#include "agent/request_queue.h"
#include "agent/specification.h"
#include "agent/startup.h"
#include "agent/state_files.h"
#include "agent/ws_transport.h"
#include "common/asio_timer_queue.h"
#include "common/log.h"

namespace sn::agent {
namespace {

constexpr char kConnectPath[] = "/api/v1/sandbox-node/connect";
constexpr absl::Duration kPrivhelperCallDeadline = absl::Seconds(5);

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

  StartupInputs startup_inputs;
  startup_inputs.installation_id = identity->installation_id;
  startup_inputs.provider = identity->provider;
  startup_inputs.generation = identity->deployment_generation;
  startup_inputs.specification_digest = identity->specification_digest;
  RequestQueueOptions queue_options;
  queue_options.enrolled_generation = identity->deployment_generation;
  absl::StatusOr<VerifiedSpecification> spec = LoadSpecification(files, *identity);
  if (spec.ok()) {
    queue_options.images = spec->images;
    startup_inputs.specification = spec->bytes;
  } else {
    startup_inputs.specification_problem = std::string(spec.status().message());
    LogError("the enrolled generation's specification is missing or invalid; create answers "
             "unconfirmed",
             {{"error", startup_inputs.specification_problem}});
  }
  PrivhelperExecutorOptions exec_options;
  exec_options.socket_path = config.privhelper_socket;
  exec_options.specification_digest = identity->specification_digest;
  exec_options.installation_id = identity->installation_id;

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
  record.PruneEvery(&timers, kRecordPruneInterval, kRecordRetention);
  PrivhelperExecutor executor(exec_options, post);
  RequestQueue queue(queue_options, clock, &timers, &record, &executor);

  GrpcPrivhelperClient privhelper(config.privhelper_socket, kPrivhelperCallDeadline, post);
  // Registers the enrolled generation again when a probe finds privhelper no longer holds it
  // (its state was reset under the same installation identity); one attempt at a time.
  bool registering = false;
  auto register_again = [&] {
    if (registering || !startup_inputs.specification.has_value()) return;
    registering = true;
    privhelper.Register(startup_inputs.generation, *startup_inputs.specification,
                        startup_inputs.specification_digest, [&](absl::Status st) {
                          registering = false;
                          if (st.ok()) {
                            LogInfo("registered the enrolled generation with privhelper again");
                          } else {
                            LogError("privhelper refused the enrolled generation",
                                     {{"error", std::string(st.message())}});
                          }
                        });
  };
  ProcHostMetrics host(config.state_dir);
  ProbeHealthSource health(&privhelper, &host, clock,
                           EnrolledProvider{identity->deployment_generation,
                                            identity->specification_digest,
                                            identity->installation_id},
                           register_again);
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
  params.generation_management = config.generation_management;

  LogInfo("agent starting", {{"node_id", identity->node_id},
                             {"core_origin", origin->text},
                             {"deployment_generation", identity->deployment_generation}});
  absl::Status final_status = absl::OkStatus();
  PrivhelperStartup startup(startup_inputs, &privhelper, &privhelper, &timers,
                            Backoff(DefaultUniformRandom(), kPrivhelperRetryInitial,
                                    kPrivhelperRetryCap));
  std::unique_ptr<Connection> connection;  // made once privhelper is known to be ready
  startup.Run([&](absl::StatusOr<StartupFacts> facts) {
    if (!facts.ok()) {
      LogError(absl::StrCat("refusing to start: ", facts.status().message()));
      final_status = facts.status();
      io.stop();
      return;
    }
    params.limits = facts->limits;
    LogInfo("privhelper is this node's provider; connecting to Core",
            {{"max_active", facts->limits.max_active},
             {"max_retained", facts->limits.max_retained},
             {"backend_fingerprint", facts->backend_fingerprint}});
    connection = std::make_unique<Connection>(
        params, transport->get(), clock, &timers, &health, &epochs,
        Backoff(DefaultUniformRandom()), &queue, [&](absl::Status st) {
          final_status = std::move(st);
          io.stop();
        });
    connection->Start();
  });

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  std::unique_ptr<Timer> stop_deadline;
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    LogInfo("stopping", {{"signal", signo}});
    if (connection == nullptr) {  // still waiting for privhelper
      io.stop();
      return;
    }
    connection->Stop();
    // The close handshake is bounded; do not wait for it forever.
    stop_deadline = timers.After(absl::Seconds(10), [&io] { io.stop(); });
  });

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
