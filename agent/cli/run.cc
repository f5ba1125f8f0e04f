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
  const GenerationRef enrolled{identity->deployment_generation, identity->specification_digest};

  boost::asio::io_context io;
  auto post = [&io](std::function<void()> fn) { boost::asio::post(io, std::move(fn)); };
  const Clock* clock = SystemClock::Get();
  AsioTimerQueue timers(io);

  OperationRecord record(files.OperationsDir(), clock);
  absl::Status recovered = record.Recover(kRecordRetention);
  if (!recovered.ok()) {
    LogError("cannot recover the operation record",
             {{"error", std::string(recovered.message())}});
    return kExitFailure;
  }
  record.PruneEvery(&timers, kRecordPruneInterval, kRecordRetention);

  // Generation management (generations/manager.h): preparation runs on its own thread
  // (worker_preparer.h) against Core's routes and privhelper's preparation RPCs.
  FilePinStore pins(files.DeploymentPinsPath());
  HttpCoreDownloads core_downloads(*origin, config.ca_bundle, secret);
  GrpcPrivhelperPreparation privhelper_preparation(config.privhelper_socket);
  PreparationContext preparation;
  preparation.core = &core_downloads;
  preparation.privhelper = &privhelper_preparation;
  preparation.release_key = &*config.release_key;
  preparation.provider = identity->provider;
  preparation.store_specification = [&files](int64_t generation, const std::string& bytes) {
    return files.WriteSpecification(generation, bytes);
  };
  WorkerPreparer preparer(preparation, post);
  GenerationManagerOptions generation_options;
  generation_options.generation_management = config.generation_management;
  generation_options.enrolled = enrolled;
  GenerationManager generations(
      generation_options, clock, &timers, &pins, &preparer,
      [&files, provider = identity->provider](
          const GenerationRef& ref) -> std::optional<std::set<std::string>> {
        absl::StatusOr<VerifiedSpecification> spec =
            LoadSpecificationFor(files, ref.generation, ref.specification_digest, provider);
        if (!spec.ok()) {
          LogError("no usable specification for a held generation; create answers unconfirmed",
                   {{"generation", ref.generation},
                    {"error", std::string(spec.status().message())}});
          return std::nullopt;
        }
        return spec->images;
      },
      [&files, clock](const PreparationJob& job, const PreparationProgress& progress,
                      const std::optional<PreparationOutcome>& finished) {
        absl::Status st = WriteProgressRecord(files.ProgressPath(job.ref.generation), job,
                                              progress, finished, clock->Now());
        if (!st.ok()) {
          LogWarning("cannot record preparation progress",
                     {{"error", std::string(st.message())}});
        }
      });
  absl::Status pinned = generations.Start();
  if (!pinned.ok()) {
    LogError("the deployment pins are unreadable; refusing to start (inspect the file)",
             {{"error", std::string(pinned.message())}});
    return kExitFailure;
  }

  PrivhelperExecutorOptions exec_options;
  exec_options.socket_path = config.privhelper_socket;
  exec_options.digest_of = [&generations](int64_t g) { return generations.DigestOf(g); };
  exec_options.installation_id = identity->installation_id;
  PrivhelperExecutor executor(exec_options, io);
  RequestQueueOptions queue_options;
  queue_options.gate = &generations;
  // Payloads wait in the agent until privhelper's admission bound has room for them
  // (agent/requests/request_queue.h; docs/protocol.md 23a).
  queue_options.payload_bytes_limit = privhelper::kMaxInflightRequestBytes;
  queue_options.payload_overhead_bytes = privhelper::kMaxRequestMessageBytes;
  RequestQueue queue(queue_options, clock, &timers, &record, &executor);

  // Retention (generations/retention.h): Core's drop grants, the local references rechecked
  // at each, and privhelper's CollectGeneration on a worker thread of its own. What the node
  // learned is kept for `agent generations` (node/retention.json, advisory).
  GrpcGenerationCollector collector(config.privhelper_socket, post);
  RetentionDecisions retention(
      clock, &generations, [&queue](int64_t g) { return queue.CallsOn(g); }, &collector,
      [&files, clock](const std::vector<RetentionStatus>& statuses) {
        absl::Status st = WriteRetentionRecord(files.RetentionPath(), statuses, clock->Now());
        if (!st.ok()) {
          LogWarning("cannot record what the retention exchange learned",
                     {{"error", std::string(st.message())}});
        }
      });

  GrpcPrivhelperClient privhelper(config.privhelper_socket, kProbeDeadline, post);
  ProcHostMetrics host(config.state_dir);
  ProbeHealthSource health(
      &privhelper, &host, clock,
      EnrolledProvider{identity->deployment_generation, identity->specification_digest,
                       identity->installation_id, config.generation_management},
      [&generations](const ProbeOutcome& probe) {
        generations.OnGenerationReports(
            probe.generations,
            probe.ready ? std::nullopt : std::optional<Diagnostic>(probe.diagnostic));
      },
      [&generations] { return generations.EnrolledNotHeldDiagnostic(); },
      [&generations](Diagnostic d) { generations.OnProbeFailed(d); });
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
  params.generations = &generations;
  params.retention = &retention;

  LogInfo("agent starting", {{"node_id", identity->node_id},
                             {"core_origin", origin->text},
                             {"deployment_generation", identity->deployment_generation}});
  absl::Status final_status = absl::OkStatus();
  PrivhelperStartup startup(startup_inputs, &privhelper, &timers,
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
    generations.OnGenerationReports(facts->probe.generations,
                                    facts->probe.ready
                                        ? std::nullopt
                                        : std::optional<Diagnostic>(facts->probe.diagnostic));
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
