#include "agent/cli/run.h"

#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/connection/connection.h"
#include "agent/connection/ws_transport.h"
#include "agent/generations/core_downloads.h"
#include "agent/generations/manager.h"
#include "agent/generations/pins.h"
#include "agent/generations/prepare.h"
#include "agent/generations/privhelper_preparation.h"
#include "agent/generations/privhelper_retirement.h"
#include "agent/generations/progress_file.h"
#include "agent/generations/retention.h"
#include "agent/generations/retention_file.h"
#include "agent/generations/worker_preparer.h"
#include "agent/health/host_metrics.h"
#include "agent/health/probe_health.h"
#include "agent/health/startup.h"
#include "agent/metrics/agent_metrics.h"
#include "agent/metrics/metrics_server.h"
#include "agent/metrics/node_collectors.h"
#include "agent/metrics/node_status.h"
#include "agent/privhelper_rpc/deadlines.h"
#include "agent/privhelper_rpc/privhelper_client.h"
#include "agent/requests/operation_record.h"
#include "agent/requests/privhelper_executor.h"
#include "agent/requests/request_queue.h"
#include "agent/state/specification.h"
#include "agent/state/state_files.h"
#include "common/asio_timer_queue.h"
#include "common/log.h"
#include "common/process_init.h"
#include "proto/execute_stream.h"

namespace sn::agent {
namespace {

constexpr char kConnectPath[] = "/api/v1/sandbox-node/connect";

// What enrollment left in the state directory, checked against this configuration.
struct Enrollment {
  NodeIdentity identity;
  std::string secret;  // the node credential, trailing whitespace removed
  Origin origin;       // the enrolled Core origin (dialed even if the configuration differs)
};

// Reads the identity and the credential; kExitOk, or the exit code to stop with (logged).
int ReadEnrollment(const AgentConfig& config, const StateFiles& files, Enrollment* out) {
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
  out->identity = *std::move(identity);
  out->secret = std::string(absl::StripTrailingAsciiWhitespace(*credential));
  out->origin = *std::move(origin);
  return kExitOk;
}

// The images a held generation's stored specification names, for create's confirmation.
GenerationManager::SpecificationLookup SpecificationImages(const StateFiles& files,
                                                           std::string provider) {
  return [&files, provider = std::move(provider)](
             const GenerationRef& ref) -> std::optional<std::set<std::string>> {
    absl::StatusOr<VerifiedSpecification> spec =
        LoadSpecificationFor(files, ref.generation, ref.specification_digest, provider);
    if (!spec.ok()) {
      LogError("no usable specification for a held generation; create answers unconfirmed",
               {{"generation", ref.generation}, {"error", std::string(spec.status().message())}});
      return std::nullopt;
    }
    return spec->images;
  };
}

// Each preparation's progress, kept for `agent generations` (advisory: a failure is logged),
// and each attempt's end counted for the metrics.
GenerationManager::ProgressRecorder ProgressFile(const StateFiles& files, const Clock* clock,
                                                 AgentMetrics* metrics, NodeStatus* status) {
  return [&files, clock, metrics, status](const PreparationJob& job,
                                          const PreparationProgress& progress,
                                          const std::optional<PreparationOutcome>& finished) {
    status->PreparationProgress(job.ref.generation, progress.phase, progress.bytes_done,
                                finished.has_value());
    if (finished.has_value()) {
      metrics->PreparationFinished(finished->failure.has_value()
                                       ? DiagnosticCode(*finished->failure)
                                       : std::string_view("ready"));
    }
    absl::Status st = WriteProgressRecord(files.ProgressPath(job.ref.generation), job, progress,
                                          finished, clock->Now());
    if (!st.ok()) {
      LogWarning("cannot record preparation progress", {{"error", std::string(st.message())}});
    }
  };
}

// What the retention exchange learned, kept for `agent generations` (advisory).
std::function<void(const std::vector<RetentionStatus>&)> RetentionFile(const StateFiles& files,
                                                                      const Clock* clock) {
  return [&files, clock](const std::vector<RetentionStatus>& statuses) {
    absl::Status st = WriteRetentionRecord(files.RetentionPath(), statuses, clock->Now());
    if (!st.ok()) {
      LogWarning("cannot record what the retention exchange learned",
                 {{"error", std::string(st.message())}});
    }
  };
}

// Generation management (generations/manager.h): the deployment pins, and preparation on a
// thread of its own (worker_preparer.h) against Core's routes and privhelper's preparation
// RPCs. Members are built in order; each outlives the ones after it.
struct GenerationManagement {
  GenerationManagement(const AgentConfig& config, const Enrollment& node, const StateFiles& files,
                       const Clock* clock, TimerQueue* timers,
                       std::function<void(std::function<void()>)> post, AgentMetrics* metrics,
                       NodeStatus* status)
      : pins(files.DeploymentPinsPath()),
        core_downloads(node.origin, config.ca_bundle, node.secret),
        privhelper_preparation(config.privhelper_socket),
        preparer(Context(config, node, files), std::move(post)),
        manager(Options(config, node), clock, timers, &pins, &preparer,
                SpecificationImages(files, node.identity.provider),
                ProgressFile(files, clock, metrics, status)) {}

