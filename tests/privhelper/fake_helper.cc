// A misbehaving native helper for helper_manager_test, started through the real sandboxed
// spawn path with the real arguments. What it does depends on --generation=G:
//   7: announces HelperReady for G with protocol version kHelperProtocolVersion + 1
//   8: announces HelperReady for generation G + 1
//   9: announces nothing
// then waits for EOF on fd 3 and exits 0.
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
  if (generation != 9 && !sn::privhelper::WriteFrame(3, ready).ok()) return 4;
  char buf[256];
  while (read(3, buf, sizeof buf) > 0) {
  }
  return 0;
}
