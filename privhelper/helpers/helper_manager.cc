#include "privhelper/helpers/helper_manager.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "common/atomic_file.h"
#include "common/error_cause.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "privhelper/helpers/framing.h"
#include "privhelper/helpers/helper_channel.h"
#include "privhelper/native/seccomp_policy.h"
#include "proto/native_helper.pb.h"

namespace sn::privhelper {

// Holds a helper for one Execute call: while held it is never retired as idle.
class HelperManager::CallLease {
 public:
  CallLease(HelperManager* m, std::shared_ptr<Helper> h) : m_(m), h_(std::move(h)) {}
  ~CallLease() { m_->Release(h_); }
  CallLease(const CallLease&) = delete;
  CallLease& operator=(const CallLease&) = delete;

 private:
  HelperManager* const m_;
  const std::shared_ptr<Helper> h_;
};

namespace {

constexpr HelperFailure kAllFailures[] = {
    HelperFailure::kStopping,         HelperFailure::kTooManyHelpers,
    HelperFailure::kStartFailed,      HelperFailure::kProtocolMismatch,
    HelperFailure::kNotSandboxed,     HelperFailure::kUnreachable,
};

std::string_view HelperFailureName(HelperFailure f) {
  switch (f) {
    case HelperFailure::kStopping: return "stopping";
    case HelperFailure::kTooManyHelpers: return "too_many_helpers";
    case HelperFailure::kStartFailed: return "start_failed";
    case HelperFailure::kProtocolMismatch: return "protocol_mismatch";
    case HelperFailure::kNotSandboxed: return "not_sandboxed";
    case HelperFailure::kUnreachable: return "unreachable";
  }
  return "unreachable";
}

absl::Status Failure(HelperFailure f, std::string_view message) {
  const bool configuration =
      f == HelperFailure::kProtocolMismatch || f == HelperFailure::kNotSandboxed;
  absl::Status s(configuration ? absl::StatusCode::kFailedPrecondition
                               : absl::StatusCode::kUnavailable,
                 absl::string_view(message.data(), message.size()));
  // Its typed cause (common/error_cause.h): the failure's name as detail.
  return SetCause(std::move(s),
                  configuration ? Diagnostic::kConfigurationInvalid
                                : Diagnostic::kProviderUnavailable,
                  HelperFailureName(f));
}

std::string DescribeWait(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return absl::StrCat("wait status ", status);
}

// /proc/<pid>/status of our own unreaped child (so the pid cannot have been reused).
absl::StatusOr<std::string> ReadProcStatus(pid_t pid) {
  std::string path = absl::StrCat("/proc/", pid, "/status");
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, path);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (1 << 16)) break;
  }
  close(fd);
  return out;
}

}  // namespace

std::optional<HelperFailure> GetHelperFailure(const absl::Status& s) {
  const std::optional<ErrorCause> cause = CauseOf(s);
  if (!cause.has_value()) return std::nullopt;
  for (HelperFailure f : kAllFailures) {
    if (HelperFailureName(f) == cause->detail) return f;
  }
  return std::nullopt;
}

HelperManager::HelperManager(HelperOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock::Get()) {
  if (options_.idle_reaper_thread) reaper_ = std::thread([this] { ReaperLoop(); });
}

HelperManager::~HelperManager() {
  std::vector<std::shared_ptr<Helper>> all;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    all = running_;
  }
  if (reaper_.joinable()) reaper_.join();
  // EOF on its socket tells a helper to finish and exit; its reader thread then reaps it.
  for (auto& h : all) shutdown(h->fd, SHUT_WR);
  for (auto& h : all) {
    if (h->reader.joinable()) h->reader.join();
  }
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(+[](int* live) { return *live == 0; }, &live_));
}

int HelperManager::live_helpers() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

bool HelperManager::WaitUntilNoLiveHelpers(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(+[](const int* live) { return *live == 0; }, &live_),
                              timeout);
}

void HelperManager::ForgetPid(pid_t pid) {
  for (auto it = live_pids_.begin(); it != live_pids_.end(); ++it) {
    if (it->second == pid) {
      live_pids_.erase(it);
      return;
    }
  }
}

