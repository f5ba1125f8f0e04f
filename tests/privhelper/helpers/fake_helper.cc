// A misbehaving native helper for helper_manager_test, started through the real sandboxed
// spawn path with the real arguments. What it does depends on --generation=G:
//   7: announces HelperReady for G with protocol version kHelperProtocolVersion + 1
//   8: announces HelperReady for generation G + 1
//   9: announces nothing
//  10: announces itself, and answers its first call with half a frame, then stalls
//  11: announces itself, and answers its first call with a frame that does not parse
//  12-17: announces itself, reads its first call and sends VmRequests for it (the microVM
//      provider's frames, privhelper/helpers/vm_permits.h), then answers the call with
//      success and an empty result whose exec exit code is the number of VmAnswers it got
//      with code 0:
//      12: boot of the call's own sandbox (permitted for a create)
//      13: boot of another sandbox
//      14: boot, and after its answer a second boot
//      15: boot for a call id privhelper never made
//      16: remove (a create permits only boot)
//      17: boot and, before its answer, a second request
// then waits for EOF on fd 3 and exits 0.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "privhelper/helpers/framing.h"
#include "proto/native_helper.pb.h"

namespace {

namespace pb = ::sn::privhelper::v1;

bool SendVm(uint64_t call_id, const std::string& sandbox, bool boot) {
  pb::HelperToParent out;
  out.mutable_vm()->set_call_id(call_id);
  out.mutable_vm()->set_sandbox_id(sandbox);
  if (boot) {
    out.mutable_vm()->mutable_boot();
  } else {
    out.mutable_vm()->mutable_remove();
  }
  return sn::privhelper::WriteFrame(3, out).ok();
}

// The next VmAnswer for `call_id` (frames for other calls are skipped); false at EOF.
bool AwaitAnswer(uint64_t call_id, int* code) {
  pb::HelperToChild in;
  while (sn::privhelper::ReadFrame(3, &in).ok()) {
    if (in.has_vm_answer() && in.vm_answer().call_id() == call_id) {
      *code = in.vm_answer().code();
      return true;
    }
  }
  return false;
}

int VmRequests(long generation) {
  pb::HelperToChild in;
  if (!sn::privhelper::ReadFrame(3, &in).ok() || !in.has_call()) return 5;
  const uint64_t id = in.call().call_id();
  const std::string own = in.call().request().create().sandbox_id();
  const std::string other = "0000dddd-0000-4000-8000-000000000009";
  int ok_answers = 0, code = -1;
  auto boot_and_wait = [&](uint64_t call, const std::string& sandbox) {
    if (!SendVm(call, sandbox, true) || !AwaitAnswer(call, &code)) return false;
    if (code == 0) ++ok_answers;
    return true;
  };
  bool alive = true;
  switch (generation) {
    case 12: alive = boot_and_wait(id, own); break;
    case 13: alive = boot_and_wait(id, other); break;
    case 14: alive = boot_and_wait(id, own) && boot_and_wait(id, own); break;
    case 15: alive = boot_and_wait(id + 1000, own); break;
    case 16: alive = SendVm(id, own, false) && AwaitAnswer(id, &code); break;
    case 17: alive = SendVm(id, own, true) && SendVm(id, own, true) && AwaitAnswer(id, &code); break;
  }
  if (!alive) return 0;  // privhelper hung up (it kills a helper that breaks the table)
  pb::HelperToParent result;
  result.mutable_result()->set_call_id(id);
  result.mutable_result()->mutable_response()->mutable_exec()->set_exit_code(ok_answers);
  if (!sn::privhelper::WriteFrame(3, result).ok()) return 6;
  char buf[256];
  while (read(3, buf, sizeof buf) > 0) {
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  long generation = 0;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.rfind("--generation=", 0) == 0) generation = strtol(argv[i] + 13, nullptr, 10);
  }
  sn::privhelper::v1::HelperToParent ready;
  ready.mutable_ready()->set_provider("docker");
  ready.mutable_ready()->set_generation(generation);
  ready.mutable_ready()->set_protocol_version(sn::privhelper::kHelperProtocolVersion);
  if (generation == 7) {
    ready.mutable_ready()->set_protocol_version(sn::privhelper::kHelperProtocolVersion + 1);
  }
  if (generation == 8) ready.mutable_ready()->set_generation(generation + 1);
  if (generation >= 10) {
    // Like the real helper, a filter of its own on top of the spawn's (privhelper checks that
    // a helper announcing itself has one); this one allows everything.
    sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    sock_fprog prog{1, allow};
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return 7;
  }
  if (generation != 9 && !sn::privhelper::WriteFrame(3, ready).ok()) return 4;
  char buf[256];
  if (generation == 10 || generation == 11) {
    if (read(3, buf, sizeof buf) <= 0) return 5;  // (the start of) the first call
    // 10: a header announcing 64 bytes, then 8 of them. 11: 8 bytes that are no message.
    const unsigned char half[] = {0, 0, 0, 64, 1, 2, 3, 4, 5, 6, 7, 8};
    const unsigned char junk[] = {0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    const unsigned char* out = generation == 10 ? half : junk;
    if (write(3, out, sizeof half) != static_cast<ssize_t>(sizeof half)) return 6;
  }
  if (generation >= 12 && generation <= 17) return VmRequests(generation);
  while (read(3, buf, sizeof buf) > 0) {
  }
  return 0;
}
