// Internal building blocks of the strict decoders (codec and HTTP bodies): member tables with
// duplicate/unknown detection, each object's members named by an enum (SN_WIRE_MEMBERS,
// Members<E>), typed value readers, and error paths. Not a public API.
//
// Every error is absl::InvalidArgument "PATH: reason", where PATH names the member
// ("heartbeat.health.host.cpu_cores", "hello.generations[2].state") and the reason never
// echoes a value.
#ifndef SANDBOX_NODE_COMMON_WIRE_DECODE_UTIL_H_
#define SANDBOX_NODE_COMMON_WIRE_DECODE_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/json/reader.h"
#include "common/status_macros.h"

namespace sn::wire::internal {

// A member path, linked through the stack; rendered only when an error is reported.
struct Path {
  const Path* parent = nullptr;
  std::string_view name;  // member name (static storage), or empty for an array element
  int index = -1;
  std::string Str() const;
  Path Member(std::string_view n) const { return Path{this, n, -1}; }
  Path Element(int i) const { return Path{this, {}, i}; }
};
inline Path Root(std::string_view name) { return Path{nullptr, name, -1}; }

absl::Status Invalid(const Path& p, std::string_view what);

template <typename E>
class Members;

// The untyped implementation of Members<E> below (a member is its index in `names`), kept out
// of the template; only Members uses it.
class MemberTable {
 private:
  template <typename E>
  friend class Members;

  // REQUIRES: names.size() <= 64; `names` outlives the table.
  MemberTable(const Path& path, absl::Span<const std::string_view> names)
      : path_(path), names_(names) {}
  absl::StatusOr<int> Resolve(std::string_view name);
  bool Has(int i) const { return (seen_ >> i) & 1; }
  // The missing members of a bit set of indices, reported in index order.
  absl::Status RequireAll(uint64_t required) const;
  std::string_view name(int i) const { return names_[static_cast<size_t>(i)]; }

