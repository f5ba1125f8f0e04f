// chain_bench: the required design's three hops in series, with no work of the node's in them.
//
//   "Core" (this process: a Beast WebSocket server on loopback TCP)
//     -> "agent" (a Beast WebSocket client that makes one sync gRPC Execute call per frame)
//     -> "privhelper" (a gRPC sync server whose Execute handler writes to a socketpair and
//        waits for the answer)
//     -> "helper" (reads the socketpair; with --engine-socket, makes one Engine-API GET on a
//        kept connection, timed in process, then answers)
//
// Each process does only its hop's transport and framing, so Core's round trip minus the
// helper's own Engine-API call is what the design's hops cost in series, as the node's path
// pays them: each process sleeps while the others (and dockerd) run, instead of the hot
// two-process ping-pong of grpc_hop_bench. Both gRPC ends run gRPC's "poll" engine, as the
// node's do, unless GRPC_POLL_STRATEGY says otherwise. docs/performance.md.
//
//   chain_bench [--iterations=N] [--gap-us=N] [--engine-socket=PATH --engine-path=PATH] [--stdin]
//
// --stdin: one round trip per line read from standard input, answered with one line
// "ROUND_TRIP_US CALL_US" (request_bench drives it between its other samples, so the chain
// shares their conditions); the run ends at end of input.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "proto/privhelper.grpc.pb.h"
#include "tests/bench/hops.h"

namespace pb = ::sn::privhelper::v1;
namespace net = boost::asio;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = net::ip::tcp;

namespace {

std::string engine_socket;
std::string engine_path = "/_ping";
int gap_us = 0;
bool from_stdin = false;

using sn::bench::kWsRequest;

using sn::bench::Pct;

bool ReadFull(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// The helper: one framed call in, (optionally) one Engine-API GET, one framed answer out that
// carries the GET's own time in microseconds.
void Helper(int fd) {
  net::io_context ioc;
  net::local::stream_protocol::socket s(ioc);
  boost::beast::flat_buffer hbuf;
  if (!engine_socket.empty()) {
    boost::system::error_code ec;
    s.connect(net::local::stream_protocol::endpoint(engine_socket), ec);
    if (ec) _exit(3);
  }
  char req[512];
  for (;;) {
    uint32_t len;
    if (!ReadFull(fd, &len, 4) || len > sizeof req || !ReadFull(fd, req, len)) _exit(0);
    double call_us = 0;
    if (!engine_socket.empty()) {
      auto t0 = std::chrono::steady_clock::now();
      http::request<http::empty_body> r(http::verb::get, engine_path, 11);
      r.set(http::field::host, "docker");
      boost::system::error_code ec;
      http::write(s, r, ec);
      http::response<http::string_body> resp;
      if (!ec) http::read(s, hbuf, resp, ec);
      if (ec || resp.result_int() != 200) _exit(4);
      call_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                    .count();
    }
    char out[64];
    int n = snprintf(out + 4, sizeof out - 4, "%.1f", call_us);
    uint32_t olen = static_cast<uint32_t>(n);
    memcpy(out, &olen, 4);
    if (write(fd, out, 4 + olen) != static_cast<ssize_t>(4 + olen)) _exit(0);
  }
}

class Svc final : public pb::PrivHelper::Service {
 public:
  explicit Svc(int fd) : fd_(fd) {}
  grpc::Status Execute(grpc::ServerContext*, grpc::ServerReader<pb::ExecuteMessage>* reader,
                       pb::ExecuteResponse* resp) override {
    pb::ExecuteMessage m;
    if (!reader->Read(&m)) return grpc::Status::CANCELLED;
    while (reader->Read(&m)) {
    }
    std::string body = m.request().inspect().sandbox_id();
    uint32_t len = static_cast<uint32_t>(body.size());
    std::string frame(reinterpret_cast<const char*>(&len), 4);
    frame += body;
    if (write(fd_, frame.data(), frame.size()) != static_cast<ssize_t>(frame.size())) {
      return grpc::Status::CANCELLED;
    }
    uint32_t rlen;
    char rb[64];
    if (!ReadFull(fd_, &rlen, 4) || rlen >= sizeof rb || !ReadFull(fd_, rb, rlen)) {
      return grpc::Status::CANCELLED;
    }
    resp->set_error_code(pb::ERROR_CODE_NONE);
    resp->mutable_sandbox()->set_sandbox_id(std::string(rb, rlen));
    return grpc::Status::OK;
  }

 private:
  const int fd_;
};

// The privhelper stand-in: forks the helper first (gRPC does not survive a fork), then serves.
void Privhelper(const std::string& path) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) _exit(1);
  sn::bench::RunInChild([&] {
    close(sv[0]);
    Helper(sv[1]);
  });
  close(sv[1]);
  Svc svc(sv[0]);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  b.RegisterService(&svc);
  auto server = b.BuildAndStart();
  server->Wait();
}