std::vector<pid_t> HelperManager::live_pids(int64_t generation) const {
  absl::MutexLock lock(&mu_);
  std::vector<pid_t> out;
  auto [begin, end] = live_pids_.equal_range(generation);
  for (auto it = begin; it != end; ++it) out.push_back(it->second);
  return out;
}

std::map<int64_t, int64_t> HelperManager::live_by_generation() const {
  absl::MutexLock lock(&mu_);
  std::map<int64_t, int64_t> out;
  for (const auto& [generation, pid] : live_pids_) ++out[generation];
  return out;
}

bool HelperManager::RetireIfIdle(int64_t generation) {
  std::shared_ptr<Helper> retire;
  {
    absl::MutexLock lock(&mu_);
    auto it = helpers_.find(generation);
    if (it == helpers_.end() || it->second.calls != 0) return false;
    retire = it->second.helper;
    helpers_.erase(it);
  }
  LogInfo("native helper of a generation being collected: stopping it",
          {{"generation", generation}, {"pid", static_cast<int64_t>(retire->pid)}});
  shutdown(retire->fd, SHUT_WR);  // EOF: the helper exits; its reader thread reaps it
  return true;
}

pid_t HelperManager::helper_pid(int64_t generation) const {
  absl::MutexLock lock(&mu_);
  auto it = helpers_.find(generation);
  return it == helpers_.end() ? 0 : it->second.helper->pid;
}

bool HelperManager::WaitForCallsInFlight(int64_t generation, int n,
                                         absl::Duration timeout) const {
  struct Arg {
    const HelperManager* m;
    int64_t generation;
    int n;
  } arg{this, generation, n};
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(
                                  +[](Arg* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                    auto it = a->m->helpers_.find(a->generation);
                                    return it != a->m->helpers_.end() && it->second.calls >= a->n;
                                  },
                                  &arg),
                              timeout);
}

int HelperManager::KillAndReap(pid_t pid, int lease_fd) {
  kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (lease_fd >= 0) close(lease_fd);
  absl::MutexLock lock(&mu_);
  --live_;
  ForgetPid(pid);
  return status;
}

absl::StatusOr<std::shared_ptr<HelperManager::Helper>> HelperManager::Spawn(int64_t generation) {
  std::string path;
  int lease_fd = -1;
  RETURN_IF_ERROR(ResolveLaunch(generation, &path, &lease_fd));
  ASSIGN_OR_RETURN(std::shared_ptr<Helper> h, Launch(generation, path, lease_fd));
  RETURN_IF_ERROR(AwaitReady(*h, lease_fd));
  h->lease_fd = lease_fd;
  LogInfo("native helper started", {{"generation", generation},
                                    {"pid", static_cast<int64_t>(h->pid)}});
  return h;
}