  const Path& path_;
  absl::Span<const std::string_view> names_;
  uint64_t seen_ = 0;
};

// Declares the members of one JSON object from one list, so that the enum and the names cannot
// drift: LIST(M) expands M(kEnumerator, "json_name") once per member, in the order of the
// table. Produces `enum class ENUM` and the name table Members<ENUM> finds (MemberNames, by
// argument-dependent lookup). Use at namespace scope:
//
//   #define SN_HOST_MEMBERS(M) M(kCpuCores, "cpu_cores") M(kLoad1m, "load_1m")
//   SN_WIRE_MEMBERS(HostMember, SN_HOST_MEMBERS)
#define SN_WIRE_MEMBER_ENUMERATOR_(enumerator, json_name) enumerator,
#define SN_WIRE_MEMBER_NAME_(enumerator, json_name) std::string_view(json_name),
#define SN_WIRE_MEMBERS(ENUM, LIST)                                                     \
  enum class ENUM : uint8_t { LIST(SN_WIRE_MEMBER_ENUMERATOR_) };                      \
  inline constexpr std::string_view kMemberNamesOf##ENUM[] = {LIST(SN_WIRE_MEMBER_NAME_)}; \
  constexpr absl::Span<const std::string_view> MemberNames(ENUM) { return kMemberNamesOf##ENUM; }

// The members of one JSON object, each named by an enumerator of E (declared with
// SN_WIRE_MEMBERS), resolved against E's fixed table of names. Unknown names and duplicates are
// errors; Require reports every missing required member at once.
template <typename E>
class Members {
 public:
  static_assert(MemberNames(E{}).size() <= 64);
  explicit Members(const Path& path) : table_(path, MemberNames(E{})) {}
  // Accepts only the members up to and including `last` (in the list's order); the later ones
  // are unknown members here.
  Members(const Path& path, E last)
      : table_(path, MemberNames(E{}).first(static_cast<size_t>(last) + 1)) {}

  absl::StatusOr<E> Resolve(std::string_view name) {
    ASSIGN_OR_RETURN(int i, table_.Resolve(name));
    return static_cast<E>(i);
  }
  bool Has(E m) const { return table_.Has(static_cast<int>(m)); }
  // Reports the missing ones in the order of the member list.
  absl::Status Require(std::initializer_list<E> required) const {
    uint64_t want = 0;
    for (E m : required) want |= uint64_t{1} << static_cast<int>(m);
    return table_.RequireAll(want);
  }
  std::string_view name(E m) const { return table_.name(static_cast<int>(m)); }

 private:
  MemberTable table_;
};

// A top-level member: its unescaped name and the exact text of its value (JSON-level valid).
struct RawMember {
  std::string name;
  std::string_view raw;
};

// Reads the whole top-level object: JSON-level validation of everything (depth, strings,
// numbers, duplicate members at every level) and nothing after it but whitespace.
absl::StatusOr<std::vector<RawMember>> ReadTopLevel(std::string_view text, const Path& p);

// Checks the type of the next value: "null is not allowed" or "not a(n) TYPE".
absl::Status ExpectType(json::Reader& r, const Path& p, json::ValueType want);

// Calls fn(member, reader, member_path) for each member of the object at `r`, `member` an
// enumerator of E.
template <typename E, typename Fn>
absl::Status ForEachMember(json::Reader& r, const Path& p, Members<E>& t, Fn&& fn) {
  RETURN_IF_ERROR(ExpectType(r, p, json::ValueType::kObject));
  RETURN_IF_ERROR(r.BeginObject());
  while (true) {
    std::string_view name;
    ASSIGN_OR_RETURN(bool more, r.NextMember(&name));
    if (!more) return absl::OkStatus();
    ASSIGN_OR_RETURN(E m, t.Resolve(name));
    const Path mp = p.Member(t.name(m));
    RETURN_IF_ERROR(fn(m, r, mp));
  }
}

// Same over captured top-level members; each value gets its own reader at depth 1.
template <typename E, typename Fn>
absl::Status ForEachRawMember(const std::vector<RawMember>& members, const Path& p,
                              Members<E>& t, Fn&& fn) {
  for (const RawMember& rm : members) {
    ASSIGN_OR_RETURN(E m, t.Resolve(rm.name));
    const Path mp = p.Member(t.name(m));
    json::Reader r(rm.raw, /*base_depth=*/1);
    RETURN_IF_ERROR(fn(m, r, mp));
  }
  return absl::OkStatus();
}

// Calls fn(reader, element_path) for each element; the count must be within [min, max].
template <typename Fn>
absl::Status ForEachElement(json::Reader& r, const Path& p, size_t min, size_t max, Fn&& fn) {
  RETURN_IF_ERROR(ExpectType(r, p, json::ValueType::kArray));
  RETURN_IF_ERROR(r.BeginArray());
  size_t n = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool more, r.NextElement());
    if (!more) break;
    if (n == max) return Invalid(p, "more than " + std::to_string(max) + " elements");
    const Path ep = p.Element(static_cast<int>(n));
    RETURN_IF_ERROR(fn(r, ep));
    ++n;
  }
  if (n < min) return Invalid(p, "fewer than " + std::to_string(min) + " elements");
  return absl::OkStatus();
}

absl::StatusOr<std::string_view> ReadString(json::Reader& r, const Path& p);
// A string of at most max_bytes (decoded UTF-8 bytes).
absl::StatusOr<std::string> ReadBoundedString(json::Reader& r, const Path& p, size_t max_bytes);
absl::StatusOr<int64_t> ReadInt64(json::Reader& r, const Path& p);
absl::StatusOr<int64_t> ReadInt64InRange(json::Reader& r, const Path& p, int64_t lo, int64_t hi);
absl::StatusOr<int64_t> ReadPositive(json::Reader& r, const Path& p);
absl::StatusOr<bool> ReadBool(json::Reader& r, const Path& p);
// `true` only.
absl::Status ReadTrue(json::Reader& r, const Path& p);
absl::StatusOr<std::string> ReadUuid(json::Reader& r, const Path& p);
absl::StatusOr<std::string> ReadDigest(json::Reader& r, const Path& p);
absl::StatusOr<std::string> ReadCode(json::Reader& r, const Path& p);
absl::StatusOr<std::string> ReadTimestamp(json::Reader& r, const Path& p);
// A string equal to one of `values`; returns its index.
absl::StatusOr<int> ReadEnum(json::Reader& r, const Path& p,
                             absl::Span<const std::string_view> values);
// A base64 string decoded into `out`, at most max_decoded bytes.
absl::Status ReadBase64(json::Reader& r, const Path& p, size_t max_decoded, std::string* out);
// The integer literal 1 exactly (`version`, `schema`).
absl::Status ReadVersionOne(json::Reader& r, const Path& p);

}  // namespace sn::wire::internal

#endif  // SANDBOX_NODE_COMMON_WIRE_DECODE_UTIL_H_
