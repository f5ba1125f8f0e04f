// artifact_stream_bench: the agent -> privhelper artifact hop alone (issue 9's preparation
// stream, docs/performance.md "Preparation"): a PutArtifact client stream of 64 MiB over a unix
// socket between two processes, privhelper's server style (sync service), with the server
// hashing (SHA-256) and writing each chunk to a file as the store's Writer does, for message
// sizes of 256 KiB and 1 MiB, the client writing inline or from a second thread that overlaps
// the next piece's production with the previous Write. Ratios within one run are what counts
// (absolute rates are noisy on a loaded machine).
//   bazel run -c opt //tests/bench:artifact_stream_bench
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "proto/privhelper.grpc.pb.h"

namespace pb = ::sn::privhelper::v1;

namespace {

constexpr size_t kTotal = size_t{64} << 20;

class Svc final : public pb::PrivHelper::Service {
  grpc::Status PutArtifact(grpc::ServerContext*, grpc::ServerReader<pb::ArtifactUpload>* reader,
                           pb::PreparationResult*) override {
    pb::ArtifactUpload m;
    if (!reader->Read(&m)) return grpc::Status::CANCELLED;
    const bool store = m.header().name() == "store";
    int fd = store ? open("/tmp/artifact_stream_bench.out", O_WRONLY | O_CREAT | O_TRUNC, 0600)
                   : -1;
    EVP_MD_CTX* h = EVP_MD_CTX_new();
    EVP_DigestInit_ex(h, EVP_sha256(), nullptr);
    while (reader->Read(&m)) {
      if (!store) continue;
      EVP_DigestUpdate(h, m.data().data(), m.data().size());
      if (write(fd, m.data().data(), m.data().size()) < 0) return grpc::Status::CANCELLED;
    }
    unsigned char md[32];
    EVP_DigestFinal_ex(h, md, nullptr);
    EVP_MD_CTX_free(h);
    if (fd >= 0) {
      fsync(fd);
      close(fd);
    }
    return grpc::Status::OK;
  }
};

void Serve(const std::string& path) {
  Svc svc;
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.SetMaxReceiveMessageSize(8 << 20);
  b.RegisterService(&svc);
  auto server = b.BuildAndStart();
  server->Wait();
}

double Run(pb::PrivHelper::Stub* stub, bool store, size_t chunk, bool threaded) {
  std::string piece(chunk, 'x');
  grpc::ClientContext ctx;
  pb::PreparationResult r;
  auto t0 = std::chrono::steady_clock::now();
  auto w = stub->PutArtifact(&ctx, &r);
  pb::ArtifactUpload header;
  header.mutable_header()->set_name(store ? "store" : "drop");
  w->Write(header);
  // The producer's own work per piece: a SHA-256 of it (the agent verifies what it forwards).
  EVP_MD_CTX* h = EVP_MD_CTX_new();
  EVP_DigestInit_ex(h, EVP_sha256(), nullptr);
  if (!threaded) {
    for (size_t sent = 0; sent < kTotal; sent += chunk) {
      pb::ArtifactUpload m;
      EVP_DigestUpdate(h, piece.data(), piece.size());
      m.set_data(piece);
      w->Write(m);
    }
  } else {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<pb::ArtifactUpload> q;
    bool done = false;
    std::thread sender([&] {
      for (;;) {
        pb::ArtifactUpload m;
        {
          std::unique_lock<std::mutex> l(mu);
          cv.wait(l, [&] { return !q.empty() || done; });
          if (q.empty()) return;
          m = std::move(q.front());
          q.pop_front();
        }
        cv.notify_all();
        w->Write(m);
      }
    });
    for (size_t sent = 0; sent < kTotal; sent += chunk) {
      pb::ArtifactUpload m;
      EVP_DigestUpdate(h, piece.data(), piece.size());
      m.set_data(piece);
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return q.size() < 2; });
      q.push_back(std::move(m));
      cv.notify_all();
    }
    {
      std::lock_guard<std::mutex> l(mu);
      done = true;
    }
    cv.notify_all();
    sender.join();
  }
  EVP_MD_CTX_free(h);
  w->WritesDone();
  w->Finish();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
  std::string path = "/tmp/artifact_stream_bench." + std::to_string(getpid()) + ".sock";
  unlink(path.c_str());
  pid_t child = fork();  // before this process touches gRPC
  if (child == 0) {
    Serve(path);
    _exit(0);
  }
  for (int i = 0; i < 200 && access(path.c_str(), F_OK) != 0; ++i) usleep(10000);
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(8 << 20);
  auto stub = pb::PrivHelper::NewStub(
      grpc::CreateCustomChannel("unix:" + path, grpc::InsecureChannelCredentials(), args));
  Run(stub.get(), false, 256 << 10, false);  // warm-up
  struct V {
    bool store;
    size_t chunk;
    bool threaded;
  };
  const V vs[] = {{false, 256 << 10, false}, {true, 256 << 10, false}, {true, 256 << 10, true},
                  {false, 1 << 20, false},   {true, 1 << 20, false},   {true, 1 << 20, true},
                  {true, 4 << 20, true}};
  for (int round = 0; round < 3; ++round) {
    for (const V& v : vs) {
      double s = Run(stub.get(), v.store, v.chunk, v.threaded);
      printf("round %d  %-18s %4zu KiB messages, %-8s %7.1f MiB/s\n", round + 1,
             v.store ? "hash+write+fsync" : "discard", v.chunk >> 10,
             v.threaded ? "threaded" : "inline", 64 / s);
      fflush(stdout);
    }
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  unlink(path.c_str());
  unlink("/tmp/artifact_stream_bench.out");
  return 0;
}
