#include "privhelper/native/microvm/microvm_ops.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/sha256.h"
#include "privhelper/native/landlock.h"
#include "privhelper/native/outcomes.h"

namespace sn::native::microvm {
namespace {

namespace gv = ::sn::guest::v1;
using ::sn::microvm::VmEntry;
using ::sn::microvm::VmState;

// The store's sandboxes as one complete inventory shows them: `own` (when recorded) and the
// counts of the others by state.
struct Inventory {
  std::optional<VmEntry> own;
  int64_t running = 0, retained = 0;
  std::set<std::string> running_ids, retained_ids;
};

// The answer when the inventory cannot serve a call on its own sandbox: unavailable (unknown),
// not_found (a complete inventory without it), conflict (another generation's); nullopt when
// `inv->own` is this generation's VM.
std::optional<pb::ExecuteResponse> OwnVmRefusal(const absl::StatusOr<Inventory>& inv,
                                                int64_t generation, const CallControl& ctl) {
  if (!inv.ok()) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, ctl);
  if (!inv->own.has_value()) return ErrorResponse(pb::ERROR_CODE_NOT_FOUND, ctl);
  if (inv->own->definition.generation != generation) {
    return ErrorResponse(pb::ERROR_CODE_CONFLICT, ctl);
  }
  return std::nullopt;
}

absl::StatusOr<Inventory> Take(::sn::microvm::VmStore& store, const std::string& sandbox_id) {
  absl::StatusOr<std::vector<VmEntry>> all = store.Inventory();
  if (!all.ok()) return all.status();
  Inventory inv;
  for (VmEntry& e : *all) {
    const bool running = e.state == VmState::kRunning;
    (running ? inv.running : inv.retained) += 1;
    (running ? inv.running_ids : inv.retained_ids).insert(e.definition.sandbox_id);
    if (e.definition.sandbox_id == sandbox_id) inv.own = std::move(e);
  }
  return inv;
}

void LogFailure(std::string_view op, std::string_view step, const absl::Status& s) {
  // The status is the store's or privhelper's text, never the guest's: the channel does not
  // put guest text into statuses (guest_channel.h).
  LogWarning("microvm operation failed",
             {{"operation", op}, {"step", step}, {"detail", s.ToString()}});
}

// privhelper's answer to a VmRequest as the operation's outcome: a refusal privhelper made
// before acting is `failed` (FailedPrecondition, InvalidArgument, NotFound), `conflict`
// (AlreadyExists: another create won) or `unavailable` (Unavailable: it could not boot now and
// started nothing, e.g. the generation's boot files are missing, vm_host.h); no answer, or a
// failure while it acted (Internal, whatever the step said), is `uncertain`.
pb::ErrorCode ActionCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kAlreadyExists: return pb::ERROR_CODE_CONFLICT;
    case absl::StatusCode::kUnavailable: return pb::ERROR_CODE_UNAVAILABLE;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound: return pb::ERROR_CODE_FAILED;
    case absl::StatusCode::kResourceExhausted: return pb::ERROR_CODE_CAPACITY;
    default: return pb::ERROR_CODE_UNCERTAIN;
  }
}

// A VM whose main process did not start is stopped at once (its guest never answered, or
// refused): it does not keep a CPU busy booting or idling for nothing. Its overlay stays: the
// sandbox is `retained`, and a resume boots it again (the retry), a kill removes it.
void StopAfterFailedStart(::sn::microvm::VmStore& store, const std::string& sandbox_id) {
  absl::Status stopped = store.Stop(sandbox_id, absl::Now() + absl::Seconds(5));
  if (!stopped.ok()) LogFailure("start", "stop after a failed start", stopped);
}

absl::Status Ask(CallControl* ctl, const std::string& sandbox_id, bool boot) {
  if (!ctl->ask_privhelper) return absl::InternalError("the runtime cannot reach privhelper");
  pb::VmRequest vm;
  vm.set_sandbox_id(sandbox_id);
  if (boot) {
    vm.mutable_boot();
  } else {
    vm.mutable_remove();
  }
  ctl->native_started = true;
  return ctl->ask_privhelper(std::move(vm));
}

}  // namespace

std::string NativeId(const std::string& sandbox_id) { return "vm-" + sandbox_id; }


MicrovmOperations::MicrovmOperations(std::string store_root, int64_t generation)
    : root_(std::move(store_root)),
      store_([this] {
        ::sn::microvm::VmStoreOptions o;
        o.root = root_;
        return o;
      }()),
      generation_(generation) {}

absl::Status MicrovmOperations::PrepareForSandbox() {
  (void)Sha256Hex("");
  const std::string readable[] = {root_, "/proc"};
  return RestrictToReading(readable);
}

