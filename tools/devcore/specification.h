// The §6 specification documents devcore hands out, and the store of every generation it
// holds: DIR/specifications/<generation>.json, byte-exact and immutable (a generation's
// specification never changes; its SHA-256 is the generation's specification_digest).
//
// Generations enter the store from --specification at start-up and from
// POST /admin/v1/generations. The "current" generation (--specification) is what enroll hands
// out and what a generation-managing node without an explicit deployment is told to prepare.
//
// Thread-compatibility: confined to devcore's event-loop thread.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_SPECIFICATION_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_SPECIFICATION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/wire/http_bodies.h"

namespace sn::devcore {

struct Specification {
  int64_t generation = 0;
  std::string provider;
  std::string runtime_source;
  std::string bytes;   // exactly as received
  std::string digest;  // SHA-256 of `bytes`, lowercase hex
  wire::SpecificationDocument document;
};

// Strictly decodes a specification document (common/wire/http_bodies.h). InvalidArgument
// names the rule it breaks.
absl::StatusOr<Specification> ParseSpecification(std::string bytes);

class GenerationStore {
 public:
  // Loads every DIR/specifications/<G>.json (creating the directory when missing). A file
  // that does not decode, or whose generation is not its name, is FailedPrecondition.
  // Temporary files of an interrupted write (".tmp." in the name) are ignored.
  static absl::StatusOr<std::unique_ptr<GenerationStore>> Open(const std::string& state_dir);

  enum class Added { kCreated, kIdentical };
  // Keeps `spec` durably (common/atomic_file.h) before returning kCreated; kIdentical when the
  // generation is held with the same bytes. AlreadyExists when it is held with other bytes.
  absl::StatusOr<Added> Add(const Specification& spec);

  const Specification* Find(int64_t generation) const;
  // Every held generation, in ascending order.
  std::vector<const Specification*> All() const;

  // Marks a held generation as current. NotFound otherwise.
  absl::Status SetCurrent(int64_t generation);
  const Specification* current() const { return current_ ? Find(*current_) : nullptr; }

 private:
  explicit GenerationStore(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  std::map<int64_t, Specification> specs_;
  std::optional<int64_t> current_;
};

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_SPECIFICATION_H_
