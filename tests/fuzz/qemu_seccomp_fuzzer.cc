// Fuzz target for qemu's seccomp policy parser (privhelper/native/microvm/qemu_seccomp.h): the
// input is a release's `seccomp` artifact, which privhelper (root) and the VM supervisor (root)
// read. Invariants, each aborting when broken:
//   1. a refusal is InvalidArgument and names the policy ("qemu seccomp policy: ...");
//   2. an accepted policy came from at most 64 KiB, names 1..512 distinct x86-64 calls (no
//      pseudo number) including execve, and compiles to a non-empty BPF program;
//   3. parsing is a function of the bytes: the same input gives the same answer.
#include <sys/syscall.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

#include "privhelper/native/microvm/qemu_seccomp.h"

namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sn::microvm;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<QemuSeccompPolicy> p = ParseQemuSeccompPolicy(text);
  const absl::StatusOr<QemuSeccompPolicy> again = ParseQemuSeccompPolicy(text);
  Require(p.ok() == again.ok());
  if (!p.ok()) {
    Require(absl::IsInvalidArgument(p.status()));
    Require(p.status().message().substr(0, 21) == "qemu seccomp policy: ");
    Require(again.status() == p.status());
    return 0;
  }
  Require(again->allowed == p->allowed);
  Require(size <= kMaxQemuSeccompBytes);
  Require(!p->allowed.empty() && p->allowed.size() <= kMaxQemuSeccompCalls);
  Require(std::set<int>(p->allowed.begin(), p->allowed.end()).size() == p->allowed.size());
  Require(std::all_of(p->allowed.begin(), p->allowed.end(), [](int nr) { return nr >= 0; }));
  Require(std::find(p->allowed.begin(), p->allowed.end(), SYS_execve) != p->allowed.end());
  const absl::StatusOr<std::vector<sock_filter>> program = CompileQemuSeccompPolicy(*p);
  Require(program.ok() && !program->empty());
  return 0;
}