  PreparationContext Context(const AgentConfig& config, const Enrollment& node,
                             const StateFiles& files) {
    PreparationContext context;
    context.core = &core_downloads;
    context.privhelper = &privhelper_preparation;
    context.release_key = &*config.release_key;
    context.provider = node.identity.provider;
    context.store_specification = [&files](int64_t generation, const std::string& bytes) {
      return files.WriteSpecification(generation, bytes);
    };
    return context;
  }
  static GenerationManagerOptions Options(const AgentConfig& config, const Enrollment& node) {
    GenerationManagerOptions options;
    options.generation_management = config.generation_management;
    options.enrolled = {node.identity.deployment_generation,
                        node.identity.specification_digest};
    return options;
  }

  FilePinStore pins;
  HttpCoreDownloads core_downloads;
  GrpcPrivhelperPreparation privhelper_preparation;
  WorkerPreparer preparer;
  GenerationManager manager;
};

absl::StatusOr<std::unique_ptr<WsTransport>> MakeTransport(boost::asio::io_context& io,
                                                           const Enrollment& node,
                                                           const AgentConfig& config) {
  WsTarget target;
  target.origin = node.origin;
  target.target = absl::StrCat(kConnectPath, "?node_id=", node.identity.node_id);
  target.credential = node.secret;
  target.ca_bundle = config.ca_bundle;
  return WsTransport::Create(io, std::move(target));
}

ConnectionParams ConnectionParamsFor(const Enrollment& node, const AgentConfig& config,
                                     GenerationManager* generations,
                                     RetentionDecisions* retention) {
  ConnectionParams params;
  params.node_id = node.identity.node_id;
  params.installation_id = node.identity.installation_id;
  params.provider = node.identity.provider;
  params.deployment_generation = node.identity.deployment_generation;
  params.specification_digest = node.identity.specification_digest;
  params.generation_management = config.generation_management;
  params.generations = generations;
  params.retention = retention;
  return params;
}

// A probe's generation reports, with the provider's readiness diagnostic when it is not ready.
void ReportGenerations(GenerationManager& generations, const ProbeOutcome& probe) {
  generations.OnGenerationReports(
      probe.generations, probe.ready ? std::nullopt : std::optional<Diagnostic>(probe.diagnostic));
}

// Runs the event loop: connects (`connect`) once privhelper is known to be ready, stops on
// SIGINT/SIGTERM (the close handshake bounded to 10 s) or when the connection ends for good.
// Returns why the loop ended: OK after a signal, else the start-up or connection failure.
using ConnectFn = std::function<std::unique_ptr<Connection>(
    const StartupFacts& facts, std::function<void(absl::Status)> on_end)>;
absl::Status RunLoop(boost::asio::io_context& io, TimerQueue& timers, PrivhelperStartup& startup,
                     const ConnectFn& connect) {
  absl::Status final_status = absl::OkStatus();
  std::unique_ptr<Connection> connection;  // made once privhelper is known to be ready
  startup.Run([&](absl::StatusOr<StartupFacts> facts) {
    if (!facts.ok()) {
      LogError(absl::StrCat("refusing to start: ", facts.status().message()));
      final_status = facts.status();
      io.stop();
      return;
    }
    connection = connect(*facts, [&](absl::Status st) {
      final_status = std::move(st);
      io.stop();
    });
    connection->Start();
  });

  // Once start-up is over, its pages and its freed heap go back to the kernel
  // (common/process_init.h).
  std::unique_ptr<Timer> release_pages =
      timers.After(absl::Seconds(kReleaseStartupPagesAfterSeconds), [] {
        ReleaseStartupPages();
        ReturnFreedMemory();
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
  return final_status;
}

int ExitCodeFor(const absl::Status& final_status) {
  if (absl::IsUnauthenticated(final_status)) {
    LogError(absl::StrCat("exiting: ", final_status.message(),
                          "; re-enroll the node with `agent enroll`"));
    return kExitCredentialRejected;
  }
  if (!final_status.ok()) return kExitFailure;
  LogInfo("agent stopped");
  return kExitOk;
}

}  // namespace

int RunAgent(const AgentConfig& config) {
  StateFiles files(config.state_dir);
  Enrollment node;
  if (int code = ReadEnrollment(config, files, &node); code != kExitOk) return code;
  const NodeIdentity& identity = node.identity;

  boost::asio::io_context io;
  auto post = [&io](std::function<void()> fn) { boost::asio::post(io, std::move(fn)); };
  const Clock* clock = SystemClock::Get();
  AsioTimerQueue timers(io);

  static_assert(kOperationRecordMaxDefault == kMaxOperationRecords &&
                kOperationRecordMaxLow == kMinConfigurableOperationRecords &&
                kOperationRecordMaxHigh == kMaxConfigurableOperationRecords);
  OperationRecord record(files.OperationsDir(), clock, config.operation_record_max);
  if (absl::Status st = record.Recover(kRecordRetention); !st.ok()) {
    LogError("cannot recover the operation record", {{"error", std::string(st.message())}});
    return kExitFailure;
  }
  record.PruneEvery(&timers, kRecordPruneInterval, kRecordRetention);

  // What `GET /metrics` shows (agent/metrics): counted events, and the state the collectors
  // read at each scrape.
  AgentMetrics metrics;
  NodeStatus status(clock);  // `agent status`'s live view (GET /status on the state socket)
  std::optional<ProbeOutcome> last_probe;
  int64_t owner_epoch = 0;
  const Connection* current = nullptr;  // set once start-up made the connection

  GenerationManagement management(config, node, files, clock, &timers, post, &metrics, &status);
  GenerationManager& generations = management.manager;
  if (absl::Status st = generations.Start(); !st.ok()) {
    LogError("the deployment pins are unreadable; refusing to start (inspect the file)",
             {{"error", std::string(st.message())}});
    return kExitFailure;
  }

  PrivhelperExecutorOptions exec_options;
  exec_options.socket_path = config.privhelper_socket;
  exec_options.digest_of = [&generations](int64_t g) { return generations.DigestOf(g); };
  exec_options.installation_id = identity.installation_id;
  PrivhelperExecutor executor(exec_options, io);
  RequestQueueOptions queue_options;
  queue_options.gate = &generations;
  // Payloads wait in the agent until privhelper's admission bound has room for them
  // (agent/requests/request_queue.h; docs/protocol.md 23a).
  queue_options.payload_bytes_limit = privhelper::kMaxInflightRequestBytes;
  queue_options.payload_overhead_bytes = privhelper::kMaxRequestMessageBytes;
  queue_options.on_answered = [&metrics, &status](std::string_view op, std::string_view outcome,
                                                  absl::Duration latency) {
    metrics.RequestAnswered(op, outcome, latency);
    status.RequestAnswered(op, outcome);
  };
  RequestQueue queue(queue_options, clock, &timers, &record, &executor);

  // Retention (generations/retention.h): Core's drop grants, the local references rechecked
  // at each, and privhelper's CollectGeneration on a worker thread of its own.
  GrpcGenerationCollector collector(config.privhelper_socket, post);
  RetentionDecisions retention(
      clock, &generations, [&queue](int64_t g) { return queue.CallsOn(g); }, &collector,
      RetentionFile(files, clock));

  GrpcPrivhelperClient privhelper(config.privhelper_socket, kProbeDeadline, post);
  ProcHostMetrics host(config.state_dir);
  ProbeHealthSource health(
      &privhelper, &host, clock,
      EnrolledProvider{identity.deployment_generation, identity.specification_digest,
                       identity.installation_id, config.generation_management},
      [&generations, &last_probe, &status](const ProbeOutcome& probe) {
        last_probe = probe;
        status.ProbeAnswered();
        ReportGenerations(generations, probe);
      },
      [&generations] { return generations.EnrolledNotHeldDiagnostic(); },
      [&generations, &status](Diagnostic d) {
        status.ProbeFailed();
        generations.OnProbeFailed(d);
      });
  FileEpochStore epochs(files.OwnerEpochPath());

  absl::StatusOr<std::unique_ptr<WsTransport>> transport = MakeTransport(io, node, config);
  if (!transport.ok()) {
    LogError("cannot set up the connection to Core",
             {{"error", std::string(transport.status().message())}});
    return kExitUsage;
  }
  ConnectionParams params = ConnectionParamsFor(node, config, &generations, &retention);
  params.events.live = [&owner_epoch, &status](int64_t epoch) {
    owner_epoch = epoch;
    status.Live();
  };
  params.events.redial = [&metrics, &status](std::string_view why) {
    metrics.Redial(why);
    status.Redial(why);
  };
  params.events.heartbeat_sent = [&metrics] { metrics.HeartbeatSent(); };
  params.events.heartbeat_missed = [&metrics] { metrics.HeartbeatMissed(); };
  params.events.retention = [&metrics](std::string_view outcome) {
    metrics.RetentionExchange(outcome);
  };
  const NodeView view{&queue, &generations, [&current] { return current; }, &last_probe,
                      &owner_epoch};
  AddNodeCollectors(metrics, view);
  std::unique_ptr<MetricsServer> metrics_server;
  if (config.metrics.has_value()) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> served =
        MetricsServer::Start(io, *config.metrics, [&metrics] { return metrics.Render(); });
    if (!served.ok()) {
      LogError("cannot serve metrics", {{"error", std::string(served.status().message())}});
      return kExitFailure;
    }
    metrics_server = *std::move(served);
    LogInfo("serving metrics", {{"address", metrics_server->address()}});
  }
  // `agent status` asks the running agent here (0600: the agent's user, and root).
  std::unique_ptr<MetricsServer> status_server;
  {
    absl::StatusOr<std::unique_ptr<MetricsServer>> served = MetricsServer::Start(
        io, MetricsListen{StatusSocketPath(config.state_dir), "", 0},
        {{"/status", "application/json", [&status, &view] { return status.Json(view); }}}, 0600);
    if (served.ok()) {
      status_server = *std::move(served);
    } else {
      LogWarning("no status socket: `agent status` shows only durable facts",
                 {{"error", std::string(served.status().message())}});
    }
  }

  LogInfo("agent starting", {{"node_id", identity.node_id},
                             {"core_origin", node.origin.text},
                             {"deployment_generation", identity.deployment_generation}});
  StartupInputs startup_inputs{.installation_id = identity.installation_id,
                               .provider = identity.provider};
  PrivhelperStartup startup(startup_inputs, &privhelper, &timers,
                            Backoff(DefaultUniformRandom(), kPrivhelperRetryInitial,
                                    kPrivhelperRetryCap));
  absl::Status final_status = RunLoop(
      io, timers, startup,
      [&](const StartupFacts& facts, std::function<void(absl::Status)> on_end) {
        params.limits = facts.limits;
        last_probe = facts.probe;
        status.ProbeAnswered();
        ReportGenerations(generations, facts.probe);
        LogInfo("privhelper is this node's provider; connecting to Core",
                {{"max_active", facts.limits.max_active},
                 {"max_retained", facts.limits.max_retained},
                 {"backend_fingerprint", facts.backend_fingerprint}});
        auto connection = std::make_unique<Connection>(
            params, transport->get(), clock, &timers, &health, &epochs,
            Backoff(DefaultUniformRandom()), &queue, std::move(on_end));
        current = connection.get();
        return connection;
      });
  return ExitCodeFor(final_status);
}

}  // namespace sn::agent
