// grpc_hop_bench: the cost of the agent -> privhelper hop alone. One Execute round trip (a
// client stream of one request message, as the agent sends an inspect) over a unix socket
// between two processes against privhelper's server style (sync service), with and without the
// lighter channel arguments (no BDP probe, minimal stack), beside a bare socketpair round trip
// between two processes. `bazel run -c opt //tests/bench:grpc_hop_bench`; docs/performance.md uses it to
// bound what a node hop can cost on a machine.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "proto/privhelper.grpc.pb.h"

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

double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

int main() {
  const Variant variants[] = {
      {"gRPC Execute stream", false, false},
      {"gRPC Execute stream, no BDP, minimal", true, true},
  };
  // A round trip between two processes with nothing but a socketpair: two wake-ups.
  {
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    pid_t p = fork();
    char b[64];
    if (p == 0) {
      close(sv[0]);
      for (;;) {
        if (read(sv[1], b, 64) <= 0) _exit(0);
        if (write(sv[1], b, 1) != 1) _exit(0);
      }
    }
    close(sv[1]);
    std::vector<double> us;
    for (int i = 0; i < 2000; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      if (write(sv[0], "x", 1) != 1 || read(sv[0], b, 64) != 1) break;
      us.push_back(std::chrono::duration<double, std::micro>(
                       std::chrono::steady_clock::now() - t0).count());
    }
    printf("%-42s p50 %7.1f us  p99 %7.1f us\n", "socketpair round trip (the floor)", Pct(us, 0.5),
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
    pid_t child = fork();
    if (child == 0) {
      Serve(path, v);
      _exit(0);
    }
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
    for (int i = 0; i < 1200; ++i) {
      pb::ExecuteMessage msg;
      msg.mutable_request()->set_request_id("r");
      msg.mutable_request()->mutable_inspect()->set_sandbox_id(
          "0b7e3c1a-5d2f-4e6a-8b9c-0d1e2f3a4b5c");
      pb::ExecuteResponse resp;
      grpc::ClientContext ctx;
      auto t0 = std::chrono::steady_clock::now();
      std::unique_ptr<grpc::ClientWriter<pb::ExecuteMessage>> w = stub->Execute(&ctx, &resp);
      w->WriteLast(msg, grpc::WriteOptions());
      w->Finish();
      if (i >= 200) {
        us.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - t0).count());
      }
    }
    printf("%-42s p50 %7.1f us  p99 %7.1f us\n", v.name, Pct(us, 0.5), Pct(us, 0.99));
    fflush(stdout);
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    unlink(path.c_str());
  }
  return 0;
}
