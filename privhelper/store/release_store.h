// privhelper's private release store, <state_dir>/releases/<source>/ (docs/formats.md): the
// metadata of every release a generation was prepared from (manifest.json, manifest.json.sig,
// SHA256SUMS, write-once and re-verified with privhelper's own release key whenever read) and
// the artifacts generations use, each written through a temporary file whose size and SHA-256
// are checked against the verified manifest before it is published (write-once). Artifacts
// are private to root: 0400, or 0500 for a Runtime helper privhelper executes.
//
// Thread-safe for different sources; one preparation at a time writes (the server serializes
// preparation).
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_RELEASE_STORE_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_RELEASE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/release/artifact.h"
#include "common/release/ed25519.h"
#include "common/release/verify.h"
#include "common/wire/http_bodies.h"
#include "privhelper/store/fs.h"

namespace sn::privhelper::store {

// What a partial artifact is named in its source directory: "." + name + kPartialSuffix (an
// artifact name starts with a letter or digit, so the leading dot is reserved).
inline constexpr char kPartialSuffix[] = ".partial";
std::string PartialArtifactName(std::string_view name);

class ReleaseStore {
 public:
  // Opens (creating, 0700) releases/ under `state`, whose absolute path is `state_path`.
  static absl::StatusOr<std::unique_ptr<ReleaseStore>> Open(Fs& fs, const Dir& state,
                                                            std::string state_path,
                                                            uint32_t owner, release::PublicKey key);

  // Verifies a release's metadata with privhelper's key (a provenance failure otherwise) and
  // records it in releases/<source>/, write-once: the same bytes again change nothing; other
  // bytes for a recorded source are a provenance failure and change nothing.
  absl::StatusOr<release::VerifiedRelease> Adopt(std::string_view source, std::string manifest,
                                                 std::string_view signature,
                                                 std::string_view sums);
  // The recorded metadata of `source`, verified again. NotFound when none is recorded.
  absl::StatusOr<release::VerifiedRelease> Load(std::string_view source);

  // OK when `artifact` of `source` is stored with exactly its declared size and digest;
  // NotFound when it is not stored; a checksum failure when other bytes are; FailedPrecondition
  // (ownership_refused) for a file that is not a private, singly linked regular file of ours.
  absl::Status Check(std::string_view source, const wire::RuntimeArtifact& artifact);
  // Check for the import moments after the stream: an artifact a Writer of this process
  // verified and published is accepted without hashing it again when the file found is still
  // the one published (device, inode, birth time, size; private, singly linked, ours). Any
  // other file, and every file after a restart (nothing is remembered across processes), gets
  // the full Check. Safe because the store is private to privhelper (root, 0700): nothing but
  // this process writes it, and a Writer writes only new temporaries, so a published inode's
  // bytes never change; the hash again would only re-read what the Writer hashed from the same
  // inode (docs/formats.md, "Release store").
  absl::Status CheckRecent(std::string_view source, const wire::RuntimeArtifact& artifact)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Streams one artifact into the store.
  class Writer {
   public:
    virtual ~Writer() = default;
    // A checksum failure as soon as more bytes than declared arrive.
    virtual absl::Status Append(std::string_view bytes) = 0;
    // Verifies size and digest, makes the file durable and publishes it (write-once: an
    // identical stored artifact is fine, another one is a checksum failure). Call once.
    virtual absl::Status Commit() = 0;