pb::ExecuteResponse MicrovmOperations::Create(const pb::CreateArgs& a, const Call& call) {
  CallControl* ctl = call.control;
  const std::string digest = CreateArgsDigest(a);
  absl::StatusOr<Inventory> inv = Take(store_, a.sandbox_id());
  if (!inv.ok()) {
    LogFailure("create", "inventory", inv.status());
    return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
  }
  if (inv->own.has_value()) {
    const VmEntry& e = *inv->own;
    if (e.definition.generation == generation_ && e.state == VmState::kRunning &&
        e.definition.args_digest == digest) {
      return SandboxOk(a.sandbox_id(), NativeId(a.sandbox_id()), pb::SANDBOX_STATE_RUNNING, *ctl);
    }
    return ErrorResponse(pb::ERROR_CODE_CONFLICT, *ctl);
  }
  if (CountWithInFlight(inv->running, inv->running_ids, call.resolved.in_flight_sandbox_ids,
                        a.sandbox_id()) > call.resolved.max_active) {
    return ErrorResponse(pb::ERROR_CODE_CAPACITY, *ctl);
  }
  if (call.resolved.native_image.empty()) return ErrorResponse(pb::ERROR_CODE_UNCONFIRMED, *ctl);
  if (Expired(*ctl)) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
  // privhelper records the definition (from the call it admitted, digest included), makes the
  // overlay and starts the VM.
  bool boot_failed = false;
  absl::Status started = BootAndStart("create", a.sandbox_id(), ctl, &boot_failed);
  if (boot_failed) return ErrorResponse(ActionCode(started), *ctl);
  if (!started.ok()) {
    if (absl::IsDeadlineExceeded(started)) return ErrorResponse(pb::ERROR_CODE_UNCERTAIN, *ctl);
    // The VM exists (confirmed) but its main process did not start: failed, with the receipt.
    pb::ExecuteResponse resp = ErrorResponse(pb::ERROR_CODE_FAILED, *ctl);
    pb::CreateSettled* s = resp.mutable_create_settled();
    s->set_request_id(call.request.request_id());
    s->set_sandbox_id(a.sandbox_id());
    s->set_native_id(NativeId(a.sandbox_id()));
    s->set_generation(generation_);
    return resp;
  }
  return SandboxOk(a.sandbox_id(), NativeId(a.sandbox_id()), pb::SANDBOX_STATE_RUNNING, *ctl);
}

pb::ExecuteResponse MicrovmOperations::Resume(const pb::ResumeArgs& a, const Call& call) {
  CallControl* ctl = call.control;
  absl::StatusOr<Inventory> inv = Take(store_, a.sandbox_id());
  if (auto early = OwnVmRefusal(inv, generation_, *ctl)) return *early;
  const VmEntry& e = *inv->own;
  const std::string native = NativeId(a.sandbox_id());
  if (e.state == VmState::kRunning) {
    return SandboxOk(a.sandbox_id(), native, pb::SANDBOX_STATE_RUNNING, *ctl);
  }
  if (a.reconciliation_only()) {
    return SandboxOk(a.sandbox_id(), native, pb::SANDBOX_STATE_RETAINED, *ctl);
  }
  if (CountWithInFlight(inv->running, inv->running_ids, call.resolved.in_flight_sandbox_ids,
                        a.sandbox_id()) > call.resolved.max_active) {
    return ErrorResponse(pb::ERROR_CODE_CAPACITY, *ctl);
  }
  if (Expired(*ctl)) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
  bool boot_failed = false;
  absl::Status started = BootAndStart("resume", a.sandbox_id(), ctl, &boot_failed);
  if (boot_failed) return ErrorResponse(ActionCode(started), *ctl);
  if (!started.ok()) return ErrorResponse(pb::ERROR_CODE_UNCERTAIN, *ctl);
  return SandboxOk(a.sandbox_id(), native, pb::SANDBOX_STATE_RUNNING, *ctl);
}

absl::Status MicrovmOperations::BootAndStart(std::string_view op, const std::string& sandbox_id,
                                             CallControl* ctl, bool* boot_failed) {
  if (absl::Status booted = Ask(ctl, sandbox_id, /*boot=*/true); !booted.ok()) {
    LogFailure(op, "boot", booted);
    *boot_failed = true;
    return booted;
  }
  channels_.Forget(sandbox_id);  // a resumed VM's qemu is new: the old channel hung up
  absl::Status started = store_.StartMainProcess(sandbox_id, ctl->deadline);
  if (!started.ok()) {
    LogFailure(op, "main process", started);
    StopAfterFailedStart(store_, sandbox_id);
  }
  return started;
}

