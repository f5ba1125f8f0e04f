// native_helper --fd=N --generation=G --installation_id=ID --provider=NAME [--lease_fd=N]
//               [the provider's own --<option>=VALUE flags, e.g. docker's --docker_socket=PATH]
// native_helper --help | --version   (standard output, exit 0; common/build_info.h)
// privhelper's per-generation native helper: the runtime every provider shares. The provider
// (privhelper/native/provider.h) is chosen by name from the registrations (providers.h).
// Speaks length-prefixed HelperToChild / HelperToParent messages (proto/native_helper.proto)
// on fd N. privhelper starts it with no
// capability, no_new_privs, the kSpawn seccomp filter, descriptors 0-3 (4: the lease) and an
// empty environment (privhelper/helpers/spawn.h). At start it sets its descriptors
// close-on-exec (before any provider call), validates the provider's complete operation
// declarations, loads what the operations would otherwise read from files later, installs
// the stricter kServing filter (seccomp_policy.h) and only then announces HelperReady; then
// it runs calls concurrently (at most kMaxConcurrentCalls) on long-lived threads, each call on
// the thread that read it (Helper, below), until privhelper closes the socket, and exits
// after the last call. One provider object serves all calls (Docker's keeps daemon connections
// for reuse).
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/build_info.h"
#include "common/entry_points.h"
#include "common/log.h"
#include "common/wire/limits.h"
#include "common/process_init.h"
#include "common/provider_operations.h"
#include "privhelper/helpers/framing.h"
#include "privhelper/helpers/sanitizer_build.h"
#include "privhelper/native/dispatch.h"
#include "privhelper/native/provider.h"
#include "privhelper/native/providers.h"
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
constexpr int kMaxIdleWorkers = 4;  // threads kept waiting to read the next call
constexpr int kMallocArenas = 4;

constexpr char kUsage[] =
    "usage: native_helper --fd=N --generation=G --installation_id=ID --provider=NAME\n"
    "                     [--lease_fd=N] [--<provider option>=VALUE...]\n"
    "       native_helper --help | --version\n"
    "  privhelper's per-generation helper: privhelper starts it (never by hand) with its\n"
    "  end of a socketpair as descriptor N. Exit status: 0 once privhelper closed the\n"
    "  socket, 2 bad arguments, another non-zero status when it could not start or serve\n"
    "  (its log says why).\n";

struct Args {
  int fd = -1;
  int lease_fd = -1;
  int64_t generation = 0;
  std::string installation_id;
  std::string provider;
  std::map<std::string, std::string> options;  // flags some registered provider accepts
};

// A decimal of digits only that fits int64, else -1 (then ParseArgs refuses the arguments).
int64_t Decimal(std::string_view s) {
  int64_t n = -1;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty() && s[0] != '-' ? n : -1;
}

// --<option>=VALUE for an option some registered provider accepts (providers.h).
bool ProviderOption(std::string_view s, Args* a) {
  if (s.substr(0, 2) != "--") return false;
  const size_t eq = s.find('=');
  if (eq == std::string_view::npos || !IsProviderOption(s.substr(2, eq - 2))) return false;
  a->options[std::string(s.substr(2, eq - 2))] = std::string(s.substr(eq + 1));
  return true;
}

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string_view s = argv[i];
    auto value = [&s](std::string_view flag) -> const char* {
      return s.substr(0, flag.size()) == flag ? s.data() + flag.size() : nullptr;
    };
    if (const char* v = value("--fd=")) a->fd = atoi(v);
    else if (const char* v = value("--lease_fd=")) a->lease_fd = atoi(v);
    else if (const char* v = value("--generation=")) a->generation = Decimal(v);
    else if (const char* v = value("--installation_id=")) a->installation_id = v;
    else if (const char* v = value("--provider=")) a->provider = v;
    else if (!ProviderOption(s, a)) return false;
  }
  return a->fd >= 0 && a->generation > 0 && !a->installation_id.empty() && !a->provider.empty();
}

