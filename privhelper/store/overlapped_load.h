// The overlapped image load (docs/architecture.md, "Overlapped image load"): while
// the agent streams a generation's Docker image archive into the release store, privhelper
// already feeds the archive's own bytes to the backend's load (POST /images/load), read from
// the store's temporary through a descriptor of its own (never from memory), up to the
// watermark "bytes appended so far - kWithheldBytes". The last kWithheldBytes are sent only once
// the Writer's Commit verified size and SHA-256 of the whole file against the signed manifest
// (while the Commit then makes the file durable and publishes it: the fsync is not on the
// daemon's path); on any failure before that the load is cut mid-body (the request's
// Content-Length never reached), so the daemon's load fails before it registers any layer or
// tag (docs/security.md, "Overlapped image load"). The load counts (Wait) only when that very
// file was then published.
//
// One load, on one thread this object owns, bounded by the importer's LoadTimeout (the waits
// for the stream included). Thread-safe.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_OVERLAPPED_LOAD_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_OVERLAPPED_LOAD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "privhelper/importer.h"
#include "privhelper/store/fs.h"
#include "privhelper/store/release_store.h"

namespace sn::privhelper::store {

class OverlappedLoad final : public ReleaseStore::Writer::Observer {
 public:
  // Withheld until the Commit: more than one tar record (10240 bytes), so at least the
  // archive's end-of-archive blocks never reach the daemon unverified.
  static constexpr uint64_t kWithheldBytes = 64 * 1024;

  OverlappedLoad(int64_t generation, std::string artifact, uint64_t size);
  // Cuts a load still running and joins its thread.
  ~OverlappedLoad() override;
  OverlappedLoad(const OverlappedLoad&) = delete;
  OverlappedLoad& operator=(const OverlappedLoad&) = delete;

  // Observes `writer` (before its first Append) and opens its temporary for reading.
  absl::Status Attach(ReleaseStore::Writer& writer);
  // Starts the load's thread. REQUIRES: Attach succeeded; called once; `importer` outlives
  // this.
  void Start(ImageImporter& importer) ABSL_LOCKS_EXCLUDED(mu_);

  void Appended(uint64_t total) override ABSL_LOCKS_EXCLUDED(mu_);
  void Verified() override ABSL_LOCKS_EXCLUDED(mu_);
  void Committed() override ABSL_LOCKS_EXCLUDED(mu_);
  void Aborted() override ABSL_LOCKS_EXCLUDED(mu_);
  // Cuts the load even after the Commit (privhelper stopping): the engine gets an error at
  // its next request for bytes; a load whose body was all sent ends with the daemon's answer
  // (bounded by the load timeout).
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);

  // Waits (at most `timeout`) until `bytes` were written to the daemon's connection (the
  // engine asked for more after writing them) or the load ended; returns the bytes written so
  // far (tests observe the watermark with it).
  uint64_t AwaitWritten(uint64_t bytes, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the load's thread has ended; AwaitDone waits for that at most `timeout`.
  bool done() const ABSL_LOCKS_EXCLUDED(mu_);
  bool AwaitDone(absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for the load to end and returns its result: OK only when the daemon answered the
  // whole archive and the Writer's file was committed (verified, durable, published). A load
  // of verified bytes whose file then failed to become durable or published does not count.
  // REQUIRES: the Writer's Commit returned or the Writer was destroyed.
  absl::Status Wait() ABSL_LOCKS_EXCLUDED(mu_);

  int64_t generation() const { return generation_; }
  const std::string& artifact() const { return artifact_; }
  // The file the load read (device, inode, birth time): the published file once committed.
  const FileInfo& file() const { return file_; }

 private:
  // The load's body source: blocks (bounded) until bytes below the watermark are there.
  absl::StatusOr<size_t> Read(char* buf, size_t n) ABSL_LOCKS_EXCLUDED(mu_);
  void Run(ImageImporter* importer) ABSL_LOCKS_EXCLUDED(mu_);

  const int64_t generation_;
  const std::string artifact_;
  const uint64_t size_;
  // The temporary as opened; read by the load's thread only, closed when the load ends (an
  // aborted upload's unlinked temporary is not kept allocated).
  std::unique_ptr<ReadableFile> reader_;
  FileInfo file_;
  absl::Time deadline_;                         // set by Start before the thread runs

  mutable absl::Mutex mu_;
  uint64_t appended_ ABSL_GUARDED_BY(mu_) = 0;
  bool verified_ ABSL_GUARDED_BY(mu_) = false;   // the tail may be sent
  bool committed_ ABSL_GUARDED_BY(mu_) = false;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t sent_ ABSL_GUARDED_BY(mu_) = 0;     // handed to the engine
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;  // written by it (it asked for more after)
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status result_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_OVERLAPPED_LOAD_H_
