// grpc_hop_bench [--iterations=N] [--gap-us=N] [--floor-line]: what each hop of the required design costs at
// best between two processes on this machine, with nothing but the hop's own transport and
// framing:
//  - a WebSocket round trip over loopback TCP (Beast on both sides, no TLS, no compression):
//    "Core" (the server) sends an inspect-sized request frame, the "node" (the client) answers
//    with an inspect-sized, masked response frame, as Core and the agent do;
//  - one Execute round trip (a client stream of one request message, as the agent sends an
//    inspect) over a unix socket against privhelper's server style (sync service), with and
//    without the lighter channel arguments (no BDP probe, minimal stack);
//  - a bare socketpair round trip (privhelper <-> native helper: two wake-ups).
// The floor of one request is their sum, with the fastest gRPC variant: `--floor-line` ends the
// output with one line "floor_us WS GRPC SOCKETPAIR TOTAL" (p50s, microseconds) for
// tests/bench/request_bench's inspect_overhead mode, which runs this in the same invocation.
// `--gap-us=N` sleeps N microseconds before every round trip, so that both ends block and their
// CPUs may go idle between round trips as the node's processes do between requests (the
// floor itself is measured with no gap: two processes in a tight ping-pong).
// `bazel run -c opt //tests/bench:grpc_hop_bench`; docs/performance.md.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "proto/privhelper.grpc.pb.h"
#include "tests/bench/hops.h"

namespace pb = ::sn::privhelper::v1;

class Svc final : public pb::PrivHelper::Service {
  grpc::Status Execute(grpc::ServerContext*, grpc::ServerReader<pb::ExecuteMessage>* reader,
                       pb::ExecuteResponse* resp) override {
    pb::ExecuteMessage m;
    if (!reader->Read(&m)) return grpc::Status::CANCELLED;
    while (reader->Read(&m)) {
    }
    resp->set_error_code(pb::ERROR_CODE_NONE);
    resp->mutable_sandbox()->set_sandbox_id(m.request().inspect().sandbox_id());
    return grpc::Status::OK;
  }
};

struct Variant {
  const char* name;
  bool bdp_off;
  bool minimal;
};

void Serve(const std::string& path, const Variant& v) {
  Svc svc;
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  if (v.bdp_off) b.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  if (v.minimal) b.AddChannelArgument(GRPC_ARG_MINIMAL_STACK, 1);
  b.RegisterService(&svc);
  auto server = b.BuildAndStart();
  server->Wait();
}

int gap_us = 0;  // --gap-us: idle time before every round trip

void Gap() {
  if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
}

using sn::bench::Pct;

namespace net = boost::asio;
namespace websocket = boost::beast::websocket;
using tcp = net::ip::tcp;

using sn::bench::kWsRequest;
using sn::bench::kWsResponse;

// The node's side: connects, upgrades, answers every message until the connection ends.
void WsNode(unsigned short port) {
  net::io_context ioc;
  websocket::stream<tcp::socket> ws(ioc);
  if (!sn::bench::ConnectAsNode(ws, port)) _exit(1);
  boost::system::error_code ec;
  boost::beast::flat_buffer buf;
  for (;;) {
    ws.read(buf, ec);
    if (ec) _exit(0);
    buf.consume(buf.size());
    ws.write(net::buffer(kWsResponse), ec);
    if (ec) _exit(0);
  }
}

// Core's side: the round trips, timed. Returns the samples (microseconds).
std::vector<double> WsRoundTrips(int iterations) {
  net::io_context ioc;
  tcp::acceptor acc(ioc, tcp::endpoint(net::ip::address_v4::loopback(), 0));
  const unsigned short port = acc.local_endpoint().port();
  const pid_t child = sn::bench::RunInChild([&] {
    acc.close();
    WsNode(port);
  });
  std::vector<double> us;
  boost::system::error_code ec;
  std::unique_ptr<websocket::stream<tcp::socket>> wsp;
  if (sn::bench::AcceptAsCore(acc, &wsp)) {
    websocket::stream<tcp::socket>& ws = *wsp;
    boost::beast::flat_buffer buf;
    for (int i = 0; !ec && i < iterations + iterations / 5; ++i) {
      Gap();
      auto t0 = std::chrono::steady_clock::now();
      ws.write(net::buffer(kWsRequest), ec);
      if (!ec) ws.read(buf, ec);
      buf.consume(buf.size());
      if (!ec && i >= iterations / 5) {
        us.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - t0).count());
      }
    }
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return us;
}

