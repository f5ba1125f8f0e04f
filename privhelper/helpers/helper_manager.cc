#include "privhelper/helpers/helper_manager.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "privhelper/helpers/framing.h"
#include "proto/native_helper.pb.h"

extern char** environ;

namespace sn::privhelper {

struct HelperManager::Helper {
  ~Helper() {
    if (fd >= 0) close(fd);
  }
  int64_t generation = 0;
  pid_t pid = 0;
  int fd = -1;
  absl::Mutex write_mu;
  absl::Mutex mu;
  bool dead ABSL_GUARDED_BY(mu) = false;
  uint64_t next_call ABSL_GUARDED_BY(mu) = 1;
  struct Slot {
    bool done = false;
    v1::ExecuteResponse response;
  };
  std::map<uint64_t, std::shared_ptr<Slot>> pending ABSL_GUARDED_BY(mu);
  std::thread reader;
};

HelperManager::HelperManager(HelperOptions options) : options_(std::move(options)) {}

HelperManager::~HelperManager() {
  std::vector<std::shared_ptr<Helper>> all;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [g, h] : helpers_) all.push_back(h);
  }
  // EOF on its socket tells a helper to finish and exit; the reader thread then reaps it.
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

pid_t HelperManager::helper_pid(int64_t generation) const {
  absl::MutexLock lock(&mu_);
  auto it = helpers_.find(generation);
  return it == helpers_.end() ? 0 : it->second->pid;
}

absl::StatusOr<std::shared_ptr<HelperManager::Helper>> HelperManager::Spawn(int64_t generation) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return ErrnoStatus(errno, "socketpair");
  }
  // The helper's end becomes fd 3 in the child (dup2 clears close-on-exec there only). The
  // generation's lease descriptor will be passed the same way (--lease_fd) when generations
  // arrive; the helper sets it close-on-exec before any native call.
  std::vector<std::string> args = {
      options_.helper_path,
      "--fd=3",
      absl::StrCat("--generation=", generation),
      "--installation_id=" + options_.installation_id,
      "--provider=" + options_.provider,
      "--docker_socket=" + options_.docker_socket,
  };
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, options_.helper_path.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(sv[1]);
  if (rc != 0) {
    close(sv[0]);
    return ErrnoStatus(rc, "spawn native helper");
  }
  auto h = std::make_shared<Helper>();
  h->generation = generation;
  h->pid = pid;
  h->fd = sv[0];
  {
    absl::MutexLock lock(&mu_);
    ++live_;
  }
  LogInfo("native helper started", {{"generation", generation}, {"pid", static_cast<int64_t>(pid)}});

  // Wait (bounded) for HelperReady; anything else means the helper cannot serve.
  pollfd p{h->fd, POLLIN, 0};
  int ready = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(options_.start_timeout)));
  v1::HelperToParent first;
  absl::Status s = ready == 1 ? ReadFrame(h->fd, &first)
                              : absl::DeadlineExceededError("helper did not announce itself");
  if (s.ok() && (!first.has_ready() || first.ready().generation() != generation)) {
    s = absl::DataLossError("helper's first message is not HelperReady");
  }
  if (!s.ok()) {
    LogError("native helper failed to start", {{"generation", generation}, {"error", s.ToString()}});
    kill(pid, SIGKILL);
    std::thread([this, pid] {
      int status = 0;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      absl::MutexLock lock(&mu_);
      --live_;
    }).detach();
    return absl::UnavailableError("native helper did not start");
  }
  return h;
}

absl::StatusOr<std::shared_ptr<HelperManager::Helper>> HelperManager::GetOrSpawn(int64_t generation) {
  // spawn_mu_ serializes starts: one helper per generation, never two.
  absl::MutexLock spawn_lock(&spawn_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("privhelper is stopping");
    auto it = helpers_.find(generation);
    if (it != helpers_.end()) return it->second;
    if (static_cast<int>(helpers_.size()) >= options_.max_helpers) {
      return absl::UnavailableError("too many native helpers");
    }
  }
  absl::StatusOr<std::shared_ptr<Helper>> h = Spawn(generation);
  if (!h.ok()) return h.status();
  absl::MutexLock lock(&mu_);
  helpers_[generation] = *h;
  // Started under mu_: ReaderLoop's exit path takes mu_ before touching `reader`.
  std::shared_ptr<Helper> helper = *h;
  helper->reader = std::thread([this, helper] { ReaderLoop(helper); });
  return helper;
}

