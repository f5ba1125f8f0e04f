// An in-process privhelper for the agent's tests: the preparation RPCs of
// proto/privhelper.proto served over gRPC on a unix socket (and the retirement RPCs with
// answers the test sets: ListGenerations, CollectGeneration), with privhelper's own checks in
// miniature (the release verified with its key, each artifact's size and SHA-256 checked on a
// clean end of its stream, a generation READY once every artifact is stored), and Probe
// reporting its generations. Records every call so tests can assert what reached privhelper.
#ifndef SANDBOX_NODE_TESTS_AGENT_FAKES_FAKE_PRIVHELPER_H_
#define SANDBOX_NODE_TESTS_AGENT_FAKES_FAKE_PRIVHELPER_H_

#include <grpcpp/grpcpp.h>
#include <stdlib.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/release/ed25519.h"
#include "common/release/verify.h"
#include "common/sha256.h"
#include "common/wire/http_bodies.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::agent::testing {

namespace pbf = ::sn::privhelper::v1;

class FakePrivhelperService final : public pbf::PrivHelper::Service {
 public:
  // What an upload stream ended as.
  struct Upload {
    std::string name;
    uint64_t offset = 0;  // the header's
    std::string bytes;    // the data after it
    size_t chunks = 0;
    size_t largest_chunk = 0;
    bool clean_end = false;   // the client half-closed (never after a cancellation)
    bool suspended = false;   // the client sent `suspend` (keep the bytes as a partial)
    bool published = false;   // size and SHA-256 matched the adopted manifest
  };

  explicit FakePrivhelperService(release::PublicKey key) : key_(std::move(key)) {}

  // ---- test controls (any thread) ----
  void RefuseNext(const std::string& rpc, pbf::Diagnostic d,
                  pbf::GenerationState state = pbf::GENERATION_STATE_PREPARING) {
    absl::MutexLock l(&mu_);
    refusals_[rpc] = {d, state};
  }
  // A partial privhelper holds of an artifact (BeginPreparation reports its size; a
  // PutArtifact at exactly that offset continues it). Kept, like privhelper, when an upload
  // ends without its half-close; discarded at offset 0 or when the whole file fails.
  void SetPartial(const std::string& name, std::string bytes) {
    absl::MutexLock l(&mu_);
    partials_[name] = std::move(bytes);
  }
  std::map<std::string, std::string> partials() {
    absl::MutexLock l(&mu_);
    return partials_;
  }
  // An artifact already in the store (BeginPreparation does not list it).
  void Store(const std::string& name) {
    absl::MutexLock l(&mu_);
    stored_.insert(name);
  }
  void SetMaxActive(int64_t v) {
    absl::MutexLock l(&mu_);
    max_active_ = v;
  }
  void SetInstallation(const std::string& id) {
    absl::MutexLock l(&mu_);
    installation_ = id;
  }
  std::vector<std::string> calls() {
    absl::MutexLock l(&mu_);
    return calls_;
  }
  std::vector<Upload> uploads() {
    absl::MutexLock l(&mu_);
    return uploads_;
  }
  std::set<std::string> stored() {
    absl::MutexLock l(&mu_);
    return stored_;
  }
  void SetList(pbf::ListGenerationsResponse list) {
    absl::MutexLock l(&mu_);
    list_ = std::move(list);
  }
  void SetCollectAnswer(pbf::CollectGenerationResult r) {
    absl::MutexLock l(&mu_);
    collect_answer_ = std::move(r);
  }
  std::vector<pbf::CollectGenerationRequest> collect_requests() {
    absl::MutexLock l(&mu_);
    return collect_requests_;
  }
  std::optional<pbf::BeginPreparationRequest> begun() {
    absl::MutexLock l(&mu_);
    return begun_;
  }
  // Waits (bounded) until no RPC handler is running: a cancelled stream's handler may still
  // be recording when the client's call has returned.
  bool WaitIdle() {
    absl::MutexLock l(&mu_);
    return mu_.AwaitWithTimeout(
        absl::Condition(
            +[](int* n) { return *n == 0; }, &active_),
        absl::Seconds(10));
  }

  // ---- the service ----
  grpc::Status Probe(grpc::ServerContext*, const pbf::ProbeRequest*,
                     pbf::ProbeResponse* resp) override {
    absl::MutexLock l(&mu_);
    calls_.push_back("Probe");
    resp->set_ready(true);
    resp->set_provider("docker");
    resp->set_backend_fingerprint("docker/20.10.24 overlay2 cgroupfs");
    resp->set_installation_id(installation_);
    resp->set_max_active(max_active_);
    resp->set_max_retained(8);
    for (const auto& [g, r] : generations_) *resp->add_generations() = r;
    return grpc::Status::OK;
  }

