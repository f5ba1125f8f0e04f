// native_helper --fd=N --generation=G --installation_id=ID --provider=docker
//               [--docker_socket=PATH] [--lease_fd=N]
// privhelper's per-generation native helper. Speaks length-prefixed HelperToChild /
// HelperToParent messages (proto/native_helper.proto) on fd N. privhelper starts it with no
// capability, no_new_privs, the kSpawn seccomp filter, descriptors 0-3 (4: the lease) and an
// empty environment (privhelper/helpers/spawn.h). At start it sets its descriptors
// close-on-exec (before any provider call), validates the provider's complete operation
// declarations, loads what the operations would otherwise read from files later, installs
// the stricter kServing filter (seccomp_policy.h) and only then announces HelperReady; then
// it runs calls concurrently (at most kMaxConcurrentCalls) on long-lived worker threads until
// privhelper closes the socket, and exits after the last call. One DockerEngine serves all
// calls, so inspections reuse kept daemon connections.
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "common/wire/limits.h"
#include "common/process_init.h"
#include "common/provider_operations.h"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/helpers/framing.h"
#include "privhelper/helpers/sanitizer_build.h"
#include "privhelper/native/dispatch.h"
#include "privhelper/native/docker_ops.h"
#include "privhelper/native/seccomp_policy.h"
#include "proto/native_helper.pb.h"

// In sanitizer builds (tests only) LeakSanitizer would stop the world with ptrace at exit,
// which the seccomp filters forbid: leaks are checked in the in-process unit tests instead.
#ifdef SN_ASAN_BUILD
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

namespace sn::native {
namespace {

using ::sn::privhelper::ReadFrame;
using ::sn::privhelper::WriteFrame;

// privhelper admits at most this many Execute calls at once (privhelper/rpc/admission.h).
constexpr int kMaxConcurrentCalls = static_cast<int>(wire::kMinNodeWideOperations);
constexpr int kMaxIdleWorkers = 4;  // worker threads kept waiting for calls
constexpr int kMallocArenas = 4;

using Task = std::function<void()>;

struct Args {
  int fd = -1;
  int lease_fd = -1;
  int64_t generation = 0;
  std::string installation_id;
  std::string provider;
  std::string docker_socket = "/var/run/docker.sock";
};

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string_view s = argv[i];
    auto value = [&s](std::string_view flag) -> const char* {
      return s.substr(0, flag.size()) == flag ? s.data() + flag.size() : nullptr;
    };
    if (const char* v = value("--fd=")) a->fd = atoi(v);
    else if (const char* v = value("--lease_fd=")) a->lease_fd = atoi(v);
    else if (const char* v = value("--generation=")) a->generation = strtoll(v, nullptr, 10);
    else if (const char* v = value("--installation_id=")) a->installation_id = v;
    else if (const char* v = value("--provider=")) a->provider = v;
    else if (const char* v = value("--docker_socket=")) a->docker_socket = v;
    else return false;
  }
  return a->fd >= 0 && a->generation > 0 && !a->installation_id.empty() && !a->provider.empty();
}

class Helper {
 public:
  Helper(const Args& args, DockerOperations* ops) : args_(args), ops_(ops) {}

  int Serve() {
    for (;;) {
      pb::HelperToChild msg;
      absl::Status s = ReadFrame(args_.fd, &msg);
      if (!s.ok()) {
        if (!absl::IsOutOfRange(s)) LogWarning("helper: read failed", {{"error", s.ToString()}});
        break;
      }
      if (msg.has_cancel()) {
        absl::MutexLock lock(&mu_);
        auto it = cancels_.find(msg.cancel().call_id());
        if (it != cancels_.end()) it->second->store(true);
        continue;
      }
      if (msg.has_call()) {
        Dispatch(std::shared_ptr<pb::HelperCall>(msg.release_call()));  // moved, not copied
      }
    }
    // privhelper closed the socket: cancel what runs, finish, let the workers go, exit.
    absl::MutexLock lock(&mu_);
    for (auto& [id, flag] : cancels_) flag->store(true);
    mu_.Await(absl::Condition(
        +[](int* running) { return *running == 0; }, &running_));
    stopping_ = true;
    mu_.Await(absl::Condition(+[](int* workers) { return *workers == 0; }, &workers_));
    return 0;
  }

 private:
  void Reply(uint64_t call_id, pb::ExecuteResponse resp) {
    pb::HelperToParent out;
    out.mutable_result()->set_call_id(call_id);
    *out.mutable_result()->mutable_response() = std::move(resp);
    absl::MutexLock lock(&write_mu_);
    absl::Status s = WriteFrame(args_.fd, out);
    if (!s.ok()) LogWarning("helper: reply failed", {{"error", s.ToString()}});
  }