pb::ExecuteResponse MicrovmOperations::KillCompute(const pb::SandboxArgs& a, const Call& call) {
  CallControl* ctl = call.control;
  absl::StatusOr<Inventory> inv = Take(store_, a.sandbox_id());
  if (auto early = OwnVmRefusal(inv, generation_, *ctl)) return *early;
  if (inv->own->state == VmState::kRetained) return NoResultOk(*ctl);  // already retained
  if (CountWithInFlight(inv->retained, inv->retained_ids, call.resolved.in_flight_sandbox_ids,
                        a.sandbox_id()) > call.resolved.max_retained) {
    return ErrorResponse(pb::ERROR_CODE_CAPACITY, *ctl);
  }
  ctl->native_started = true;
  // The guest syncs and powers off; the overlay stays. The power-off's connection is not kept
  // waiting behind an idle kept one.
  channels_.Forget(a.sandbox_id());
  if (absl::Status s = store_.Stop(a.sandbox_id(), ctl->deadline); !s.ok()) {
    LogFailure("kill_compute", "stop", s);
    return ErrorResponse(pb::ERROR_CODE_UNCERTAIN, *ctl);
  }
  return NoResultOk(*ctl);
}

pb::ExecuteResponse MicrovmOperations::Kill(const pb::SandboxArgs& a, const Call& call) {
  CallControl* ctl = call.control;
  absl::StatusOr<Inventory> inv = Take(store_, a.sandbox_id());
  if (auto early = OwnVmRefusal(inv, generation_, *ctl)) return *early;
  ctl->native_started = true;
  channels_.Forget(a.sandbox_id());
  if (inv->own->state == VmState::kRunning) {
    if (absl::Status s = store_.Stop(a.sandbox_id(), ctl->deadline); !s.ok()) {
      LogFailure("kill", "stop", s);
      return ErrorResponse(pb::ERROR_CODE_UNCERTAIN, *ctl);
    }
  }
  if (absl::Status removed = Ask(ctl, a.sandbox_id(), /*boot=*/false); !removed.ok()) {
    LogFailure("kill", "remove", removed);
    return ErrorResponse(pb::ERROR_CODE_UNCERTAIN, *ctl);
  }
  return NoResultOk(*ctl);
}

pb::ExecuteResponse MicrovmOperations::DeleteRetained(const pb::SandboxArgs& a,
                                                      const Call& call) {
  CallControl* ctl = call.control;
  absl::StatusOr<Inventory> inv = Take(store_, a.sandbox_id());
  if (auto early = OwnVmRefusal(inv, generation_, *ctl)) return *early;
  if (inv->own->state == VmState::kRunning) return ErrorResponse(pb::ERROR_CODE_CONFLICT, *ctl);
  channels_.Forget(a.sandbox_id());  // its qemu is gone: a kept channel only holds a descriptor
  // privhelper refuses (FailedPrecondition) a VM that started meanwhile.
  if (absl::Status removed = Ask(ctl, a.sandbox_id(), /*boot=*/false); !removed.ok()) {
    LogFailure("delete_retained", "remove", removed);
    return ErrorResponse(absl::IsFailedPrecondition(removed) ? pb::ERROR_CODE_CONFLICT
                                                             : pb::ERROR_CODE_UNCERTAIN,
                         *ctl);
  }
  return NoResultOk(*ctl);
}

pb::ExecuteResponse MicrovmOperations::Inspect(const pb::SandboxArgs& a, const Call& call) {
  CallControl* ctl = call.control;
  absl::StatusOr<VmEntry> e = store_.Find(a.sandbox_id());
  if (absl::IsNotFound(e.status())) {
    return SandboxOk(a.sandbox_id(), "", pb::SANDBOX_STATE_ABSENT, *ctl);
  }
  if (!e.ok()) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
  if (e->definition.generation != generation_) return ErrorResponse(pb::ERROR_CODE_CONFLICT, *ctl);
  return SandboxOk(a.sandbox_id(), NativeId(a.sandbox_id()),
                   e->state == VmState::kRunning ? pb::SANDBOX_STATE_RUNNING
                                                 : pb::SANDBOX_STATE_RETAINED,
                   *ctl);
}

