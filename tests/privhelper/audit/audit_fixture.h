// The audit harness: the real privhelper executable (root, its own state directory and socket)
// and attacks made by tests/privhelper/attack_client running under the agent's uid, as a
// compromised agent would. Needs root and, for anything past Probe, a running dockerd on
// /var/run/docker.sock (tests skip loudly without them, and fail instead under CI=true).
#ifndef SANDBOX_NODE_TESTS_PRIVHELPER_AUDIT_AUDIT_FIXTURE_H_
#define SANDBOX_NODE_TESTS_PRIVHELPER_AUDIT_AUDIT_FIXTURE_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/privhelper/test_util.h"

namespace sn::testing {

inline constexpr uid_t kAgentUid = 65534;  // nobody
inline constexpr gid_t kAgentGid = 65534;  // nogroup
inline constexpr char kHostDockerSocket[] = "/var/run/docker.sock";

// One call's line of attack_client output.
struct CallResult {
  int call = 0;
  int status = -1;          // gRPC status code
  std::string error_code;   // ERROR_CODE_...
  std::string refusal;      // REFUSAL_...
  std::string response;     // Probe's text response
  long ms = 0;              // how long the call took
  std::string diagnostic;   // preparation steps: DIAGNOSTIC_...
  std::string state;        // preparation steps: GENERATION_STATE_...
  int missing = 0;          // BeginPreparation: artifacts still to upload
  int64_t partial = 0;      // BeginPreparation: held_bytes of the first partial reported
  std::string outcome;      // CollectGeneration: COLLECT_OUTCOME_...
  std::string reason;       // CollectGeneration: why (spaces as '_')
};

// A file's bytes ("" when unreadable), and whether anything is at `path` (lstat).
std::string Slurp(const std::string& path);
bool PathExists(const std::string& path);

// Selected lines of /proc/<pid>/status.
struct ProcStatus {
  int64_t vm_hwm_kib = 0;
  int64_t vm_rss_kib = 0;
  int64_t threads = 0;
};
ProcStatus ReadProcStatus(pid_t pid);
// The direct children of `pid` (every thread's children).
std::vector<pid_t> ChildrenOf(pid_t pid);

class PrivhelperProcess {
 public:
  struct Options {
    int64_t max_active = 4;
    int64_t max_retained = 8;
    std::string docker_socket = kHostDockerSocket;
  };
  // Copies the executables into a fresh directory, makes a release key (tools/release), writes
  // the configuration (agent_uid kAgentUid, the key's public half) and starts privhelper;
  // returns once its socket accepts connections.
  static std::unique_ptr<PrivhelperProcess> Start(const Options& options);

  // Publishes release `source` with the busybox image archive (tools/release publish, signed
  // with this fixture's key) into File("releases"); returns the image artifact's description.
  // Then prepares generation `generation` through privhelper as the agent's uid would:
  // AdoptRelease, BeginPreparation, PutArtifact, FinishPreparation. Returns each step's
  // result (FAILs the test when a step fails).
  std::vector<CallResult> PrepareBusybox(int64_t generation, const std::string& source = "audit-1");
  ~PrivhelperProcess();

  pid_t pid() const { return pid_; }
  const std::string& socket() const { return socket_; }
  std::string File(const std::string& name) const { return dir_.File(name); }
  std::string Log() const;  // privhelper's stderr so far
  int CountLog(const std::string& needle) const;
  bool Alive() const;
  int Stop();  // SIGTERM; the exit status
  // A kill -9 of privhelper, reaped; its state directory stays as the kill left it.
  void Kill();
  // After Kill: privhelper started again on the same configuration and state directory (its
  // log appended to); true once its socket accepts connections.
  bool Restart();
  // Stops privhelper (SIGTERM) and starts it again on the same state directory with these
  // limits instead of the configured ones; true once its socket accepts connections.
  bool RestartWithLimits(int64_t max_active, int64_t max_retained);

  // Runs attack_client with `args` (besides --socket) as kAgentUid:kAgentGid and parses its
  // output. FAILs the test when the client could not run.
  std::vector<CallResult> Attack(const std::vector<std::string>& args) const;

  // The installation identity privhelper created (its installation.json).
  std::string InstallationId() const;

 private:
  PrivhelperProcess() = default;
  bool Spawn(bool truncate_log);
  void WriteConfig(const Options& options);
  ShortTempDir dir_;
  std::string socket_;
  std::string public_key_;
  pid_t pid_ = -1;
};

// Imports a busybox-static image into the host's dockerd once; its image id ("sha256:...").
std::string BusyboxImageId();
// `docker save` of that image, once: the path of the archive (world-readable).
std::string BusyboxArchive();
// A specification document of `generation` naming image "busybox" with `image_id`.
std::string BusyboxSpecification(int64_t generation, const std::string& image_id);
// A random v4 uuid.
std::string RandomUuid();
// Removes every container labelled with `installation`.
void RemoveInstallationContainers(const std::string& installation);
// True when the host's dockerd answers /_ping.
bool DockerAnswers();

}  // namespace sn::testing

// Skips loudly without dockerd (fails under CI=true).
#define SN_REQUIRE_DOCKERD()                                                         \
  do {                                                                               \
    if (!::sn::testing::DockerAnswers()) {                                           \
      if (::sn::testing::InCi()) FAIL() << "dockerd not answering (CI=true)";        \
      GTEST_SKIP() << "SKIPPED LOUDLY: dockerd is not answering on /var/run/docker.sock"; \
    }                                                                                \
  } while (0)

#endif  // SANDBOX_NODE_TESTS_PRIVHELPER_AUDIT_AUDIT_FIXTURE_H_
