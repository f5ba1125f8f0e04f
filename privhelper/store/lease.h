// Generation leases (requirements "Local retention and helper lifetime"; docs/formats.md):
//   node/generations/<g>.lease           an empty private file, created exclusively and fsynced
//                                        (with its directory) before the first helper can
//                                        start; never removed or replaced
//   node/generations/<g>.lease-identity  {installation, generation, digest, device, inode,
//                                        birth time},
//                                        published write-once right after, durable with its
//                                        directory
// A native helper holds a shared flock on the lease for its whole life (it inherits the
// descriptor; privhelper closes its own copy only after waitpid and never unlocks it).
// Collection and repair take it exclusively and without blocking, so a live helper keeps
// the generation. One validator (OpenLease) serves the helper opener and the collector.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_LEASE_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_LEASE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "privhelper/store/fs.h"

namespace sn::privhelper::store {

struct LeaseIdentity {
  std::string installation_id;
  int64_t generation = 0;
  std::string specification_digest;
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t birth_ns = 0;  // statx birth time (0 where the filesystem records none)
  bool operator==(const LeaseIdentity&) const = default;
};

std::string LeaseName(int64_t generation);          // "<g>.lease"
std::string LeaseIdentityName(int64_t generation);  // "<g>.lease-identity"

std::string EncodeLeaseIdentity(const LeaseIdentity& id);
// FailedPrecondition for a torn, foreign or malformed record (the message says which:
// common/json/record.h).
absl::StatusOr<LeaseIdentity> DecodeLeaseIdentity(std::string_view text);

// Creates the lease of `generation` and its identity record, in that order, each durable. A
// lease whose identity already binds this installation, generation and digest is OK (nothing
// changes). A lease without an identity record (an interruption before it became durable) is
// refused for adoption and kept (ownership_refused); so is any other disagreement.
absl::Status CreateLease(Fs& fs, const Dir& generations, uint32_t owner, int64_t generation,
                         std::string_view installation_id, std::string_view digest);

// The validator: opens the lease of `generation` with a `mode` flock taken without blocking
// (Unavailable when a conflicting lock is held), then, under the lock, refuses
// (ownership_refused) a symlink, a multiply linked or foreign or group/other-accessible file, a
// missing or disagreeing identity record, an inode other than the recorded one (even when all
// other metadata agree), and a lock path that no longer names the locked file.
absl::StatusOr<std::unique_ptr<FileLock>> OpenLease(Fs& fs, const Dir& generations,
                                                    uint32_t owner, int64_t generation,
                                                    std::string_view installation_id,
                                                    std::string_view digest, LockMode mode);

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_LEASE_H_