// Every idle serving thread waits for the socket itself, in an epoll set of its own that holds
// the socket with EPOLLEXCLUSIVE, so a call's arrival wakes one idle thread (not all, and not a
// thread that then wakes another): that thread reads the message and runs the call itself.
// Reading is one thread at a time (`reading_`), a whole frame per turn; a thread woken for
// bytes another thread has taken goes back to waiting. Cancels and early outcomes are handled
// by the thread that read them. A thread that starts running a call while no other waits
// starts one more (running_ bounds them at kMaxConcurrentCalls).
class Helper {
 public:
  Helper(const Args& args, Provider* ops) : args_(args), ops_(ops) {}

  int Serve() {
    const bool served = Loop(/*main=*/true);
    // privhelper closed the socket: what runs was cancelled; finish, let the others go, exit.
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](Helper* h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(h->mu_) {
          return h->running_ == 0 && h->workers_ == 0;
        },
        this));
    return served ? 0 : 6;
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

  // Ends the serving: what runs is cancelled, and every thread leaves once it sees eof_. The
  // receive side is shut down so that a thread waiting in epoll wakes even when the socket has
  // not ended (a failed read or wait); replies are still written.
  void EndLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    eof_ = true;
    for (auto& [id, flag] : cancels_) flag->store(true);
    shutdown(args_.fd, SHUT_RD);
  }

  // Every serving thread runs this until the socket ends. The main thread stays until then;
  // others leave when enough threads wait already. `counted`: the caller counted this thread in
  // idle_ already (a thread started by Loop). False when the thread could not wait for the
  // socket (its epoll set failed); for the main thread that ends the serving.
  bool Loop(bool main, bool counted = false) {
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLEXCLUSIVE;
    const bool waitable = ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, args_.fd, &ev) == 0;
    if (!waitable) LogError("helper: cannot wait for the socket", {{"errno", errno}});
    absl::MutexLock lock(&mu_);
    if (!waitable) {
      if (counted) --idle_;
      if (ep >= 0) close(ep);
      if (main) EndLocked();  // nothing would read the socket: the helper ends
      return false;           // a worker just leaves; the others still serve
    }
    if (!counted) ++idle_;  // counted while it waits, at the top of every turn
    while (!eof_) {
      mu_.Unlock();
      epoll_event got;
      const int n = epoll_wait(ep, &got, 1, -1);
      mu_.Lock();
      if (n < 0 && errno != EINTR) {
        LogError("helper: waiting for the socket failed", {{"errno", errno}});
        EndLocked();
      }
      if (n <= 0 || eof_) continue;
      std::optional<Accepted> call = ReadOne();  // unlocks mu_ while it reads
      if (!call.has_value()) continue;           // nothing there, a cancel, an early outcome
      --idle_;
      if (idle_ == 0) {
        // Nobody left to wait for the next call: one more thread, counted from now. Detached:
        // Serve() waits for workers_ to drop to zero before the Helper goes away.
        ++workers_;
        ++idle_;
        std::thread([this] {
          Loop(/*main=*/false, /*counted=*/true);
          absl::MutexLock l(&mu_);
          --workers_;
        }).detach();
      }
      mu_.Unlock();
      Run(*std::move(call));
      mu_.Lock();
      if (!main && idle_ >= kMaxIdleWorkers) {  // enough wait already: this one leaves
        close(ep);
        return true;
      }
      ++idle_;
    }
    --idle_;
    close(ep);
    return true;
  }

  struct Accepted {
    std::shared_ptr<pb::HelperCall> call;
    std::shared_ptr<std::atomic<bool>> cancelled;
  };

  // Reads one message if the socket has one and nobody else reads; a call accepted for running
  // is returned, a cancel or an early outcome is handled here (nullopt). The end of the socket
  // or a failed read sets eof_.
  std::optional<Accepted> ReadOne() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    mu_.Await(absl::Condition(
        +[](Helper* h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(h->mu_) { return !h->reading_ || h->eof_; },
        this));
    if (eof_) return std::nullopt;
    pollfd p{args_.fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return std::nullopt;  // taken by the thread that read before
    reading_ = true;
    pb::HelperToChild msg;
    mu_.Unlock();
    absl::Status s = ReadFrame(args_.fd, &msg);
    mu_.Lock();
    reading_ = false;
    if (!s.ok()) {
      if (!absl::IsOutOfRange(s)) LogWarning("helper: read failed", {{"error", s.ToString()}});
      EndLocked();
      return std::nullopt;
    }
    if (msg.has_cancel()) {
      auto it = cancels_.find(msg.cancel().call_id());
      if (it != cancels_.end()) it->second->store(true);
      return std::nullopt;
    }
    if (msg.has_vm_answer()) {  // to the call waiting in AskPrivhelper (a late one is dropped)
      auto it = vm_waiters_.find(msg.vm_answer().call_id());
      if (it != vm_waiters_.end()) *it->second = std::move(*msg.mutable_vm_answer());
      return std::nullopt;
    }
    if (!msg.has_call()) return std::nullopt;
    std::shared_ptr<pb::HelperCall> call(msg.release_call());  // moved, not copied
    const uint64_t id = call->call_id();
    // Arguments and the declaration are checked before any native I/O.
    std::optional<pb::ExecuteResponse> early = EarlyOutcome(
        AllOperationDeclarations(), args_.provider, args_.generation, call->request());
    if (!early.has_value() &&
        !InFlightIdsWellFormed(call->request(),
                               std::vector<std::string>(call->in_flight_sandbox_ids().begin(),
                                                        call->in_flight_sandbox_ids().end()),
                               call->max_active(), call->max_retained())) {
      LogWarning("helper: the call's in-flight sandbox ids break their rules; refused");
      early.emplace();
      early->set_error_code(pb::ERROR_CODE_INVALID);
    }
    if (!early.has_value() && running_ >= kMaxConcurrentCalls) {
      early.emplace();
      early->set_error_code(pb::ERROR_CODE_UNAVAILABLE);
    }
    if (early.has_value()) {
      mu_.Unlock();
      Reply(id, *std::move(early));
      mu_.Lock();
      return std::nullopt;
    }
    ++running_;
    auto flag = std::make_shared<std::atomic<bool>>(false);
    cancels_[id] = flag;
    return Accepted{std::move(call), std::move(flag)};
  }

  void Run(Accepted a) ABSL_LOCKS_EXCLUDED(mu_) {
    const uint64_t id = a.call->call_id();
    CallControl ctl;
    ctl.deadline = absl::Now() + absl::Milliseconds(a.call->request().budget_ms());
    ctl.cancelled = a.cancelled.get();
    ctl.ask_privhelper = [this, id, deadline = ctl.deadline](pb::VmRequest vm) {
      return AskPrivhelper(id, std::move(vm), deadline);
    };
    Resolved resolved;
    resolved.native_image = a.call->native_image();
    resolved.max_active = a.call->max_active();
    resolved.max_retained = a.call->max_retained();
    resolved.in_flight_sandbox_ids.assign(a.call->in_flight_sandbox_ids().begin(),
                                          a.call->in_flight_sandbox_ids().end());
    pb::ExecuteResponse resp = ops_->Run(a.call->request(), resolved, &ctl);
    a.call.reset();  // the request's bytes (stdin, file content) go before the reply is sent
    Reply(id, std::move(resp));
    absl::MutexLock lock(&mu_);
    cancels_.erase(id);
    --running_;
  }

  // Sends the call's VmRequest and waits for privhelper's VmAnswer (read by whichever thread
  // reads the socket: while a call runs, another thread always waits for frames) until
  // `deadline`.
  absl::Status AskPrivhelper(uint64_t call_id, pb::VmRequest vm, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_) {
    vm.set_call_id(call_id);
    auto answer = std::make_shared<std::optional<pb::VmAnswer>>();
    {
      absl::MutexLock lock(&mu_);
      if (eof_) return absl::UnavailableError("privhelper closed the helper's channel");
      vm_waiters_[call_id] = answer;
    }
    pb::HelperToParent out;
    *out.mutable_vm() = std::move(vm);
    absl::Status written;
    {
      absl::MutexLock lock(&write_mu_);
      written = WriteFrame(args_.fd, out);
    }
    absl::MutexLock lock(&mu_);
    struct Arg {
      const std::optional<pb::VmAnswer>* answer;
      const bool* eof;
    } arg{answer.get(), &eof_};
    if (written.ok()) {
      mu_.AwaitWithDeadline(absl::Condition(
                                +[](Arg* a) { return a->answer->has_value() || *a->eof; }, &arg),
                            deadline);
    }
    vm_waiters_.erase(call_id);
    if (!written.ok()) return absl::UnavailableError("privhelper unreachable");
    // Sent but unanswered: privhelper may have acted (Aborted, not Unavailable, which says
    // that nothing was started: the provider's ActionCode).
    if (!answer->has_value()) {
      return eof_ ? absl::AbortedError("privhelper closed the helper's channel before it answered")
                  : absl::DeadlineExceededError("privhelper did not answer before the deadline");
    }
    const int code = (*answer)->code();
    if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
      return absl::InternalError("privhelper answered an unknown status code");
    }
    return absl::Status(static_cast<absl::StatusCode>(code), (*answer)->message());
  }

  const Args args_;
  Provider* const ops_;
  absl::Mutex write_mu_;
  absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<std::atomic<bool>>> cancels_ ABSL_GUARDED_BY(mu_);
  // Calls waiting for privhelper's VmAnswer (AskPrivhelper), by call id.
  std::map<uint64_t, std::shared_ptr<std::optional<pb::VmAnswer>>> vm_waiters_
      ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;  // a thread reads a message from the socket
  bool eof_ ABSL_GUARDED_BY(mu_) = false;      // privhelper closed it (or a read failed)
  int workers_ ABSL_GUARDED_BY(mu_) = 0;       // threads alive besides the main one
  int idle_ ABSL_GUARDED_BY(mu_) = 0;          // of all, waiting for the next message
};

}  // namespace
}  // namespace sn::native