  void Dispatch(std::shared_ptr<pb::HelperCall> call) {
    const uint64_t id = call->call_id();
    // Arguments and the declaration are checked before any native I/O.
    std::optional<pb::ExecuteResponse> early_outcome = EarlyOutcome(
        AllOperationDeclarations(), args_.provider, args_.generation, call->request());
    if (early_outcome.has_value()) {
      Reply(id, std::move(*early_outcome));
      return;
    }
    pb::ExecuteResponse early;
    auto flag = std::make_shared<std::atomic<bool>>(false);
    {
      absl::MutexLock lock(&mu_);
      if (running_ >= kMaxConcurrentCalls) {
        early.set_error_code(pb::ERROR_CODE_UNAVAILABLE);
      } else {
        ++running_;
        cancels_[id] = flag;
      }
    }
    if (early.error_code() != pb::ERROR_CODE_NONE) {
      Reply(id, std::move(early));
      return;
    }
    CallControl ctl;
    ctl.deadline = absl::Now() + absl::Milliseconds(call->request().budget_ms());
    Resolved resolved;
    resolved.native_image = call->native_image();
    resolved.max_active = call->max_active();
    resolved.max_retained = call->max_retained();
    Task task = [this, id, call = std::move(call), resolved = std::move(resolved), flag,
                 ctl]() mutable {
      ctl.cancelled = flag.get();
      pb::ExecuteResponse resp = ops_->Run(call->request(), resolved, &ctl);
      call.reset();  // the request's bytes (stdin, file content) go before the reply is sent
      Reply(id, std::move(resp));
      absl::MutexLock lock(&mu_);
      cancels_.erase(id);
      --running_;
    };
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(task));
    if (idle_ < static_cast<int>(queue_.size())) {
      // No idle worker for it: one more thread (running_ bounds them at kMaxConcurrentCalls).
      // Detached: Serve() waits for workers_ to drop to zero before the Helper goes away.
      ++workers_;
      std::thread([this] { Work(); }).detach();
    }
  }

  // A worker: runs queued calls; stays for the next one while few enough others are idle, so
  // a steady stream of calls costs no thread start per call.
  void Work() {
    absl::MutexLock lock(&mu_);
    for (;;) {
      ++idle_;
      mu_.Await(absl::Condition(
          +[](Helper* h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(h->mu_) {
            return !h->queue_.empty() || h->stopping_;
          },
          this));
      --idle_;
      if (queue_.empty()) break;  // stopping
      Task task = std::move(queue_.front());
      queue_.pop_front();
      mu_.Unlock();
      task();
      task = nullptr;
      mu_.Lock();
      if (idle_ >= kMaxIdleWorkers) break;
    }
    --workers_;
  }

  const Args args_;
  DockerOperations* const ops_;
  absl::Mutex write_mu_;
  absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<std::atomic<bool>>> cancels_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);  // accepted calls no worker has taken yet
  int workers_ ABSL_GUARDED_BY(mu_) = 0;         // worker threads alive
  int idle_ ABSL_GUARDED_BY(mu_) = 0;            // of which waiting for a call
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace
}  // namespace sn::native

int main(int argc, char** argv) {
  sn::InitProcess("native_helper");
  // A few malloc arenas for up to 64 worker threads: each reserves 64 MiB of address space,
  // which RLIMIT_AS bounds (privhelper/helpers/spawn.h).
  mallopt(M_ARENA_MAX, sn::native::kMallocArenas);
  signal(SIGPIPE, SIG_IGN);
  sn::native::Args args;
  if (!sn::native::ParseArgs(argc, argv, &args)) {
    sn::LogError("native_helper: bad arguments");
    return 2;
  }
  // Our descriptors never reach anything a provider call might start (spec: the lease is set
  // close-on-exec before any SDK call). A lease that cannot be set so is refused.
  if (fcntl(args.fd, F_SETFD, FD_CLOEXEC) != 0 ||
      (args.lease_fd >= 0 && fcntl(args.lease_fd, F_SETFD, FD_CLOEXEC) != 0)) {
    sn::LogError("native_helper: descriptors cannot be set close-on-exec");
    return 2;
  }

  absl::Status decl = sn::ValidateDeclarations(sn::AllOperationDeclarations(), args.provider);
  if (!decl.ok() || args.provider != "docker") {
    sn::LogError("native_helper: provider declarations invalid",
                 {{"provider", args.provider}, {"error", decl.ToString()}});
    return 3;
  }
  sn::docker::BeastDockerEngine engine(args.docker_socket);
  sn::native::DockerOperations ops(&engine, args.installation_id, args.generation);
  sn::native::DockerOperations::PrepareForSandbox();
  absl::Status filtered = sn::native::InstallServingFilter();
  if (!filtered.ok()) {
    sn::LogError("native_helper: seccomp filter not installed", {{"error", filtered.ToString()}});
    return 5;
  }

  sn::privhelper::v1::HelperToParent ready;
  ready.mutable_ready()->set_provider(args.provider);
  ready.mutable_ready()->set_generation(args.generation);
  ready.mutable_ready()->set_protocol_version(sn::privhelper::kHelperProtocolVersion);
  if (!sn::privhelper::WriteFrame(args.fd, ready).ok()) return 4;

  sn::native::Helper helper(args, &ops);
  sn::ReleaseStartupPages();  // start-up is over (common/process_init.h)
  return helper.Serve();
}
