// attack_client: what a compromised agent can do, as a command the audit tests run under the
// agent's uid. It calls privhelper's socket with hand-written requests (protobuf text format),
// any method name (also ones that do not exist), many at once, on one connection or several,
// and prints one line per call:
//   call=<i> status=<grpc code> error_code=<ExecuteResponse code> refusal=<Refusal> ms=<elapsed>
// followed by `response: <text>` for Probe (bounded). Exit status 0 when every call was made.
//
//   attack_client --socket=PATH --method=Probe|AdoptRelease|BeginPreparation|PutArtifact|
//                 FinishPreparation|CollectGeneration|ListGenerations|Execute|/any/method
//                 [--request=TEXTPROTO] [--spec_file=PATH] [--fill_content=N] [--fill_stdin=N]
//                 [--unknown_field=NUMBER] [--chunk_bytes=N] [--declare_payload=N]
//                 [--artifact_file=PATH [--artifact_from=N] [--cancel_after_bytes=N |
//                  --suspend_after_bytes=N]]
//                 [--calls=N] [--parallel] [--channels=K] [--deadline_ms=MS]
//                 [--requests_file=PATH]
//                 [--then_method=M --then_request=TEXTPROTO --then_after_file=PATH]
// --fill_content / --fill_stdin put N bytes into write_file.content / exec.stdin (large
// payloads without a large command line); Execute then streams them as the protocol says
// (the request, then chunks of --chunk_bytes, default 256 KiB), declaring --declare_payload
// bytes when given (a lie) and the true size otherwise. --spec_file supplies BeginPreparation's
// specification bytes, --release_dir AdoptRelease's metadata, --artifact_file PutArtifact's
// bytes (from byte --artifact_from on; with --cancel_after_bytes=N only N of them, after which
// the call is cancelled instead of half-closed, as a lost connection ends it; with
// --suspend_after_bytes=N only N of them, then `suspend` and the half-close, as the agent ends
// an upload whose download broke: what privhelper then holds is exactly N, whatever the
// timing). --requests_file gives each call its own request: call i takes line i (text format,
// one request per line; --calls defaults to the number of lines). --then_* makes one more call on the FIRST channel once the file
// --then_after_file exists (the test creates it when it has seen the other calls in flight):
// a violation or a bad argument next to honest calls on the same connection.
#include <google/protobuf/text_format.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "proto/privhelper.grpc.pb.h"

namespace {

namespace pb = ::sn::privhelper::v1;

struct Flags {
  std::string socket, method, request, spec_file;
  std::string release_dir;    // AdoptRelease: manifest.json, manifest.json.sig, SHA256SUMS
  std::string artifact_file;  // PutArtifact: the bytes to upload
  size_t fill_content = 0, fill_stdin = 0;
  int unknown_field = 0;  // adds a varint field with this number, unknown to the schema
  size_t chunk_bytes = 256 << 10;
  size_t artifact_from = 0;          // PutArtifact: send the file's bytes from this one on
  long cancel_after_bytes = -1;      // PutArtifact: cancel (no half-close) after this many
  long suspend_after_bytes = -1;     // PutArtifact: suspend + half-close after this many

  long declare_payload = -1;
  int calls = 1, channels = 1;
  bool parallel = false;
  int deadline_ms = 60000;
  std::string then_method, then_request, then_after_file;
  std::vector<std::string> requests;  // --requests_file: one per call
};

bool Parse(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto v = [&](std::string_view name) -> const char* {
      return a.substr(0, name.size()) == name ? argv[i] + name.size() : nullptr;
    };
    if (const char* x = v("--socket=")) f->socket = x;
    else if (const char* x = v("--method=")) f->method = x;
    else if (const char* x = v("--request=")) f->request = x;
    else if (const char* x = v("--spec_file=")) f->spec_file = x;
    else if (const char* x = v("--release_dir=")) f->release_dir = x;
    else if (const char* x = v("--artifact_file=")) f->artifact_file = x;
    else if (const char* x = v("--fill_content=")) f->fill_content = std::strtoull(x, nullptr, 10);
    else if (const char* x = v("--fill_stdin=")) f->fill_stdin = std::strtoull(x, nullptr, 10);
    else if (const char* x = v("--unknown_field=")) f->unknown_field = std::atoi(x);
    else if (const char* x = v("--chunk_bytes=")) f->chunk_bytes = std::strtoull(x, nullptr, 10);
    else if (const char* x = v("--artifact_from=")) f->artifact_from = std::strtoull(x, nullptr, 10);
    else if (const char* x = v("--cancel_after_bytes=")) f->cancel_after_bytes = std::atol(x);
    else if (const char* x = v("--suspend_after_bytes=")) f->suspend_after_bytes = std::atol(x);
    else if (const char* x = v("--declare_payload=")) f->declare_payload = std::atol(x);
    else if (const char* x = v("--calls=")) f->calls = std::atoi(x);
    else if (const char* x = v("--channels=")) f->channels = std::atoi(x);
    else if (a == "--parallel") f->parallel = true;
    else if (const char* x = v("--deadline_ms=")) f->deadline_ms = std::atoi(x);
    else if (const char* x = v("--then_method=")) f->then_method = x;
    else if (const char* x = v("--then_request=")) f->then_request = x;
    else if (const char* x = v("--then_after_file=")) f->then_after_file = x;
    else if (const char* x = v("--requests_file=")) {
      std::ifstream in(x);
      if (!in) return false;
      for (std::string line; std::getline(in, line);) {
        if (!line.empty()) f->requests.push_back(line);
      }
      if (f->requests.empty()) return false;
      f->calls = static_cast<int>(f->requests.size());
    }
    else return false;
  }
  return !f->socket.empty() && !f->method.empty() && f->calls > 0 && f->channels > 0;
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& socket, int index) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  args.SetMaxReceiveMessageSize(-1);
  args.SetInt("sn.attack.channel", index);  // distinct args: distinct connections
  return grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::mutex out_mu;

