// The operation record's journal on disk: segment names, the header that seals a segment,
// and the reader every start (and `agent generations`) uses (operation_journal.h).
#include "agent/requests/operation_journal.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/json/record.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/wire/validate.h"
#include "nlohmann/json.hpp"

namespace sn::agent {

using Json = nlohmann::json;

namespace journal {
namespace {

constexpr char kJournalName[] = "sandbox-node operations";
constexpr std::string_view kSegmentPrefix = "journal-";
constexpr std::string_view kSegmentSuffix = ".jsonl";
constexpr size_t kSeqDigits = 20;
// A segment holds at most segment_bytes plus one line; anything larger is not ours.
constexpr size_t kMaxSegmentReadBytes = 64 << 20;
constexpr size_t kMaxHeaderBytes = 4096;
// An earlier-format record is one file of < 1 KiB; a larger one is not ours.
constexpr size_t kMaxRecordBytes = 1 << 20;

}  // namespace

std::string SegmentName(uint64_t seq) {
  std::string digits = absl::StrCat(seq);
  return absl::StrCat(std::string(kSegmentPrefix), std::string(kSeqDigits - digits.size(), '0'),
                      digits, std::string(kSegmentSuffix));
}

std::optional<uint64_t> SegmentSeq(std::string_view name) {
  if (name.size() != kSegmentPrefix.size() + kSeqDigits + kSegmentSuffix.size() ||
      !absl::StartsWith(AV(name), AV(kSegmentPrefix)) || !absl::EndsWith(AV(name), AV(kSegmentSuffix))) {
    return std::nullopt;
  }
  std::string_view digits = name.substr(kSegmentPrefix.size(), kSeqDigits);
  uint64_t seq = 0;
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(AV(digits), &seq) || seq == 0 || SegmentName(seq) != name) {
    return std::nullopt;
  }
  return seq;
}

bool IsLegacyName(std::string_view name) {
  return name.size() == 36 + 5 && absl::EndsWith(AV(name), ".json") &&
         wire::IsUuid(name.substr(0, 36));
}


std::string EncodeHeader(uint64_t seq, std::optional<Seal> seals) {
  Json j = {{"journal", kJournalName}, {"segment", seq}, {"seals", nullptr}};
  if (seals) j["seals"] = {{"segment", seals->segment}, {"bytes", seals->bytes}};
  return j.dump() + "\n";
}

namespace {

struct Header {
  uint64_t segment = 0;
  std::optional<Seal> seals;
};

absl::StatusOr<Header> DecodeHeader(std::string_view line) {
  ASSIGN_OR_RETURN(json::RecordObject j,
                   json::RecordObject::Parse(line, "operation journal header", kMaxHeaderBytes));
  Header h;
  ASSIGN_OR_RETURN(std::string name, j.String("journal"));
  if (name != kJournalName) return j.MemberMalformed("journal", "is not this journal's name");
  ASSIGN_OR_RETURN(h.segment, j.Uint("segment"));
  ASSIGN_OR_RETURN(std::optional<json::RecordObject> seals, j.NullableObject("seals"));
  if (seals) {
    Seal s;
    ASSIGN_OR_RETURN(s.segment, seals->Uint("segment"));
    ASSIGN_OR_RETURN(s.bytes, seals->Uint("bytes"));
    RETURN_IF_ERROR(seals->Finish());
    if (s.segment == 0 || s.segment >= h.segment) {
      return j.MemberMalformed("seals", "does not name an earlier segment");
    }
    h.seals = s;
  }
  RETURN_IF_ERROR(j.Finish());
  return h;
}

}  // namespace


namespace {

absl::Status Damaged(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(
      path, ": ", what, "; the operation record is damaged (not torn by a crash): the agent "
      "refuses to start rather than forget outcomes (docs/operator-guide.md, \"The operation "
      "record\")"));
}

}  // namespace

