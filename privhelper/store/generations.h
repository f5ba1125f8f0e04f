// The generations privhelper holds, and everything native about them, from state privhelper
// owns (never from the agent). Files, in <state_dir>/node/generations/ (docs/formats.md):
//   <g>.specification   the specification document exactly as Core served it (write-once)
//   <g>.json            the final provider configuration (write-once): installation,
//                       generation, specification digest, provider, and each image name with
//                       its native image
// A generation is held iff its final configuration is published. The specification is
// published first, so an interruption between the two leaves an unheld generation that the
// same registration completes (and a different one is refused: both records are write-once).
//
// Issue 8 scope: privhelper holds exactly the generation it was registered with (a node
// without generation management; the agent registers it at enrollment). Generation management
// (issue 9) extends this store with preparation plans, leases and more generations; the final
// configuration stays the one record that makes a generation held.
//
// Thread-safe.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_GENERATIONS_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_GENERATIONS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "privhelper/store/fs.h"

namespace sn::privhelper::store {

struct HeldImage {
  std::string name;          // what create's "image" names
  std::string native_image;  // Docker: the "sha256:<hex>" identity privhelper creates from
};

struct HeldGeneration {
  int64_t generation = 0;
  std::string specification_digest;
  std::vector<HeldImage> images;

  // The native image of `name`, or nullptr when the specification does not name it.
  const std::string* NativeImage(std::string_view name) const;
};

class GenerationStore {
 public:
  // Opens (creating) node/generations/ under `state` and loads every published final
  // configuration. A record that is torn, foreign, of another installation or provider, or
  // whose specification no longer hashes to its digest refuses the start (FailedPrecondition)
  // and is left in place for inspection.
  static absl::StatusOr<std::unique_ptr<GenerationStore>> Open(Fs& fs, const Dir& state,
                                                               uint32_t owner,
                                                               std::string installation_id,
                                                               std::string provider);

  // Registers `generation` from its specification document. InvalidArgument when the bytes do
  // not hash to `digest`, fail spec §6, or name another generation or provider;
  // FailedPrecondition when another generation (or other bytes for this one) is held or
  // recorded. Registering what is held, byte for byte, is OK and changes nothing.
  absl::Status Register(int64_t generation, std::string_view specification,
                        std::string_view digest) ABSL_LOCKS_EXCLUDED(mu_);

  // The held generation, or nullptr.
  std::shared_ptr<const HeldGeneration> Find(int64_t generation) const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::shared_ptr<const HeldGeneration>> All() const ABSL_LOCKS_EXCLUDED(mu_);
  bool empty() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  GenerationStore(Fs& fs, Dir dir, uint32_t owner, std::string installation_id,
                  std::string provider);
  absl::StatusOr<std::shared_ptr<const HeldGeneration>> Load(int64_t generation);

  Fs& fs_;
  const Dir dir_;
  const uint32_t owner_;
  const std::string installation_id_;
  const std::string provider_;
  mutable absl::Mutex mu_;
  std::map<int64_t, std::shared_ptr<const HeldGeneration>> held_ ABSL_GUARDED_BY(mu_);
};

// Record names.
std::string SpecificationRecordName(int64_t generation);  // "<g>.specification"
std::string FinalConfigurationName(int64_t generation);   // "<g>.json"

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_GENERATIONS_H_
