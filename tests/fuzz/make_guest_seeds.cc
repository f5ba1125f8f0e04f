// Writes seed inputs of guest_answer_fuzzer (its header gives the layout) into the directory
// named by argv[1]: one accepted answer of every kind, and the near misses the host refuses.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "proto/guest_agent.pb.h"

namespace {

using sn::guest::v1::FromGuest;

std::string Input(uint8_t kind, uint64_t param, const FromGuest& a) {
  std::string out(1, static_cast<char>(kind));
  for (int i = 7; i >= 0; --i) out += static_cast<char>(param >> (8 * i));
  return out + a.SerializeAsString();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  int n = 0;
  auto write = [&](const std::string& bytes) {
    std::ofstream(std::string(argv[1]) + "/seed_" + std::to_string(n++), std::ios::binary)
        << bytes;
  };
  const uint64_t p = 0x10000 + 100;  // id = 1 + (p & 0xff) = 101; limit/max = p % 70000 - 10
  const uint64_t id = 1 + (p & 0xff);
  FromGuest a;
  a.set_id(id);
  a.mutable_ready()->set_nonce(p);
  a.mutable_ready()->set_protocol_version(1);
  a.mutable_ready()->set_kernel_release("6.1.0-sandbox-node");
  write(Input(0, p, a));
  a.mutable_ready()->set_protocol_version(2);
  write(Input(0, p, a));
  a.Clear();
  a.set_id(id);
  a.mutable_done();
  write(Input(1, p, a));
  write(Input(5, p, a));
  write(Input(6, p, a));
  write(Input(2, p, a));  // another kind
  a.Clear();
  a.set_id(id);
  a.mutable_exec()->set_exit_code(1);
  a.mutable_exec()->set_stdout("hello");
  a.mutable_exec()->set_stderr("err");
  a.mutable_exec()->set_truncated(true);
  write(Input(2, p, a));
  a.mutable_exec()->set_stdout(std::string(70000, 'x'));
  write(Input(2, p, a));
  a.Clear();
  a.set_id(id);
  a.mutable_write_file()->set_size(static_cast<int64_t>(p % 300));
  write(Input(3, p, a));
  a.Clear();
  a.set_id(id);
  a.mutable_read_file()->set_content("abc");
  a.mutable_read_file()->set_size(3);
  write(Input(4, p, a));
  a.mutable_read_file()->set_size(9);
  a.mutable_read_file()->set_truncated(true);
  write(Input(4, p, a));
  a.Clear();
  a.set_id(id);
  a.mutable_error()->set_code(sn::guest::v1::ERROR_NOT_FOUND);
  a.mutable_error()->set_message("open: No such file or directory");
  write(Input(4, p, a));
  a.set_id(id + 1);
  write(Input(4, p, a));
  std::printf("%d seeds\n", n);
  return 0;
}
