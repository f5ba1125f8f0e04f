// engine_call --socket=PATH [--fresh]
// The "direct" side of tests/bench/request_bench: Engine-API calls made by the provider's own
// HTTP client (privhelper/docker BeastDockerEngine), timed in process. Reads one request per
// line on stdin, "METHOD TARGET", performs it and prints "STATUS MICROSECONDS BODY_BYTES".
// One engine serves every line, so GETs reuse a kept connection exactly as the native helper
// does; --fresh makes a new engine (a new connection) per line instead.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>

#include "privhelper/docker/beast_engine.h"

int main(int argc, char** argv) {
  std::string socket;
  bool fresh = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.substr(0, 9) == "--socket=") {
      socket = std::string(a.substr(9));
    } else if (a == "--fresh") {
      fresh = true;
    } else {
      std::cerr << "usage: engine_call --socket=PATH [--fresh]\n";
      return 2;
    }
  }
  if (socket.empty()) {
    std::cerr << "engine_call: --socket is required\n";
    return 2;
  }
  auto engine = std::make_unique<sn::docker::BeastDockerEngine>(socket);
  std::string line;
  while (std::getline(std::cin, line)) {
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) {
      std::cout << "error bad-line" << std::endl;
      continue;
    }
    if (fresh) engine = std::make_unique<sn::docker::BeastDockerEngine>(socket);
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<sn::docker::HttpResponse> r =
        engine->Request(line.substr(0, sp), line.substr(sp + 1), "", {});
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
    if (!r.ok()) {
      std::cout << "error " << r.status().ToString() << std::endl;
      continue;
    }
    std::cout << r->status << " " << us << " " << r->body.size() << std::endl;
  }
  return 0;
}