  grpc::Status ListGenerations(grpc::ServerContext*, const pbf::ListGenerationsRequest*,
                               pbf::ListGenerationsResponse* resp) override {
    absl::MutexLock l(&mu_);
    calls_.push_back("ListGenerations");
    *resp = list_;
    return grpc::Status::OK;
  }

  grpc::Status CollectGeneration(grpc::ServerContext*, const pbf::CollectGenerationRequest* req,
                                 pbf::CollectGenerationResult* resp) override {
    absl::MutexLock l(&mu_);
    calls_.push_back("CollectGeneration");
    collect_requests_.push_back(*req);
    *resp = collect_answer_;
    return grpc::Status::OK;
  }

  grpc::Status AdoptRelease(grpc::ServerContext*, const pbf::ReleaseMetadata* req,
                            pbf::PreparationResult* resp) override {
    Active a(this);
    absl::MutexLock l(&mu_);
    calls_.push_back("AdoptRelease");
    if (Refused("AdoptRelease", resp)) return grpc::Status::OK;
    absl::StatusOr<release::VerifiedRelease> r = release::VerifyRelease(
        req->source(), req->manifest(), req->signature(), req->sha256sums(), key_);
    if (!r.ok()) {
      resp->set_diagnostic(pbf::RUNTIME_DOWNLOAD_FAILED);
      return grpc::Status::OK;
    }
    release_ = *std::move(r);
    return grpc::Status::OK;
  }