int sn::native::Main(int argc, char** argv) {
  if (std::optional<int> answered = sn::AnswerHelpOrVersion(sn::FirstArgument(argc, argv),
                                                            "native_helper", sn::native::kUsage)) {
    return *answered;
  }
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
  const sn::native::ProviderRegistration* registration = sn::native::FindProvider(args.provider);
  if (!decl.ok() || registration == nullptr) {
    sn::LogError("native_helper: provider declarations invalid",
                 {{"provider", args.provider}, {"error", decl.ToString()}});
    return 3;
  }
  for (const auto& option : args.options) {  // each a flag some provider accepts: this one?
    bool accepted = false;
    for (std::string_view o : registration->options) accepted = accepted || o == option.first;
    if (!accepted) {
      sn::LogError("native_helper: bad arguments", {{"provider", args.provider}});
      return 2;
    }
  }
  absl::StatusOr<std::unique_ptr<sn::native::Provider>> ops = registration->make(
      sn::native::ProviderContext{args.installation_id, args.generation, args.options});
  if (!ops.ok()) {
    sn::LogError("native_helper: provider not started",
                 {{"provider", args.provider}, {"error", ops.status().ToString()}});
    return 3;
  }
  if (absl::Status prepared = (*ops)->PrepareForSandbox(); !prepared.ok()) {
    sn::LogError("native_helper: provider not prepared",
                 {{"provider", args.provider}, {"error", prepared.ToString()}});
    return 3;
  }
  absl::Status filtered = sn::native::InstallServingFilter(args.provider);
  if (!filtered.ok()) {
    sn::LogError("native_helper: seccomp filter not installed", {{"error", filtered.ToString()}});
    return 5;
  }

  sn::privhelper::v1::HelperToParent ready;
  ready.mutable_ready()->set_provider(args.provider);
  ready.mutable_ready()->set_generation(args.generation);
  ready.mutable_ready()->set_protocol_version(sn::privhelper::kHelperProtocolVersion);
  if (!sn::privhelper::WriteFrame(args.fd, ready).ok()) return 4;

  sn::native::Helper helper(args, ops->get());
  sn::ReleaseStartupPages();  // start-up is over (common/process_init.h)
  return helper.Serve();
}