absl::Status HelperManager::ResolveLaunch(int64_t generation, std::string* path, int* lease_fd) {
  if (spawn_filter_.empty()) {
    absl::StatusOr<std::vector<sock_filter>> f =
        native::ExportHelperFilter(native::HelperFilter::kSpawn, options_.provider);
    if (!f.ok()) return Failure(HelperFailure::kStartFailed, f.status().ToString());
    spawn_filter_ = std::move(*f);
  }
  *path = options_.helper_path;
  if (options_.helper_path_for) {
    absl::StatusOr<std::string> p = options_.helper_path_for(generation);
    if (!p.ok()) {
      return Failure(HelperFailure::kStartFailed, absl::StrCat("helper: ", p.status().ToString()));
    }
    if (!p->empty()) *path = *std::move(p);
  }
  *lease_fd = -1;
  if (options_.open_lease) {
    absl::StatusOr<int> lease = options_.open_lease(generation);
    if (!lease.ok()) {
      return Failure(HelperFailure::kStartFailed, absl::StrCat("lease: ", lease.status().ToString()));
    }
    *lease_fd = *lease;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<HelperManager::Helper>> HelperManager::Launch(
    int64_t generation, const std::string& path, int lease_fd) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    const int err = errno;
    if (lease_fd >= 0) close(lease_fd);
    return Failure(HelperFailure::kStartFailed, ErrnoStatus(err, "socketpair").ToString());
  }
  SpawnSpec spec;
  spec.path = path;
  // argv[0] is the program's name, not the file's: the node's one executable picks its
  // program by it (sandbox_node_main.cc), and a generation's own helper may be stored under
  // any artifact name.
  spec.argv = {"native_helper",
               "--fd=3",
               absl::StrCat("--generation=", generation),
               "--installation_id=" + options_.installation_id,
               "--provider=" + options_.provider};
  spec.argv.insert(spec.argv.end(), options_.provider_flags.begin(),
                   options_.provider_flags.end());
  if (lease_fd >= 0) spec.argv.push_back("--lease_fd=4");
  spec.channel_fd = sv[1];
  spec.extra_fd = lease_fd;
  spec.limits = options_.limits;
  spec.filter = spawn_filter_;
  absl::StatusOr<pid_t> pid = SpawnSandboxed(spec);
  close(sv[1]);
  if (!pid.ok()) {
    close(sv[0]);
    if (lease_fd >= 0) close(lease_fd);
    LogError("native helper did not start", {{"generation", generation},
                                             {"error", pid.status().ToString()}});
    return Failure(HelperFailure::kStartFailed, pid.status().ToString());
  }
  auto h = std::make_shared<Helper>();
  h->has_vm_actions = static_cast<bool>(options_.vm_actions);
  h->generation = generation;
  h->pid = *pid;
  h->fd = sv[0];
  {
    absl::MutexLock lock(&mu_);
    ++live_;
    live_pids_.emplace(generation, h->pid);
  }
  // Every read of this socket starts after poll() saw data, so only a frame the helper stops
  // writing halfway blocks: bounded by frame_read_timeout, then the helper counts as broken.
  const int64_t frame_us =
      std::max<int64_t>(1, absl::ToInt64Microseconds(options_.frame_read_timeout));
  const timeval frame_timeout{static_cast<time_t>(frame_us / 1000000),
                              static_cast<suseconds_t>(frame_us % 1000000)};
  if (setsockopt(h->fd, SOL_SOCKET, SO_RCVTIMEO, &frame_timeout, sizeof frame_timeout) != 0) {
    const int err = errno;
    int wait_status = KillAndReap(h->pid, lease_fd);
    return Failure(HelperFailure::kStartFailed,
                   absl::StrCat(ErrnoStatus(err, "SO_RCVTIMEO").ToString(), " (helper ",
                                DescribeWait(wait_status), ")"));
  }
  return h;
}

absl::Status HelperManager::AwaitReady(const Helper& h, int lease_fd) {
  pollfd p{h.fd, POLLIN, 0};
  int ready = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(options_.start_timeout)));
  v1::HelperToParent first;
  absl::Status s = ready == 1 ? ReadFrame(h.fd, &first, kMaxReadyFrameBytes)
                              : absl::DeadlineExceededError("no HelperReady in time");
  HelperFailure failure = HelperFailure::kStartFailed;
  if (s.ok() && (!first.has_ready() || first.ready().generation() != h.generation ||
                 first.ready().provider() != options_.provider)) {
    s = absl::DataLossError("the helper's first message is not its HelperReady");
  }
  if (s.ok() && first.ready().protocol_version() != kHelperProtocolVersion) {
    failure = HelperFailure::kProtocolMismatch;
    s = absl::FailedPreconditionError(
        absl::StrCat("the helper speaks protocol ", first.ready().protocol_version(),
                     ", privhelper speaks ", kHelperProtocolVersion));
  }
  if (s.ok()) {
    // Both filters (kSpawn from the spawn path, kServing from the helper) must be loaded.
    absl::StatusOr<std::string> status = ReadProcStatus(h.pid);
    s = status.ok() ? CheckSandboxedStatus(*status, /*min_filters=*/2) : status.status();
    if (!s.ok()) failure = HelperFailure::kNotSandboxed;
  }
  if (s.ok()) return s;
  int wait_status = KillAndReap(h.pid, lease_fd);
  LogError("native helper refused", {{"generation", h.generation},
                                     {"pid", static_cast<int64_t>(h.pid)},
                                     {"error", s.ToString()},
                                     {"exit", DescribeWait(wait_status)}});
  return Failure(failure, absl::StrCat(s.message(), " (helper ", DescribeWait(wait_status), ")"));
}