  grpc::Status BeginPreparation(grpc::ServerContext*, const pbf::BeginPreparationRequest* req,
                                pbf::PreparationResult* resp) override {
    Active a(this);
    absl::MutexLock l(&mu_);
    calls_.push_back("BeginPreparation");
    begun_ = *req;
    if (Refused("BeginPreparation", resp)) return grpc::Status::OK;
    absl::StatusOr<wire::SpecificationDocument> spec =
        wire::DecodeSpecificationDocument(req->specification());
    if (!spec.ok() || Sha256Hex(req->specification()) != req->specification_digest() ||
        !release_.has_value()) {
      resp->set_diagnostic(pbf::CONFIGURATION_INVALID);
      return grpc::Status::OK;
    }
    spec_ = *spec;
    SetState(req->generation(), req->specification_digest(), pbf::GENERATION_STATE_PREPARING);
    resp->set_state(pbf::GENERATION_STATE_PREPARING);
    for (const wire::RuntimeArtifact& art : spec->artifacts) {
      if (stored_.count(art.name)) continue;
      resp->add_missing_artifacts(art.name);
      if (auto p = partials_.find(art.name); p != partials_.end() && !p->second.empty()) {
        pbf::PartialArtifact* pa = resp->add_partial_artifacts();
        pa->set_name(art.name);
        pa->set_held_bytes(p->second.size());
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status PutArtifact(grpc::ServerContext* ctx,
                           grpc::ServerReader<pbf::ArtifactUpload>* reader,
                           pbf::PreparationResult* resp) override {
    Active a(this);
    pbf::ArtifactUpload m;
    Upload u;
    if (!reader->Read(&m) || !m.has_header()) return grpc::Status::CANCELLED;
    u.name = m.header().name();
    u.offset = m.header().offset();
    std::string prefix;
    {
      // A refusal answers at once, before the bytes (as privhelper does when it cannot
      // store them): the client's writes then fail.
      absl::MutexLock l(&mu_);
      if (Refused("PutArtifact", resp)) {
        calls_.push_back("PutArtifact");
        uploads_.push_back(u);
        return grpc::Status::OK;
      }
      auto p = partials_.find(u.name);
      const uint64_t held = p == partials_.end() ? 0 : p->second.size();
      if (u.offset != 0 && u.offset != held) {
        calls_.push_back("PutArtifact");
        uploads_.push_back(u);
        resp->set_diagnostic(pbf::CONFIGURATION_INVALID);
        return grpc::Status::OK;
      }
      if (u.offset == 0) {
        partials_.erase(u.name);
      } else {
        prefix = p->second;
      }
    }
    while (reader->Read(&m)) {
      if (m.part_case() == pbf::ArtifactUpload::kSuspend) {
        u.suspended = true;
        continue;
      }
      ++u.chunks;
      u.largest_chunk = std::max(u.largest_chunk, m.data().size());
      u.bytes += m.data();
    }
    u.clean_end = !ctx->IsCancelled();
    absl::MutexLock l(&mu_);
    calls_.push_back("PutArtifact");
    const wire::RuntimeArtifact* declared =
        release_.has_value() ? release_->Find(u.name) : nullptr;
    const std::string whole = prefix + u.bytes;
    if (u.suspended) {
      if (declared != nullptr && !whole.empty() &&
          static_cast<int64_t>(whole.size()) < declared->size) {
        partials_[u.name] = whole;
      }
    } else if (u.clean_end && declared != nullptr &&
        static_cast<int64_t>(whole.size()) == declared->size &&
        Sha256Hex(whole) == declared->sha256) {
      u.published = true;
      stored_.insert(u.name);
      partials_.erase(u.name);
    } else {
      resp->set_diagnostic(pbf::RUNTIME_DOWNLOAD_FAILED);
      if (!u.clean_end && declared != nullptr && !whole.empty() &&
          static_cast<int64_t>(whole.size()) < declared->size) {
        partials_[u.name] = whole;
      } else {
        partials_.erase(u.name);
      }
    }
    uploads_.push_back(u);
    return grpc::Status::OK;
  }

  grpc::Status FinishPreparation(grpc::ServerContext*, const pbf::FinishPreparationRequest* req,
                                 pbf::PreparationResult* resp) override {
    Active a(this);
    absl::MutexLock l(&mu_);
    calls_.push_back("FinishPreparation");
    if (Refused("FinishPreparation", resp)) return grpc::Status::OK;
    if (!spec_.has_value() || !begun_.has_value() || begun_->generation() != req->generation()) {
      resp->set_diagnostic(pbf::CONFIGURATION_INVALID);
      return grpc::Status::OK;
    }
    for (const wire::RuntimeArtifact& art : spec_->artifacts) {
      if (!stored_.count(art.name)) {
        resp->set_diagnostic(pbf::RUNTIME_MISSING);
        resp->set_state(pbf::GENERATION_STATE_PREPARING);
        return grpc::Status::OK;
      }
    }
    SetState(req->generation(), begun_->specification_digest(), pbf::GENERATION_STATE_READY);
    resp->set_state(pbf::GENERATION_STATE_READY);
    return grpc::Status::OK;
  }

 private:
  struct Active {
    explicit Active(FakePrivhelperService* s) : s_(s) {
      absl::MutexLock l(&s_->mu_);
      ++s_->active_;
    }
    ~Active() {
      absl::MutexLock l(&s_->mu_);
      --s_->active_;
    }
    FakePrivhelperService* s_;
  };

  bool Refused(const std::string& rpc, pbf::PreparationResult* resp)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = refusals_.find(rpc);
    if (it == refusals_.end()) return false;
    resp->set_diagnostic(it->second.first);
    resp->set_state(it->second.second);
    refusals_.erase(it);
    return true;
  }
  void SetState(int64_t g, const std::string& digest, pbf::GenerationState s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    pbf::GenerationReport& r = generations_[g];
    r.set_generation(g);
    r.set_specification_digest(digest);
    r.set_state(s);
  }

  release::PublicKey key_;
  absl::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_active_ ABSL_GUARDED_BY(mu_) = 4;
  std::string installation_ ABSL_GUARDED_BY(mu_) = "22222222-2222-4222-8222-222222222222";
  std::map<std::string, std::pair<pbf::Diagnostic, pbf::GenerationState>> refusals_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<Upload> uploads_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> partials_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> stored_ ABSL_GUARDED_BY(mu_);
  std::optional<release::VerifiedRelease> release_ ABSL_GUARDED_BY(mu_);
  std::optional<pbf::BeginPreparationRequest> begun_ ABSL_GUARDED_BY(mu_);
  std::optional<wire::SpecificationDocument> spec_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, pbf::GenerationReport> generations_ ABSL_GUARDED_BY(mu_);
  pbf::ListGenerationsResponse list_ ABSL_GUARDED_BY(mu_);
  pbf::CollectGenerationResult collect_answer_ ABSL_GUARDED_BY(mu_);
  std::vector<pbf::CollectGenerationRequest> collect_requests_ ABSL_GUARDED_BY(mu_);
};

// The service on a unix socket in a short temporary directory.
class FakePrivhelperServer {
 public:
  explicit FakePrivhelperServer(release::PublicKey key) : service(std::move(key)) {
    char tmpl[] = "/tmp/agph-XXXXXX";
    dir_ = mkdtemp(tmpl);
    socket = dir_ + "/ph.sock";
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    b.SetMaxReceiveMessageSize(8 << 20);
    b.RegisterService(&service);
    server_ = b.BuildAndStart();
  }
  ~FakePrivhelperServer() {
    server_->Shutdown();
    if (system(("rm -rf " + dir_).c_str()) != 0) {
    }
  }
  FakePrivhelperService service;
  std::string socket;

 private:
  std::string dir_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace sn::agent::testing

#endif  // SANDBOX_NODE_TESTS_AGENT_FAKES_FAKE_PRIVHELPER_H_
