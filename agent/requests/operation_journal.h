// The operation record's journal on disk (docs/formats.md, "operations/journal-<seq>.jsonl";
// the rules are at the top of operation_record.h): segment names, the header that seals the
// segment before it, and the reader. Internal to OperationRecord (operation_record.cc).
#ifndef SANDBOX_NODE_AGENT_REQUESTS_OPERATION_JOURNAL_H_
#define SANDBOX_NODE_AGENT_REQUESTS_OPERATION_JOURNAL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/requests/operation_record.h"
#include "common/fs/fs.h"

namespace sn::agent::journal {

// "journal-<20 digits>.jsonl".
std::string SegmentName(uint64_t seq);
// An earlier-format record's name: "<uuid>.json".
bool IsLegacyName(std::string_view name);

// A header's seal: the segment before it and its length of valid lines.
struct Seal {
  uint64_t segment = 0;
  uint64_t bytes = 0;
};

// The header line of segment `seq`, sealing `seals` (none: the first segment).
std::string EncodeHeader(uint64_t seq, std::optional<Seal> seals);

// What the directory holds, read without changing anything.
struct JournalRead {
  struct Line {
    RecordEntry entry;
    uint64_t segment = 0;  // 0: a file of the earlier format
  };
  std::vector<Line> latest;                    // the last state of each id
  // Every segment with a header: its valid bytes and its header's.
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> segment_bytes;
  std::vector<std::string> abandoned;          // segments without a header: they hold nothing
  std::vector<std::string> legacy;             // earlier-format files that read (all of them)
  uint64_t max_seq = 0;                        // of every segment name
};


// Reads `dir` (opened; `path` names it in messages) without changing anything: sealed
// segments exactly to their sealed length (DataLoss otherwise), the newest to its first line
// that does not read, then the earlier format's files. `problems` (optional) gets what was
// ignored.
absl::StatusOr<JournalRead> ReadJournal(fs::Fs& fs, const fs::Dir& dir, const std::string& path,
                                        std::vector<std::string>* problems);

}  // namespace sn::agent::journal

#endif  // SANDBOX_NODE_AGENT_REQUESTS_OPERATION_JOURNAL_H_