absl::StatusOr<std::shared_ptr<HelperManager::Helper>> HelperManager::Acquire(int64_t generation) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return Failure(HelperFailure::kStopping, "privhelper is stopping");
    auto it = helpers_.find(generation);
    if (it != helpers_.end()) {
      ++it->second.calls;
      return it->second.helper;
    }
  }
  // spawn_mu_ serializes starts: one helper per generation, never two.
  absl::MutexLock spawn_lock(&spawn_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return Failure(HelperFailure::kStopping, "privhelper is stopping");
    auto it = helpers_.find(generation);
    if (it != helpers_.end()) {
      ++it->second.calls;
      return it->second.helper;
    }
    if (live_ >= options_.max_helpers) {
      return Failure(HelperFailure::kTooManyHelpers, "too many native helpers");
    }
  }
  absl::StatusOr<std::shared_ptr<Helper>> h = Spawn(generation);
  if (!h.ok()) return h.status();
  std::shared_ptr<Helper> helper = *h;
  absl::MutexLock lock(&mu_);
  helpers_[generation] = Entry{helper, /*calls=*/1, Now()};
  running_.push_back(helper);
  // Started under mu_: ReaderLoop's exit path takes mu_ before touching `reader`.
  helper->reader = std::thread([this, helper] { ReaderLoop(helper); });
  return helper;
}

void HelperManager::Release(const std::shared_ptr<Helper>& h) {
  absl::MutexLock lock(&mu_);
  auto it = helpers_.find(h->generation);
  if (it == helpers_.end() || it->second.helper != h) return;  // died meanwhile
  --it->second.calls;
  it->second.last_used = Now();
}

int HelperManager::ReapIdle() {
  std::vector<std::shared_ptr<Helper>> retire;
  {
    absl::MutexLock lock(&mu_);
    const MonoTime now = Now();
    for (auto it = helpers_.begin(); it != helpers_.end();) {
      if (it->second.calls == 0 && now - it->second.last_used >= options_.idle_timeout) {
        retire.push_back(it->second.helper);
        it = helpers_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const std::shared_ptr<Helper>& h : retire) {
    LogInfo("native helper idle: stopping it", {{"generation", h->generation},
                                                {"pid", static_cast<int64_t>(h->pid)}});
    shutdown(h->fd, SHUT_WR);  // EOF: the helper exits; its reader thread reaps it
  }
  return static_cast<int>(retire.size());
}

void HelperManager::ReaperLoop() {
  const absl::Duration interval =
      options_.reap_interval > absl::ZeroDuration()
          ? options_.reap_interval
          : std::clamp(options_.idle_timeout / 4, absl::Seconds(1), absl::Seconds(30));
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval);
    if (stopping_) break;
    mu_.Unlock();
    ReapIdle();
    mu_.Lock();
  }
}

