// The pieces of the design's hops that grpc_hop_bench (each hop alone) and chain_bench (the hops
// in series) share: the node's end of the WebSocket, one inspect-sized Execute call, the
// percentile both report, and the fork of each stand-in process. Header-only; benchmarks only.
#ifndef SANDBOX_NODE_TESTS_BENCH_HOPS_H_
#define SANDBOX_NODE_TESTS_BENCH_HOPS_H_

#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "proto/privhelper.grpc.pb.h"

namespace sn::bench {

// Runs fn() in a forked child, which exits after it (fn closes first what the child must not
// hold); returns the child's pid. Fork before this process touches gRPC: gRPC does not survive
// a fork of a process that uses it.
template <typename Fn>
pid_t RunInChild(Fn&& fn) {
  const pid_t pid = fork();
  if (pid == 0) {
    fn();
    _exit(0);
  }
  return pid;
}

// Nearest-rank percentile (p in [0, 1]) of the samples; 0 for none.
inline double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

// Sizes of an inspect's frames on the wire (request ~0.2 KiB, response ~0.4 KiB).
inline const std::string kWsRequest(220, 'q');
inline const std::string kWsResponse(420, 'r');

// Core's end of the WebSocket: accepts one connection on `acc`, upgrades, text frames. False on
// any failure.
inline bool AcceptAsCore(boost::asio::ip::tcp::acceptor& acc,
                         std::unique_ptr<boost::beast::websocket::stream<
                             boost::asio::ip::tcp::socket>>* ws) {
  boost::system::error_code ec;
  boost::asio::ip::tcp::socket sock(acc.get_executor());
  acc.accept(sock, ec);
  if (ec) return false;
  *ws = std::make_unique<boost::beast::websocket::stream<boost::asio::ip::tcp::socket>>(
      std::move(sock));
  (*ws)->accept(ec);
  if (ec) return false;
  (*ws)->text(true);
  return true;
}

// The node's end of the WebSocket: connects to Core on loopback `port`, upgrades, text frames.
// False on any failure.
inline bool ConnectAsNode(
    boost::beast::websocket::stream<boost::asio::ip::tcp::socket>& ws, unsigned short port) {
  boost::system::error_code ec;
  ws.next_layer().connect(
      boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), port), ec);
  if (ec) return false;
  ws.handshake("127.0.0.1", "/", ec);
  if (ec) return false;
  ws.text(true);
  return true;
}

// An inspect's Execute message, as the agent sends it (one message, then the half-close).
inline sn::privhelper::v1::ExecuteMessage InspectMessage() {
  sn::privhelper::v1::ExecuteMessage msg;
  msg.mutable_request()->set_request_id("r");
  msg.mutable_request()->mutable_inspect()->set_sandbox_id(
      "0b7e3c1a-5d2f-4e6a-8b9c-0d1e2f3a4b5c");
  return msg;
}

// One sync Execute call: the message with the half-close in one write, then the answer.
inline grpc::Status CallExecute(sn::privhelper::v1::PrivHelper::Stub* stub,
                                const sn::privhelper::v1::ExecuteMessage& msg,
                                sn::privhelper::v1::ExecuteResponse* resp) {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientWriter<sn::privhelper::v1::ExecuteMessage>> w =
      stub->Execute(&ctx, resp);
  w->WriteLast(msg, grpc::WriteOptions());
  return w->Finish();
}

}  // namespace sn::bench

#endif  // SANDBOX_NODE_TESTS_BENCH_HOPS_H_