int main(int argc, char** argv) {
  int iterations = 1000;  // timed round trips per hop (after a fifth as many warm-up ones)
  bool floor_line = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.substr(0, 13) == "--iterations=") {
      iterations = std::max(10, atoi(argv[i] + 13));
    } else if (a.substr(0, 9) == "--gap-us=") {
      gap_us = std::max(0, atoi(argv[i] + 9));
    } else if (a == "--floor-line") {
      floor_line = true;
    } else {
      fprintf(stderr, "usage: grpc_hop_bench [--iterations=N] [--gap-us=N] [--floor-line]\n");
      return 2;
    }
  }
  std::vector<double> ws_us = WsRoundTrips(iterations);
  if (ws_us.empty()) {
    fprintf(stderr, "grpc_hop_bench: the WebSocket round trip failed\n");
    return 1;
  }
  printf("%-42s p50 %7.1f us  p99 %7.1f us\n", "WebSocket round trip (loopback TCP)",
         Pct(ws_us, 0.5), Pct(ws_us, 0.99));
  fflush(stdout);
  const Variant variants[] = {
      {"gRPC Execute stream", false, false},
      {"gRPC Execute stream, no BDP, minimal", true, true},
  };
  double socketpair_p50 = 0;
  double grpc_p50 = 0;  // the fastest variant's
  // A round trip between two processes with nothing but a socketpair: two wake-ups.
  {
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    char b[64];
    const pid_t p = sn::bench::RunInChild([&] {
      close(sv[0]);
      while (read(sv[1], b, 64) > 0 && write(sv[1], b, 1) == 1) {
      }
    });
    close(sv[1]);
    std::vector<double> us;
    for (int i = 0; i < 2 * iterations; ++i) {
      Gap();
      auto t0 = std::chrono::steady_clock::now();
      if (write(sv[0], "x", 1) != 1 || read(sv[0], b, 64) != 1) break;
      us.push_back(std::chrono::duration<double, std::micro>(
                       std::chrono::steady_clock::now() - t0).count());
    }
    socketpair_p50 = Pct(us, 0.5);
    printf("%-42s p50 %7.1f us  p99 %7.1f us\n", "socketpair round trip", socketpair_p50,
           Pct(us, 0.99));
    fflush(stdout);
    close(sv[0]);
    waitpid(p, nullptr, 0);
  }
  // Every server process is forked before this process touches gRPC (gRPC does not survive a
  // fork of a process that uses it).
  std::vector<std::string> paths;
  std::vector<pid_t> children;
  for (const Variant& v : variants) {
    std::string path = "/tmp/grpc_hop_bench." + std::to_string(getpid()) + "." +
                       std::to_string(paths.size()) + ".sock";
    unlink(path.c_str());
    const pid_t child = sn::bench::RunInChild([&] { Serve(path, v); });
    paths.push_back(path);
    children.push_back(child);
  }
  for (size_t k = 0; k < paths.size(); ++k) {
    const Variant& v = variants[k];
    const std::string& path = paths[k];
    const pid_t child = children[k];
    for (int i = 0; i < 200 && access(path.c_str(), F_OK) != 0; ++i) usleep(10000);
    grpc::ChannelArguments args;
    if (v.bdp_off) args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    if (v.minimal) args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
    auto ch = grpc::CreateCustomChannel("unix:" + path, grpc::InsecureChannelCredentials(), args);
    auto stub = pb::PrivHelper::NewStub(ch);
    std::vector<double> us;
    for (int i = 0; i < iterations + iterations / 5; ++i) {
      const pb::ExecuteMessage msg = sn::bench::InspectMessage();
      pb::ExecuteResponse resp;
      Gap();
      auto t0 = std::chrono::steady_clock::now();
      (void)sn::bench::CallExecute(stub.get(), msg, &resp);
      if (i >= iterations / 5) {
        us.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - t0).count());
      }
    }
    const double p50 = Pct(us, 0.5);
    if (!us.empty() && (grpc_p50 == 0 || p50 < grpc_p50)) grpc_p50 = p50;
    printf("%-42s p50 %7.1f us  p99 %7.1f us\n", v.name, p50, Pct(us, 0.99));
    fflush(stdout);
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    unlink(path.c_str());
  }
  if (grpc_p50 == 0 || socketpair_p50 == 0) {
    fprintf(stderr, "grpc_hop_bench: a hop failed\n");
    return 1;
  }
  const double ws_p50 = Pct(ws_us, 0.5);
  printf("%-42s p50 %7.1f us\n", "floor: WebSocket + fastest gRPC + socketpair",
         ws_p50 + grpc_p50 + socketpair_p50);
  if (floor_line) {
    printf("floor_us %.1f %.1f %.1f %.1f\n", ws_p50, grpc_p50, socketpair_p50,
           ws_p50 + grpc_p50 + socketpair_p50);
  }
  return 0;
}