absl::StatusOr<JournalRead> ReadJournal(fs::Fs& fs, const fs::Dir& dir, const std::string& path,
                                        std::vector<std::string>* problems) {
  JournalRead out;
  ASSIGN_OR_RETURN(std::vector<std::string> listed, fs.ListDir(dir));
  std::map<uint64_t, std::string> segments;
  std::vector<std::string> legacy;
  for (std::string& name : listed) {
    if (std::optional<uint64_t> seq = SegmentSeq(name)) {
      segments[*seq] = std::move(name);
    } else if (IsLegacyName(name)) {
      legacy.push_back(std::move(name));
    }
  }
  if (!segments.empty()) out.max_seq = segments.rbegin()->first;
  std::set<std::string> seen;
  std::map<uint64_t, uint64_t> sealed;  // segment -> its sealed length
  // Newest first: every seal of a segment is in a later one, and the first line met for an id
  // (reading backwards) is its last state.
  for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
    const uint64_t seq = it->first;
    const std::string file = absl::StrCat(path, "/", it->second);
    ASSIGN_OR_RETURN(std::string text,
                     fs.ReadFileAt(dir, it->second, kMaxSegmentReadBytes, nullptr));
    auto seal = sealed.find(seq);
    const size_t nl = text.find('\n');
    absl::StatusOr<Header> header =
        nl == std::string::npos ? absl::StatusOr<Header>(absl::DataLossError("no header line"))
                                : DecodeHeader(std::string_view(text).substr(0, nl + 1));
    if (header.ok() && header->segment != seq) {
      header = absl::DataLossError("the header names another segment");
    }
    if (!header.ok()) {
      if (seal != sealed.end()) return Damaged(file, "a sealed segment's header does not read");
      // A segment whose creation did not finish: nothing was ever appended to it.
      out.abandoned.push_back(it->second);
      continue;
    }
    size_t limit = text.size();
    if (seal != sealed.end()) {
      if (seal->second > text.size()) return Damaged(file, "shorter than its sealed length");
      limit = seal->second;
    }
    if (header->seals) {
      auto [at, inserted] = sealed.emplace(header->seals->segment, header->seals->bytes);
      if (!inserted && at->second != header->seals->bytes) {
        return Damaged(file, "two segments seal one segment at different lengths");
      }
    }
    std::vector<RecordEntry> lines;
    size_t pos = nl + 1;
    if (pos > limit) return Damaged(file, "its sealed length ends inside its header");
    while (pos < limit) {
      const size_t end = text.find('\n', pos);
      absl::StatusOr<RecordEntry> e =
          end == std::string::npos || end >= limit
              ? absl::StatusOr<RecordEntry>(absl::DataLossError("a line without its end"))
              : DecodeRecordEntry(std::string_view(text).substr(pos, end + 1 - pos));
      if (!e.ok()) {
        if (seal != sealed.end()) {
          return Damaged(file, absl::StrCat("a line at byte ", pos, " does not read: ",
                                            std::string(e.status().message())));
        }
        // The unsealed segment's end: an append a crash cut (or one that failed), never
        // acknowledged. Nothing is ever appended after it (the next segment seals this one).
        LogWarning("operation journal: an unfinished write at the end of a segment ignored",
                   {{"path", file},
                    {"offset", static_cast<uint64_t>(pos)},
                    {"bytes", static_cast<uint64_t>(limit - pos)}});
        if (problems != nullptr) {
          problems->push_back(absl::StrCat(file, ": ", limit - pos,
                                           " bytes of an unfinished write at its end"));
        }
        limit = pos;
        break;
      }
      lines.push_back(*std::move(e));
      pos = end + 1;
    }
    out.segment_bytes[seq] = {limit, nl + 1};
    for (auto l = lines.rbegin(); l != lines.rend(); ++l) {
      if (seen.insert(l->id).second) out.latest.push_back({std::move(*l), seq});
    }
  }
  std::sort(legacy.begin(), legacy.end());
  for (const std::string& name : legacy) {
    const std::string file = absl::StrCat(path, "/", name);
    absl::StatusOr<std::string> text = fs.ReadFileAt(dir, name, kMaxRecordBytes, nullptr);
    absl::StatusOr<RecordEntry> e =
        text.ok() ? DecodeRecordEntry(*text) : absl::StatusOr<RecordEntry>(text.status());
    if (!e.ok() || name != absl::StrCat(e->id, ".json")) {
      const std::string why =
          e.ok() ? std::string("its id is not its name") : std::string(e.status().message());
      LogError("unreadable operation record left for inspection", {{"path", file}, {"error", why}});
      if (problems != nullptr) problems->push_back(absl::StrCat(file, ": ", why));
      continue;
    }
    out.legacy.push_back(name);
    // A journal line of the same id is newer (a copy whose file removal did not finish).
    if (seen.insert(e->id).second) out.latest.push_back({*std::move(e), 0});
  }
  return out;
}

}  // namespace journal

std::string JournalSegmentName(uint64_t seq) { return journal::SegmentName(seq); }

absl::StatusOr<std::vector<RecordEntry>> ReadOperationRecord(fs::Fs& fs, const std::string& dir,
                                                             std::vector<std::string>* problems) {
  absl::StatusOr<fs::Dir> d = fs.OpenPath(dir);
  if (absl::IsNotFound(d.status())) return std::vector<RecordEntry>{};
  if (!d.ok()) return d.status();
  ASSIGN_OR_RETURN(journal::JournalRead r, journal::ReadJournal(fs, *d, dir, problems));
  std::vector<RecordEntry> out;
  out.reserve(r.latest.size());
  for (journal::JournalRead::Line& l : r.latest) out.push_back(std::move(l.entry));
  return out;
}


}  // namespace sn::agent