void HelperManager::ReaderLoop(std::shared_ptr<Helper> h) {
  for (;;) {
    v1::HelperToParent msg;
    absl::Status s = ReadFrame(h->fd, &msg);
    if (!s.ok()) break;
    if (!msg.has_result()) continue;
    absl::MutexLock lock(&h->mu);
    auto it = h->pending.find(msg.result().call_id());
    if (it == h->pending.end()) {
      // The caller gave up (budget or cancellation) and answered already; the late outcome
      // is only logged (metadata, never outputs).
      LogWarning("late native helper result dropped",
                 {{"generation", h->generation},
                  {"call_id", static_cast<uint64_t>(msg.result().call_id())},
                  {"error_code", static_cast<int>(msg.result().response().error_code())}});
      continue;
    }
    it->second->response = std::move(*msg.mutable_result()->mutable_response());
    it->second->done = true;
    h->pending.erase(it);
  }
  {
    absl::MutexLock lock(&h->mu);
    h->dead = true;
  }
  {
    // Leaving the map and deciding who joins this thread happen in one critical section with
    // the destructor's snapshot: either the destructor saw this helper (and joins), or it
    // never will (and the thread detaches itself).
    absl::MutexLock lock(&mu_);
    auto it = helpers_.find(h->generation);
    if (it != helpers_.end() && it->second == h) helpers_.erase(it);
    if (!stopping_) h->reader.detach();
  }
  int status = 0;
  while (waitpid(h->pid, &status, 0) < 0 && errno == EINTR) {
  }
  LogInfo("native helper exited", {{"generation", h->generation},
                                   {"pid", static_cast<int64_t>(h->pid)},
                                   {"status", status}});
  absl::MutexLock lock(&mu_);
  --live_;  // last use of `this`
}

namespace {

struct WaitArg {
  const bool* done;
  const bool* dead;
};
bool DoneOrDead(WaitArg* a) { return *a->done || *a->dead; }

}  // namespace

absl::StatusOr<v1::ExecuteResponse> HelperManager::Execute(const v1::ExecuteRequest& req,
                                                           const ResolvedCall& resolved,
                                                           const std::function<bool()>& cancelled) {
  const absl::Time deadline = absl::Now() + absl::Milliseconds(req.budget_ms());
  absl::StatusOr<std::shared_ptr<Helper>> hs = GetOrSpawn(req.generation());
  if (!hs.ok()) return hs.status();
  std::shared_ptr<Helper> h = *hs;

  auto slot = std::make_shared<Helper::Slot>();
  uint64_t id;
  {
    absl::MutexLock lock(&h->mu);
    if (h->dead) return absl::UnavailableError("native helper exited");
    id = h->next_call++;
    h->pending[id] = slot;
  }
  v1::HelperToChild out;
  out.mutable_call()->set_call_id(id);
  *out.mutable_call()->mutable_request() = req;
  out.mutable_call()->set_native_image(resolved.native_image);
  out.mutable_call()->set_max_active(resolved.max_active);
  out.mutable_call()->set_max_retained(resolved.max_retained);
  int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  out.mutable_call()->mutable_request()->set_budget_ms(std::max<int64_t>(1, left_ms));
  absl::Status w;
  {
    absl::MutexLock lock(&h->write_mu);
    w = WriteFrame(h->fd, out);
  }
  if (!w.ok()) {
    absl::MutexLock lock(&h->mu);
    h->pending.erase(id);
    return absl::UnavailableError("native helper unreachable");
  }

  absl::MutexLock lock(&h->mu);
  for (;;) {
    WaitArg arg{&slot->done, &h->dead};
    h->mu.AwaitWithTimeout(absl::Condition(&DoneOrDead, &arg), absl::Milliseconds(50));
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
      WaitArg final_arg{&slot->done, &h->dead};
      h->mu.AwaitWithTimeout(absl::Condition(&DoneOrDead, &final_arg), kFinalOutcomeGrace);
      if (slot->done) return std::move(slot->response);
      h->pending.erase(id);
      return absl::DeadlineExceededError("budget expired");
    }
  }
}

}  // namespace sn::privhelper
