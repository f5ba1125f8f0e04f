// A misbehaving native helper for helper_manager_test, started through the real sandboxed
// spawn path with the real arguments. What it does depends on --generation=G:
//   7: announces HelperReady for G with protocol version kHelperProtocolVersion + 1
//   8: announces HelperReady for generation G + 1
//   9: announces nothing
//  10: announces itself, and answers its first call with half a frame, then stalls
//  11: announces itself, and answers its first call with a frame that does not parse
// then waits for EOF on fd 3 and exits 0.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>

#include "privhelper/helpers/framing.h"
#include "proto/native_helper.pb.h"

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
  while (read(3, buf, sizeof buf) > 0) {
  }
  return 0;
}
