// native_helper --fd=N --generation=G --installation_id=ID --provider=docker
//               [--docker_socket=PATH] [--lease_fd=N]
// privhelper's per-generation native helper. Speaks length-prefixed HelperToChild /
// HelperToParent messages (proto/native_helper.proto) on fd N. At start it validates the
// provider's complete operation declarations, sets the inherited lease descriptor (when
// given) close-on-exec, and announces HelperReady; then it runs calls concurrently (at most
// kMaxConcurrentCalls) until privhelper closes the socket, and exits after the last call.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "common/provider_operations.h"
#include "privhelper/docker/beast_engine.h"
#include "privhelper/framing.h"
#include "privhelper/native/dispatch.h"
#include "privhelper/native/docker_ops.h"
#include "proto/native_helper.pb.h"

namespace sn::native {
namespace {

using ::sn::privhelper::ReadFrame;
using ::sn::privhelper::WriteFrame;

constexpr int kMaxConcurrentCalls = 64;

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
      if (msg.has_call()) Dispatch(msg.call());
    }
    // privhelper closed the socket: cancel what runs, finish, exit.
    {
      absl::MutexLock lock(&mu_);
      for (auto& [id, flag] : cancels_) flag->store(true);
    }
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* running) { return *running == 0; }, &running_));
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

  void Dispatch(const pb::HelperCall& call) {
    const uint64_t id = call.call_id();
    // The declaration is checked before any native I/O.
    std::optional<pb::ExecuteResponse> early_outcome = EarlyOutcome(
        AllOperationDeclarations(), args_.provider, args_.generation, call.request());
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
    ctl.deadline = absl::Now() + absl::Milliseconds(call.request().budget_ms());
    // Detached: Serve() waits for running_ to drop to zero before the Helper goes away.
    std::thread([this, id, req = call.request(), flag, ctl]() mutable {
      ctl.cancelled = flag.get();
      pb::ExecuteResponse resp = ops_->Run(req, &ctl);
      Reply(id, std::move(resp));
      absl::MutexLock lock(&mu_);
      cancels_.erase(id);
      --running_;
    }).detach();
  }

  const Args args_;
  DockerOperations* const ops_;
  absl::Mutex write_mu_;
  absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<std::atomic<bool>>> cancels_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace
}  // namespace sn::native

int main(int argc, char** argv) {
  sn::InitLogging("native_helper");
  signal(SIGPIPE, SIG_IGN);
  sn::native::Args args;
  if (!sn::native::ParseArgs(argc, argv, &args)) {
    sn::LogError("native_helper: bad arguments");
    return 2;
  }
  // Our descriptors never reach what the daemon or SDK might spawn.
  fcntl(args.fd, F_SETFD, FD_CLOEXEC);
  if (args.lease_fd >= 0) fcntl(args.lease_fd, F_SETFD, FD_CLOEXEC);

  absl::Status decl = sn::ValidateDeclarations(sn::AllOperationDeclarations(), args.provider);
  if (!decl.ok() || args.provider != "docker") {
    sn::LogError("native_helper: provider declarations invalid",
                 {{"provider", args.provider}, {"error", decl.ToString()}});
    return 3;
  }
  sn::docker::BeastDockerEngine engine(args.docker_socket);
  sn::native::DockerOperations ops(&engine, args.installation_id, args.generation);

  sn::privhelper::v1::HelperToParent ready;
  ready.mutable_ready()->set_provider(args.provider);
  ready.mutable_ready()->set_generation(args.generation);
  if (!sn::privhelper::WriteFrame(args.fd, ready).ok()) return 4;

  sn::native::Helper helper(args, &ops);
  return helper.Serve();
}