void Print(int i, const grpc::Status& s, const std::string& extra, long ms) {
  std::lock_guard<std::mutex> lock(out_mu);
  std::printf("call=%d status=%d %s ms=%ld\n", i, static_cast<int>(s.error_code()), extra.c_str(),
              ms);
  std::fflush(stdout);
}

// One call of `method` with `text` on `channel`.
void Call(int i, const Flags& f, const std::string& method, const std::string& text,
          const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(f.deadline_ms));
  const auto t0 = std::chrono::steady_clock::now();
  auto ms = [&] {
    return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now() - t0)
                                 .count());
  };
  auto stub = pb::PrivHelper::NewStub(channel);
  if (method == "Probe") {
    pb::ProbeRequest req;
    google::protobuf::TextFormat::ParseFromString(text, &req);
    pb::ProbeResponse resp;
    grpc::Status s = stub->Probe(&ctx, req, &resp);
    std::string t;
    google::protobuf::TextFormat::PrintToString(resp, &t);
    for (char& c : t) c = c == '\n' ? ' ' : c;
    Print(i, s, "response: " + t.substr(0, 4000), ms());
  } else if (method == "AdoptRelease" || method == "BeginPreparation" ||
             method == "PutArtifact" || method == "FinishPreparation") {
    pb::PreparationResult resp;
    grpc::Status s;
    if (method == "AdoptRelease") {
      pb::ReleaseMetadata req;
      google::protobuf::TextFormat::ParseFromString(text, &req);
      req.set_manifest(ReadAll(f.release_dir + "/manifest.json"));
      req.set_signature(ReadAll(f.release_dir + "/manifest.json.sig"));
      req.set_sha256sums(ReadAll(f.release_dir + "/SHA256SUMS"));
      s = stub->AdoptRelease(&ctx, req, &resp);
    } else if (method == "BeginPreparation") {
      pb::BeginPreparationRequest req;
      google::protobuf::TextFormat::ParseFromString(text, &req);
      if (!f.spec_file.empty()) req.set_specification(ReadAll(f.spec_file));
      s = stub->BeginPreparation(&ctx, req, &resp);
    } else if (method == "PutArtifact") {
      pb::ArtifactUpload header;
      google::protobuf::TextFormat::ParseFromString(text, header.mutable_header());
      std::string bytes = ReadAll(f.artifact_file);
      bytes = bytes.substr(std::min(f.artifact_from, bytes.size()));
      if (f.cancel_after_bytes >= 0) {
        bytes.resize(std::min(bytes.size(), static_cast<size_t>(f.cancel_after_bytes)));
      }
      if (f.suspend_after_bytes >= 0) {
        bytes.resize(std::min(bytes.size(), static_cast<size_t>(f.suspend_after_bytes)));
      }
      std::unique_ptr<grpc::ClientWriter<pb::ArtifactUpload>> w = stub->PutArtifact(&ctx, &resp);
      bool sent = w->Write(header);
      for (size_t at = 0; sent && at < bytes.size(); at += f.chunk_bytes) {
        pb::ArtifactUpload chunk;
        chunk.set_data(bytes.substr(at, f.chunk_bytes));
        sent = w->Write(chunk);
      }
      if (f.cancel_after_bytes >= 0) {
        // Ends without the half-close, once the bytes were written (a lost connection, say).
        // How much of them privhelper read before it saw the cancel depends on timing.
        usleep(300 * 1000);
        ctx.TryCancel();
      } else if (f.suspend_after_bytes >= 0) {
        pb::ArtifactUpload suspend;
        suspend.set_suspend(true);
        if (sent) sent = w->Write(suspend);
        w->WritesDone();
      } else {
        w->WritesDone();
      }
      s = w->Finish();
    } else {
      pb::FinishPreparationRequest req;
      google::protobuf::TextFormat::ParseFromString(text, &req);
      s = stub->FinishPreparation(&ctx, req, &resp);
    }
    Print(i, s,
          "diagnostic=" + pb::Diagnostic_Name(resp.diagnostic()) +
              " state=" + pb::GenerationState_Name(resp.state()) +
              " missing=" + std::to_string(resp.missing_artifacts_size()) +
              " partial=" +
              std::to_string(resp.partial_artifacts_size() > 0
                                 ? resp.partial_artifacts(0).held_bytes()
                                 : 0),
          ms());
  } else if (method == "CollectGeneration") {
    pb::CollectGenerationRequest req;
    google::protobuf::TextFormat::ParseFromString(text, &req);
    pb::CollectGenerationResult resp;
    grpc::Status s = stub->CollectGeneration(&ctx, req, &resp);
    std::string reason = resp.reason();
    for (char& c : reason) c = c == ' ' || c == '\n' ? '_' : c;
    Print(i, s,
          "outcome=" + pb::CollectOutcome_Name(resp.outcome()) +
              " diagnostic=" + pb::Diagnostic_Name(resp.diagnostic()) +
              " state=" + pb::GenerationState_Name(resp.state()) + " reason=" + reason,
          ms());
  } else if (method == "ListGenerations") {
    pb::ListGenerationsResponse resp;
    grpc::Status s = stub->ListGenerations(&ctx, pb::ListGenerationsRequest(), &resp);
    std::string t;
    google::protobuf::TextFormat::PrintToString(resp, &t);
    for (char& c : t) c = c == '\n' ? ' ' : c;
    Print(i, s, "response: " + t.substr(0, 4000), ms());
  } else if (method == "Execute") {
    pb::ExecuteRequest req;
    if (!google::protobuf::TextFormat::ParseFromString(text, &req)) {
      std::fprintf(stderr, "attack_client: bad text proto\n");
      std::exit(2);
    }
    std::string payload;
    if (f.fill_content > 0) payload.assign(f.fill_content, 'x');
    if (f.fill_stdin > 0) payload.assign(f.fill_stdin, 'x');
    if (f.unknown_field > 0) {
      req.GetReflection()->MutableUnknownFields(&req)->AddVarint(f.unknown_field, 0);
    }
    req.set_payload_bytes(f.declare_payload >= 0 ? f.declare_payload
                                                 : static_cast<long>(payload.size()));
    pb::ExecuteResponse resp;
    std::unique_ptr<grpc::ClientWriter<pb::ExecuteMessage>> w = stub->Execute(&ctx, &resp);
    pb::ExecuteMessage m;
    *m.mutable_request() = std::move(req);
    bool sent = w->Write(m);
    for (size_t at = 0; sent && at < payload.size(); at += f.chunk_bytes) {
      pb::ExecuteMessage chunk;
      chunk.set_payload(payload.substr(at, f.chunk_bytes));
      sent = w->Write(chunk);
    }
    w->WritesDone();
    grpc::Status s = w->Finish();
    Print(i, s,
          "error_code=" + pb::ErrorCode_Name(resp.error_code()) +
              " refusal=" + pb::Refusal_Name(resp.refusal()),
          ms());
  } else {
    // Any other method, as raw bytes through the generic stub.
    grpc::GenericStub generic(channel);
    grpc::ByteBuffer request, response;
    grpc::Slice slice(text);
    request = grpc::ByteBuffer(&slice, 1);
    grpc::Status status;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    generic.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                      [&](grpc::Status s) {
                        std::lock_guard<std::mutex> lock(mu);
                        status = s;
                        done = true;
                        cv.notify_all();
                      });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    Print(i, status, "", ms());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (!Parse(argc, argv, &f)) {
    std::fprintf(stderr, "usage: see attack_client.cc\n");
    return 2;
  }
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < f.channels; ++c) channels.push_back(NewChannel(f.socket, c));
  std::vector<std::thread> threads;
  for (int i = 0; i < f.calls; ++i) {
    auto run = [&f, i, &channels] {
      const std::string& text =
          f.requests.empty() ? f.request : f.requests[static_cast<size_t>(i) % f.requests.size()];
      Call(i, f, f.method, text, channels[static_cast<size_t>(i) % channels.size()]);
    };
    // With a --then_* call the calls must be in flight meanwhile: always in threads then.
    if (f.parallel || !f.then_method.empty()) {
      threads.emplace_back(run);
    } else {
      run();
    }
  }
  if (!f.then_method.empty()) {
    // Wait (bounded by the deadline) for the test's signal that the other calls are in flight.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(f.deadline_ms);
    while (!f.then_after_file.empty() && access(f.then_after_file.c_str(), F_OK) != 0 &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Call(-1, f, f.then_method, f.then_request, channels[0]);
  }
  for (std::thread& t : threads) t.join();
  return 0;
}