    // What the overlapped image load (overlapped_load.h) learns from a Writer: called on the
    // Writer's thread, after the fact, never with a lock of the Writer held.
    class Observer {
     public:
      virtual ~Observer() = default;
      // `total` bytes are in the temporary (written, not yet verified or durable).
      virtual void Appended(uint64_t total) = 0;
      // Commit verified size and digest of all the bytes appended: the temporary holds exactly
      // the declared file (not yet durable, not yet published). Reported before Committed;
      // never after a failed check.
      virtual void Verified() = 0;
      // Commit made that file durable and published this very file.
      virtual void Committed() = 0;
      // The Writer ends without publishing its own file (a failed Append or Commit, a Writer
      // destroyed uncommitted, or an identical file published before: another inode).
      virtual void Aborted() = 0;
    };
    // Before the upload's first Append (a resumed Writer already holds its partial's prefix,
    // reported at once as appended): reports to `observer` (which must outlive the Writer)
    // from now on and returns a reader of the temporary from byte 0 (its own descriptor: the
    // same inode the Writer writes, and the published file once committed).
    virtual absl::StatusOr<std::unique_ptr<ReadableFile>> Observe(Observer* observer) = 0;
  };
  // `offset` 0 starts the artifact afresh (a partial of it is discarded); otherwise it must
  // be exactly the bytes of the partial held (HeldPartial), whose prefix the Writer then hashes
  // and copies from privhelper's own file before the new bytes follow; any other offset is
  // refused (configuration_invalid) and the partial kept. A Writer destroyed without Commit
  // keeps what it holds as the artifact's partial (.<name>.partial; docs/formats.md "Release
  // store") when that is more than 0 and less than the declared size and no byte failed the
  // check; otherwise its bytes are discarded.
  absl::StatusOr<std::unique_ptr<Writer>> Write(std::string_view source,
                                                const wire::RuntimeArtifact& artifact,
                                                uint64_t offset = 0);
  // The bytes of `artifact` held as a partial (0: none). A partial that is not a private,
  // singly linked regular file of ours, is empty, or holds the declared size or more, is
  // discarded (0).
  absl::StatusOr<uint64_t> HeldPartial(std::string_view source,
                                       const wire::RuntimeArtifact& artifact);
  // Removes the partial of `name` (OK when there is none).
  absl::Status DiscardPartial(std::string_view source, std::string_view name);

  // Collection: removes a stored artifact after Check found exactly its declared bytes in a
  // private, singly linked file of ours (Check's refusals otherwise, and nothing is removed);
  // NotFound when it is already gone. A partial of the artifact goes too. The removal is
  // durable after SyncSource.
  absl::Status Remove(std::string_view source, const wire::RuntimeArtifact& artifact);
  absl::Status SyncSource(std::string_view source);
  // Collection's check before its first deletion (release_check.cc): the metadata of `source`
  // verified, and every other file in its directory named by that verified manifest and
  // stored with exactly its declared bytes in a private, singly linked file of ours (a
  // partial of an artifact the manifest names is accepted: collection removes it with its
  // artifact). A file the manifest does not name (a temporary included), missing metadata, a
  // link or foreign
  // ownership refuses (ownership_refused); other bytes are a checksum failure.
  absl::Status CheckEveryFile(std::string_view source);
  // The size of a stored artifact as found (no checksum; progress reports), or NotFound.
  absl::StatusOr<uint64_t> StoredSize(std::string_view source, std::string_view name);

  // Opens a stored artifact for reading (the importer streams it to the daemon).
  absl::StatusOr<std::unique_ptr<ReadableFile>> OpenArtifact(std::string_view source,
                                                             std::string_view name);
  // The absolute path of a stored artifact (a Runtime helper is executed from there).
  std::string AbsolutePath(std::string_view source, std::string_view name) const;

 private:
  ReleaseStore(Fs& fs, Dir dir, std::string state_path, uint32_t owner, release::PublicKey key)
      : fs_(fs),
        dir_(std::move(dir)),
        state_path_(std::move(state_path)),
        owner_(owner),
        key_(std::move(key)) {}
  absl::StatusOr<Dir> SourceDir(std::string_view source, bool create);
  // What a Writer published in this process: "<source>/<name>" -> the published file.
  void RememberPublished(std::string_view source, std::string_view name, const FileInfo& info)
      ABSL_LOCKS_EXCLUDED(mu_);

  Fs& fs_;
  const Dir dir_;  // releases/
  const std::string state_path_;
  const uint32_t owner_;
  const release::PublicKey key_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, FileInfo> published_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_RELEASE_STORE_H_