std::optional<gv::FromGuest> MicrovmOperations::Exchange(const std::string& sandbox_id,
                                                         gv::ToGuest request, CallControl* ctl,
                                                         pb::ErrorCode* error) {
  absl::StatusOr<VmEntry> e = store_.Find(sandbox_id);
  if (!e.ok()) {
    *error = absl::IsNotFound(e.status()) ? pb::ERROR_CODE_NOT_FOUND : pb::ERROR_CODE_UNAVAILABLE;
    return std::nullopt;
  }
  if (e->definition.generation != generation_ || e->state != VmState::kRunning) {
    *error = pb::ERROR_CODE_CONFLICT;
    return std::nullopt;
  }
  // The VM's kept channel when it has one (channel_pool.h), else a new connection.
  absl::StatusOr<::sn::microvm::GuestChannelPool::Lease> channel = channels_.Acquire(
      sandbox_id, ctl->deadline,
      [this, &sandbox_id](absl::Time deadline) { return store_.Connect(sandbox_id, deadline); });
  if (!channel.ok()) {
    LogFailure("guest exchange", "connect", channel.status());
    *error = pb::ERROR_CODE_UNAVAILABLE;
    return std::nullopt;
  }
  ctl->native_started = true;
  absl::StatusOr<gv::FromGuest> answer = (*channel)->Call(std::move(request), ctl->deadline);
  if (!answer.ok()) {
    LogFailure("guest exchange", "call", answer.status());
    *error = pb::ERROR_CODE_UNCERTAIN;
    return std::nullopt;
  }
  if (answer->has_error()) {
    *error = answer->error().code() == gv::ERROR_INVALID ? pb::ERROR_CODE_INVALID
                                                        : pb::ERROR_CODE_FAILED;
    return std::nullopt;
  }
  return *std::move(answer);
}

pb::ExecuteResponse MicrovmOperations::Exec(const pb::ExecArgs& a, const Call& call) {
  CallControl* ctl = call.control;
  gv::ToGuest req;
  gv::Exec* x = req.mutable_exec();
  for (const std::string& arg : a.argv()) x->add_argv(arg);
  x->set_stdin(a.stdin());
  x->set_output_limit_bytes(a.output_limit_bytes());
  // The guest kills the process group at the call's deadline, less a margin for the answer.
  const int64_t left = absl::ToInt64Milliseconds(ctl->deadline - absl::Now()) - 200;
  if (left <= 0) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
  x->set_timeout_ms(left);
  pb::ErrorCode error = pb::ERROR_CODE_UNAVAILABLE;
  std::optional<gv::FromGuest> answer = Exchange(a.sandbox_id(), std::move(req), ctl, &error);
  if (!answer.has_value()) return ErrorResponse(error, *ctl);
  pb::ExecuteResponse r = NoResultOk(*ctl);
  pb::ExecResult* out = r.mutable_exec();
  out->set_exit_code(answer->exec().exit_code());
  out->set_stdout(std::move(*answer->mutable_exec()->mutable_stdout()));
  out->set_stderr(std::move(*answer->mutable_exec()->mutable_stderr()));
  out->set_truncated(answer->exec().truncated());
  return r;
}

pb::ExecuteResponse MicrovmOperations::WriteFile(const pb::WriteFileArgs& a, const Call& call) {
  CallControl* ctl = call.control;
  gv::ToGuest req;
  gv::WriteFile* w = req.mutable_write_file();
  w->set_path(a.path());
  w->set_content(a.content());
  w->set_mode(static_cast<uint32_t>(a.mode()));
  pb::ErrorCode error = pb::ERROR_CODE_UNAVAILABLE;
  std::optional<gv::FromGuest> answer = Exchange(a.sandbox_id(), std::move(req), ctl, &error);
  if (!answer.has_value()) return ErrorResponse(error, *ctl);
  pb::ExecuteResponse r = NoResultOk(*ctl);
  r.mutable_write_file()->set_size(answer->write_file().size());
  return r;
}

pb::ExecuteResponse MicrovmOperations::ReadFile(const pb::ReadFileArgs& a, const Call& call) {
  CallControl* ctl = call.control;
  gv::ToGuest req;
  req.mutable_read_file()->set_path(a.path());
  req.mutable_read_file()->set_max_bytes(a.max_bytes());
  pb::ErrorCode error = pb::ERROR_CODE_UNAVAILABLE;
  std::optional<gv::FromGuest> answer = Exchange(a.sandbox_id(), std::move(req), ctl, &error);
  // read_file changes nothing: a lost exchange is unavailable, never uncertain.
  if (!answer.has_value()) {
    return ErrorResponse(error == pb::ERROR_CODE_UNCERTAIN ? pb::ERROR_CODE_UNAVAILABLE : error,
                         *ctl);
  }
  pb::ExecuteResponse r = NoResultOk(*ctl);
  pb::ReadFileResult* out = r.mutable_read_file();
  out->set_content(std::move(*answer->mutable_read_file()->mutable_content()));
  out->set_size(answer->read_file().size());
  out->set_truncated(answer->read_file().truncated());
  return r;
}

}  // namespace sn::native::microvm