void HelperManager::ReaderLoop(std::shared_ptr<Helper> h) {
  {
    absl::MutexLock lock(&h->mu);
    // The helper's hang-up (or a socket error): nothing else wakes this thread.
    bool hung_up = false;
    while (!hung_up && !h->dead) {
      h->mu.Unlock();
      pollfd p{h->fd, 0, 0};
      const int n = poll(&p, 1, -1);
      h->mu.Lock();
      if (n < 0 && errno != EINTR) {
        h->dead = true;
        h->broken = true;
      }
      hung_up = n > 0;
    }
    // What the helper wrote before it exited (late results), then EOF: read here unless a
    // waiting call reads (it reaches the same EOF).
    while (!h->dead) {
      h->mu.Await(absl::Condition(
          +[](Helper* x) ABSL_EXCLUSIVE_LOCKS_REQUIRED(x->mu) { return x->dead || !x->reading; },
          h.get()));
      if (!h->dead) h->ReadOne();
    }
    // Not yet reaped, so the pid is still this helper's: safe to signal.
    if (h->broken) kill(h->pid, SIGKILL);
  }
  {
    // Leaving the tables and deciding who joins this thread happen in one critical section
    // with the destructor's snapshot: either the destructor saw this helper (and joins), or
    // it never will (and the thread detaches itself).
    absl::MutexLock lock(&mu_);
    auto it = helpers_.find(h->generation);
    if (it != helpers_.end() && it->second.helper == h) helpers_.erase(it);
    running_.erase(std::remove(running_.begin(), running_.end(), h), running_.end());
    if (!stopping_) h->reader.detach();
  }
  int status = 0;
  while (waitpid(h->pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (h->lease_fd >= 0) close(h->lease_fd);  // only after waitpid (the lease outlives the helper)
  LogInfo("native helper exited", {{"generation", h->generation},
                                   {"pid", static_cast<int64_t>(h->pid)},
                                   {"status", DescribeWait(status)}});
  absl::MutexLock lock(&mu_);
  ForgetPid(h->pid);
  --live_;  // last use of `this`
}

absl::StatusOr<v1::ExecuteResponse> HelperManager::Execute(const v1::ExecuteRequest& req,
                                                           const ResolvedCall& resolved,
                                                           const std::function<bool()>& cancelled) {
  const absl::Time deadline = absl::Now() + absl::Milliseconds(req.budget_ms());
  absl::StatusOr<std::shared_ptr<Helper>> hs = Acquire(req.generation());
  if (!hs.ok()) return hs.status();
  std::shared_ptr<Helper> h = *hs;
  CallLease lease(this, h);

  auto slot = std::make_shared<Helper::Slot>();
  slot->request = &req;
  uint64_t id;
  {
    absl::MutexLock lock(&h->mu);
    if (h->dead) return Failure(HelperFailure::kUnreachable, "native helper exited");
    id = h->next_call++;
    h->pending[id] = slot;
  }
  CallEnvelope env;
  env.call_id = id;
  env.budget_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now()));
  env.native_image = resolved.native_image;
  env.max_active = resolved.max_active;
  env.max_retained = resolved.max_retained;
  env.in_flight_sandbox_ids = resolved.in_flight_sandbox_ids;
  absl::Status w;
  {
    absl::MutexLock lock(&h->write_mu);
    w = WriteCallFrame(h->fd, req, env);
  }
  if (!w.ok()) {
    absl::MutexLock lock(&h->mu);
    h->pending.erase(id);
    return Failure(HelperFailure::kUnreachable,
                   absl::StrCat("native helper unreachable: ", w.message()));
  }

  absl::MutexLock lock(&h->mu);
  for (;;) {
    h->AwaitOrRead(*slot, absl::Now() + absl::Milliseconds(50));
    if (slot->vm.has_value() && !h->dead) {
      h->ServeVm(slot.get(), resolved, &options_.vm_actions);
      continue;
    }
    if (slot->done) return std::move(slot->response);
    if (h->dead) {
      h->pending.erase(id);
      // The helper died with the call in flight: a native call may have started.
      return absl::AbortedError("native helper exited during the call");
    }
    bool expired = absl::Now() >= deadline;
    bool gone = cancelled && cancelled();
    if (expired || gone) {
      if (gone) h->pending.erase(id);  // nobody will read the outcome: drop it when it comes
      h->mu.Unlock();
      v1::HelperToChild cancel;
      cancel.mutable_cancel()->set_call_id(id);
      {
        absl::MutexLock wl(&h->write_mu);
        (void)WriteFrame(h->fd, cancel);
      }
      h->mu.Lock();
      if (gone) return absl::CancelledError("caller cancelled");
      // Budget expired: the helper was signalled; collect its final outcome if it comes soon.
      const absl::Time until = absl::Now() + kFinalOutcomeGrace;
      h->AwaitOrRead(*slot, until);
      while (slot->vm.has_value() && !h->dead) {  // asked for after its budget: not done
        h->ServeVm(slot.get(), resolved, nullptr);
        h->AwaitOrRead(*slot, until);
      }
      if (slot->done) return std::move(slot->response);
      h->pending.erase(id);
      return absl::DeadlineExceededError("budget expired");
    }
  }
}

}  // namespace sn::privhelper
