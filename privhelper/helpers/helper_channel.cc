#include "privhelper/helpers/helper_channel.h"

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "privhelper/helpers/framing.h"

namespace sn::privhelper {

void HelperManager::Helper::ReadOne() {
  reading = true;
  mu.Unlock();
  v1::HelperToParent msg;
  absl::Status s = ReadFrame(fd, &msg);
  mu.Lock();
  reading = false;
  if (!s.ok()) {
    dead = true;
    // EOF at a frame boundary is the helper's own exit; anything else breaks the framing.
    if (!absl::IsOutOfRange(s)) KillBroken(absl::StrCat("it broke its framing: ", s.message()));
    return;
  }
  Deliver(&msg);
}

void HelperManager::Helper::KillBroken(std::string_view why) {
  dead = true;
  broken = true;
  LogWarning("native helper killed", {{"generation", generation}, {"why", std::string(why)}});
  // Killed here, not by the reader thread: that thread sleeps until the helper hangs up,
  // which a stalled helper never does. The pid is still this helper's: only the reader
  // thread reaps, after it sees `dead` under mu, which this thread holds.
  kill(pid, SIGKILL);
}

void HelperManager::Helper::Answer(uint64_t call_id, const absl::Status& s) {
  v1::HelperToChild out;
  v1::VmAnswer* a = out.mutable_vm_answer();
  a->set_call_id(call_id);
  a->set_code(static_cast<int32_t>(s.code()));
  a->set_message(std::string(s.message().substr(0, kMaxVmAnswerMessageBytes)));
  absl::MutexLock lock(&write_mu);
  (void)WriteFrame(fd, out);  // a helper that is gone has no call to answer
}

void HelperManager::Helper::DeliverVm(v1::VmRequest* vm) {
  const uint64_t id = vm->call_id();
  auto it = pending.find(id);
  std::optional<std::string> breach;
  if (!has_vm_actions) {
    breach = "a VmRequest from a provider without VMs";
  } else if (it == pending.end()) {
    if (id == 0 || id >= next_call) {
      breach = "a VmRequest for a call privhelper never made";
    } else {
      // Its caller left, or its budget ended, while the helper worked: nothing is done.
      Answer(id, absl::FailedPreconditionError("the call is no longer in flight"));
      return;
    }
  } else {
    breach = VmRequestBreach(*it->second->request, *vm, it->second->vm_permits);
  }
  if (breach.has_value()) {
    KillBroken(*breach);
    return;
  }
  NoteVmRequest(*vm, &it->second->vm_permits);
  it->second->vm = std::move(*vm);
}

void HelperManager::Helper::ServeVm(Slot* slot, const ResolvedCall& resolved,
                                    const VmActions* actions) {
  v1::VmRequest vm = *std::move(slot->vm);
  slot->vm.reset();
  mu.Unlock();
  const absl::Status s =
      actions != nullptr ? (*actions)(*slot->request, resolved, vm)
                         : absl::DeadlineExceededError("the call's budget ended");
  Answer(vm.call_id(), s);
  mu.Lock();
  slot->vm_permits.outstanding = false;
}

void HelperManager::Helper::AwaitOrRead(const Slot& slot, absl::Time until) {
  struct Arg {
    const Slot* slot;
    const Helper* h;
  } arg{&slot, this};
  while (!slot.done && !dead && !slot.vm.has_value()) {
    const absl::Duration left = until - absl::Now();
    if (left <= absl::ZeroDuration()) return;
    if (reading) {
      // Another call (or the reader thread) reads: wait for the result, a VmRequest of this
      // call, or the socket.
      mu.AwaitWithTimeout(absl::Condition(
                              +[](Arg* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                return a->slot->done || a->slot->vm.has_value() ||
                                       a->h->dead || !a->h->reading;
                              },
                              &arg),
                          left);
      continue;
    }
    // Nobody reads: this call does, once the socket has something (polled, so the caller
    // still checks its budget and cancellation at `until`).
    reading = true;
    mu.Unlock();
    pollfd p{fd, POLLIN, 0};
    const int timeout_ms =
        static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(left), 1, 60000));
    const int n = poll(&p, 1, timeout_ms);
    mu.Lock();
    reading = false;
    if (n > 0) {
      ReadOne();
    } else if (n < 0 && errno != EINTR) {
      dead = true;
    }
  }
}


void HelperManager::Helper::Deliver(v1::HelperToParent* msg) {
  if (msg->has_vm()) {
    DeliverVm(msg->mutable_vm());
    return;
  }
  if (!msg->has_result()) return;
  auto it = pending.find(msg->result().call_id());
  if (it == pending.end()) {
    // The caller gave up (budget or cancellation) and answered already; the late outcome is
    // only logged (metadata, never outputs).
    LogWarning("late native helper result dropped",
               {{"generation", generation},
                {"call_id", static_cast<uint64_t>(msg->result().call_id())},
                {"error_code", static_cast<int>(msg->result().response().error_code())}});
    return;
  }
  it->second->response = std::move(*msg->mutable_result()->mutable_response());
  it->second->done = true;
  pending.erase(it);
}

}  // namespace sn::privhelper