// The agent stand-in: one frame in, one gRPC call, one frame out.
void Agent(unsigned short port, const std::string& path) {
  for (int i = 0; i < 500 && access(path.c_str(), F_OK) != 0; ++i) usleep(10000);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto ch = grpc::CreateCustomChannel("unix:" + path, grpc::InsecureChannelCredentials(), args);
  auto stub = pb::PrivHelper::NewStub(ch);
  net::io_context ioc;
  websocket::stream<tcp::socket> ws(ioc);
  if (!sn::bench::ConnectAsNode(ws, port)) _exit(1);
  boost::system::error_code ec;
  boost::beast::flat_buffer buf;
  const pb::ExecuteMessage msg = sn::bench::InspectMessage();
  for (;;) {
    ws.read(buf, ec);
    if (ec) _exit(0);
    buf.consume(buf.size());
    pb::ExecuteResponse resp;
    if (!sn::bench::CallExecute(stub.get(), msg, &resp).ok()) _exit(2);
    std::string out = resp.sandbox().sandbox_id();
    out.resize(420, ' ');
    ws.write(net::buffer(out), ec);
    if (ec) _exit(0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The gRPC engine the node runs with (agent/cli/main.cc, privhelper/main.cc), for both gRPC
  // processes of the chain, unless the environment names one (to compare engines).
  setenv("GRPC_POLL_STRATEGY", "poll", 0);
  int iterations = 1000;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.substr(0, 13) == "--iterations=") {
      iterations = std::max(10, atoi(argv[i] + 13));
    } else if (a.substr(0, 9) == "--gap-us=") {
      gap_us = std::max(0, atoi(argv[i] + 9));
    } else if (a.substr(0, 16) == "--engine-socket=") {
      engine_socket = std::string(a.substr(16));
    } else if (a.substr(0, 14) == "--engine-path=") {
      engine_path = std::string(a.substr(14));
    } else if (a == "--stdin") {
      from_stdin = true;
    } else {
      fprintf(stderr,
              "usage: chain_bench [--iterations=N] [--gap-us=N] [--engine-socket=PATH "
              "--engine-path=PATH] [--stdin]\n");
      return 2;
    }
  }
  const std::string path = "/tmp/chain_bench." + std::to_string(getpid()) + ".sock";
  unlink(path.c_str());
  net::io_context ioc;
  tcp::acceptor acc(ioc, tcp::endpoint(net::ip::address_v4::loopback(), 0));
  const unsigned short port = acc.local_endpoint().port();
  const pid_t ph = sn::bench::RunInChild([&] {
    acc.close();
    Privhelper(path);
  });
  const pid_t ag = sn::bench::RunInChild([&] {
    acc.close();
    Agent(port, path);
  });
  std::vector<double> rt, call, over;
  boost::system::error_code ec;
  std::unique_ptr<websocket::stream<tcp::socket>> wsp;
  if (sn::bench::AcceptAsCore(acc, &wsp)) {
    websocket::stream<tcp::socket>& ws = *wsp;
    boost::beast::flat_buffer buf;
    char line[64];
    for (int i = 0; !ec && (from_stdin || i < iterations + iterations / 5); ++i) {
      if (from_stdin && fgets(line, sizeof line, stdin) == nullptr) break;
      if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
      auto t0 = std::chrono::steady_clock::now();
      ws.write(net::buffer(kWsRequest), ec);
      if (!ec) ws.read(buf, ec);
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
              .count();
      const double c = atof(boost::beast::buffers_to_string(buf.data()).c_str());
      buf.consume(buf.size());
      if (from_stdin) {
        printf("%.1f %.1f\n", ec ? -1.0 : us, c);
        fflush(stdout);
        continue;
      }
      if (!ec && i >= iterations / 5) {
        rt.push_back(us);
        call.push_back(c);
        over.push_back(us - c);
      }
    }
  }
  kill(ag, SIGKILL);
  kill(ph, SIGKILL);
  waitpid(ag, nullptr, 0);
  waitpid(ph, nullptr, 0);
  unlink(path.c_str());
  if (from_stdin) return ec ? 1 : 0;
  if (rt.empty()) {
    fprintf(stderr, "chain_bench: the chain failed\n");
    return 1;
  }
  printf("chain round trip p50 %7.1f us p99 %7.1f us; helper's call p50 %7.1f us; "
         "chain overhead (median of round trip - call) %7.1f us; p50(rt) - p50(call) %7.1f us\n",
         Pct(rt, 0.5), Pct(rt, 0.99), Pct(call, 0.5), Pct(over, 0.5),
         Pct(rt, 0.5) - Pct(call, 0.5));
  printf("chain_us %.1f %.1f %.1f\n", Pct(rt, 0.5), Pct(call, 0.5), Pct(over, 0.5));
  return 0;
}
