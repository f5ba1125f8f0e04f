#include "agent/cli/generations_view.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/requests/operation_record.h"
#include "agent/state/state_files.h"
#include "common/atomic_file.h"
#include "common/fs/durable.h"
#include "common/sha256.h"
#include "common/wire/limits.h"
#include "nlohmann/json.hpp"

namespace sn::agent {
namespace {

constexpr size_t kDigestPrefix = 12;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// The names of `dir` (no "." or ".."); empty when it cannot be listed (a missing directory
// is nothing recorded yet).
std::vector<std::string> ListDir(const std::string& dir, std::vector<std::string>* problems) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno != ENOENT) problems->push_back(absl::StrCat(dir, ": cannot be listed"));
    return out;
  }
  while (struct dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(std::move(name));
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// "<G><suffix>" -> G.
std::optional<int64_t> GenerationOf(const std::string& name, std::string_view suffix) {
  if (name.size() <= suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  int64_t g = 0;
  if (!absl::SimpleAtoi(name.substr(0, name.size() - suffix.size()), &g) || g <= 0) {
    return std::nullopt;
  }
  return g;
}

std::string StateName(HeldState s) { return std::string(HeldStateName(s)); }

std::string Pids(const std::vector<int>& pids) { return absl::StrJoin(pids, ","); }

std::string Plural(int n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

std::string Time(const std::optional<absl::Time>& t) {
  if (!t.has_value()) return "?";
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%SZ", *t, absl::UTCTimeZone());
}

// What the retention exchange says about a generation nothing local holds.
std::string GrantReference(const RetentionStatus* r) {
  if (r == nullptr || !r->granted_at.has_value()) {
    if (r != nullptr && r->keep == true) {
      return absl::StrCat("no drop grant yet (Core kept it at ", Time(r->answered_at), ")");
    }
    return "no drop grant yet";
  }
  const std::string granted = absl::StrCat("drop granted at ", Time(r->granted_at));
  if (r->collection.empty()) return absl::StrCat(granted, "; collection not started");
  if (r->collection == "held locally") {
    return absl::StrCat(granted, "; kept by the agent: ", r->reason,
                        " (a new grant is needed)");
  }
  if (r->collection == "held") {
    return absl::StrCat(granted, "; privhelper still held it: ", r->reason,
                        " (a new grant is needed)");
  }
  if (r->collection == "dropped") return granted;
  return absl::StrCat(granted, "; collection ", r->collection,
                      r->reason.empty() ? "" : absl::StrCat(": ", r->reason));
}

}  // namespace

GenerationsInputs ReadGenerationsInputs(const AgentConfig& config,
                                        absl::Duration privhelper_deadline) {
  GenerationsInputs in;
  StateFiles files(config.state_dir);
  in.privhelper = ListGenerationsOnce(config.privhelper_socket, privhelper_deadline);

  FilePinStore pins(files.DeploymentPinsPath());
  absl::StatusOr<DeploymentPins> p = pins.Load();
  if (p.ok()) {
    in.pins = *p;
  } else {
    in.problems.push_back(absl::StrCat(files.DeploymentPinsPath(), ": ", Msg(p.status())));
  }

  absl::StatusOr<std::string> ret =
      fs::ReadFilePath(files.filesystem(), files.RetentionPath(), 1 << 20);
  if (ret.ok()) {
    absl::StatusOr<std::vector<RetentionStatus>> r = ParseRetentionRecord(*ret);
    if (r.ok()) {
      in.retention = *std::move(r);
    } else {
      in.problems.push_back(absl::StrCat(files.RetentionPath(), ": ", Msg(r.status())));
    }
  } else if (!absl::IsNotFound(ret.status())) {
    in.problems.push_back(absl::StrCat(files.RetentionPath(), ": ", Msg(ret.status())));
  }

  for (const std::string& name : ListDir(files.GenerationsDir(), &in.problems)) {
    const std::string path = absl::StrCat(files.GenerationsDir(), "/", name);
    if (std::optional<int64_t> g = GenerationOf(name, ".progress.json")) {
      absl::StatusOr<std::string> text = fs::ReadFilePath(files.filesystem(), path, 1 << 20);
      absl::StatusOr<ProgressRecord> rec =
          text.ok() ? ParseProgressRecord(*text) : absl::StatusOr<ProgressRecord>(text.status());
      if (rec.ok() && rec->job.ref.generation == *g) {
        in.progress[*g] = *std::move(rec);
      } else {
        in.problems.push_back(absl::StrCat(
            path, ": ", rec.ok() ? "names another generation" : Msg(rec.status())));
      }
    } else if (std::optional<int64_t> s = GenerationOf(name, ".spec.json")) {
      absl::StatusOr<std::string> bytes =
          fs::ReadFilePath(files.filesystem(), path, wire::kMaxHttpBodyBytes);
      if (bytes.ok()) {
        in.stored_specifications[*s] = Sha256Hex(*bytes);
      } else {
        in.problems.push_back(absl::StrCat(path, ": ", Msg(bytes.status())));
      }
    }
  }

  // The durable operation record, read as it is (Recover would change it).
  absl::StatusOr<std::vector<RecordEntry>> record =
      ReadOperationRecord(files.filesystem(), files.OperationsDir(), &in.problems);
  if (record.ok()) {
    for (const RecordEntry& e : *record) {
      if (e.state != RecordState::kCompleted) ++in.unfinished_mutations[e.generation];
    }
  } else {
    in.problems.push_back(absl::StrCat(files.OperationsDir(), ": ", Msg(record.status())));
  }
  return in;
}

namespace {

// What one row is decided from.
struct RowFacts {
  GenerationRef ref;
  const PrivhelperGenerationDetail* held = nullptr;  // privhelper's record, if any
  const ProgressRecord* progress = nullptr;          // the agent's, for this very pair
  const RetentionStatus* retention = nullptr;        // the exchange's, for this very pair
  bool running = false;                              // a preparation attempt is running
  bool is_target = false;
  bool is_serving = false;
  bool target_names_other_digest = false;  // the target pin: this number, another digest
};

// Which generations get a row, and with which digest: privhelper's records first; then what
// the agent alone knows (pins always; progress and specifications only when privhelper could
// not say).
std::map<int64_t, std::string> RowNumbers(
    const GenerationsInputs& in, bool reachable,
    const std::map<int64_t, const PrivhelperGenerationDetail*>& held) {
  std::map<int64_t, std::string> numbers;
  for (const auto& [g, d] : held) numbers[g] = d->report.specification_digest;
  auto add = [&](const std::optional<GenerationRef>& ref) {
    if (ref.has_value() && !numbers.count(ref->generation)) {
      numbers[ref->generation] = ref->specification_digest;
    }
  };
  add(in.pins.target);
  add(in.pins.serving);
  for (const auto& [g, p] : in.progress) {
    if (!reachable || (in.pins.target.has_value() && in.pins.target->generation == g)) {
      add(p.job.ref);
    }
  }
  if (!reachable) {
    for (const auto& [g, digest] : in.stored_specifications) add(GenerationRef{g, digest});
  }
  return numbers;
}

// The row's state and diagnostic.
void DecideState(const RowFacts& f, bool reachable, GenerationRow* row) {
  const PrivhelperGenerationDetail* d = f.held;
  const ProgressRecord* prog = f.progress;
  if (d != nullptr) {
    row->state = StateName(d->report.state);
    if (d->report.state == HeldState::kFailed) {
      row->diagnostic = std::string(
          DiagnosticCode(d->report.diagnostic.value_or(Diagnostic::kConfigurationInvalid)));
    } else if (d->report.state == HeldState::kNeedsRepair) {
      row->diagnostic =
          std::string(DiagnosticCode(d->report.diagnostic.value_or(Diagnostic::kRuntimeMissing)));
    } else if (d->report.state == HeldState::kPreparing && !f.running && prog != nullptr &&
               prog->diagnostic.has_value()) {
      row->diagnostic = std::string(DiagnosticCode(*prog->diagnostic));
    }
  } else if (f.running) {
    row->state = "preparing";
  } else if (prog != nullptr && prog->state == "failed") {
    row->state = "failed";
    if (prog->diagnostic.has_value()) {
      row->diagnostic = std::string(DiagnosticCode(*prog->diagnostic));
    }
  } else if (reachable) {
    // A pinned target privhelper has no record of: its preparation has not begun.
    row->state = "preparing";
  } else {
    // privhelper cannot be asked: nothing is usable now, as the node itself reports.
    row->state = "failed";
    row->diagnostic = "provider_unavailable";
  }
  if (f.target_names_other_digest) {
    row->diagnostic = "configuration_invalid";  // the target names this number, another digest
  }
  if (f.is_target && d != nullptr && IsRetired(d->report.state)) {
    row->diagnostic = "configuration_invalid";  // Core names a collected generation (§3)
  }
  const RetentionStatus* ret = f.retention;
  if (!row->diagnostic.has_value() && ret != nullptr && ret->collection == "refused" &&
      ret->diagnostic.has_value()) {
    row->diagnostic = std::string(DiagnosticCode(*ret->diagnostic));
  }
}

// Everything that holds the generation now (none once it is dropped).
void ListReferences(const GenerationsInputs& in, const RowFacts& f, GenerationRow* row) {
  if (row->state == "dropped") return;
  const PrivhelperGenerationDetail* d = f.held;
  if (f.is_serving) row->references.push_back("serving pin");
  if (f.is_target) row->references.push_back("target");
  if (f.target_names_other_digest) {
    row->references.push_back(absl::StrCat(
        "target pin names this number with digest ",
        in.pins.target->specification_digest.substr(0, kDigestPrefix)));
  }
  if (auto m = in.unfinished_mutations.find(f.ref.generation);
      m != in.unfinished_mutations.end()) {
    row->references.push_back(absl::StrCat(
        Plural(m->second, "queued or running mutation", "queued or running mutations"),
        " in the operation record"));
  }
  if (d != nullptr && d->calls_in_flight > 0) {
    row->references.push_back(
        absl::StrCat(Plural(d->calls_in_flight, "call", "calls"), " in flight in privhelper"));
  }
  if (f.running) {
    row->references.push_back(absl::StrCat("preparation running (", f.progress->progress.phase,
                                           ", updated ", f.progress->updated_at, ")"));
  }
  if (d != nullptr) {
    for (int pid : d->helper_pids) {
      row->references.push_back(absl::StrCat("native helper pid ", pid, " (until reaped)"));
    }
    if (!d->lease_holders.empty()) {
      row->references.push_back(absl::StrCat("lease held by pid(s) ", Pids(d->lease_holders)));
    }
    if (d->report.state == HeldState::kCollecting) {
      row->references.push_back(absl::StrCat(
          "collection journal: ", Plural(d->collect_files_left, "file", "files"),
          " left, native cleanup ", d->native_done ? "done" : "pending"));
    }
    if (!d->last_collection_error.empty()) {
      row->references.push_back(absl::StrCat("last collection: ", d->last_collection_error));
    }
  }
  if (!f.is_target && !f.is_serving) row->references.push_back(GrantReference(f.retention));
}

// A preparing generation's progress: the agent's running attempt and privhelper's plan.
std::optional<GenerationRow::Progress> PreparationProgressOf(const RowFacts& f) {
  GenerationRow::Progress pr;
  bool any = false;
  if (f.running) {
    const PreparationProgress& p = f.progress->progress;
    pr.phase = p.phase;
    if (!p.artifact.empty()) pr.artifact = p.artifact;
    pr.bytes_done = p.bytes_done;
    pr.bytes_total = p.bytes_total;
    pr.updated_at = f.progress->updated_at;
    any = true;
  }
  const PrivhelperGenerationDetail* d = f.held;
  if (d != nullptr && d->has_progress) {
    pr.artifacts_stored = d->artifacts_stored;
    pr.artifacts_total = d->artifacts_total;
    pr.bytes_stored = d->bytes_stored;
    pr.plan_bytes_total = d->bytes_total;
    pr.import_started = d->import_started;
    any = true;
  }
  if (!any) return std::nullopt;
  return pr;
}

}  // namespace

std::vector<GenerationRow> BuildGenerationRows(const GenerationsInputs& in) {
  const bool reachable = in.privhelper.ok();
  std::map<int64_t, const PrivhelperGenerationDetail*> held;
  if (reachable) {
    for (const PrivhelperGenerationDetail& d : in.privhelper->generations) {
      held[d.report.generation] = &d;
    }
  }
  std::map<std::pair<int64_t, std::string>, const RetentionStatus*> retention;
  for (const RetentionStatus& r : in.retention) {
    retention[{r.ref.generation, r.ref.specification_digest}] = &r;
  }

  std::vector<GenerationRow> rows;
  for (const auto& [g, digest] : RowNumbers(in, reachable, held)) {
    RowFacts f;
    f.ref = GenerationRef{g, digest};
    if (auto h = held.find(g); h != held.end()) f.held = h->second;
    if (auto p = in.progress.find(g); p != in.progress.end() && p->second.job.ref == f.ref) {
      f.progress = &p->second;
    }
    if (auto r = retention.find({g, digest}); r != retention.end()) f.retention = r->second;
    f.running = f.progress != nullptr && f.progress->state == "running";
    f.is_target = in.pins.target == std::optional<GenerationRef>(f.ref);
    f.is_serving = in.pins.serving == std::optional<GenerationRef>(f.ref);
    f.target_names_other_digest =
        in.pins.target.has_value() && in.pins.target->generation == g && !f.is_target;

    GenerationRow row;
    row.generation = g;
    row.specification_digest = digest;
    if (f.is_target) row.roles.push_back("target");
    if (f.is_serving) row.roles.push_back("serving");
    DecideState(f, reachable, &row);
    ListReferences(in, f, &row);
    if (row.state == "preparing") row.progress = PreparationProgressOf(f);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string FormatGenerationsJson(const std::vector<GenerationRow>& rows) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const GenerationRow& r : rows) {
    nlohmann::ordered_json j;
    j["generation"] = r.generation;
    j["specification_digest"] = r.specification_digest;
    j["state"] = r.state;
    j["roles"] = r.roles;
    if (r.diagnostic.has_value()) j["diagnostic"] = *r.diagnostic;
    j["references"] = r.references;
    if (r.progress.has_value()) {
      const GenerationRow::Progress& p = *r.progress;
      nlohmann::ordered_json o = nlohmann::ordered_json::object();
      if (p.phase) o["phase"] = *p.phase;
      if (p.artifact) o["artifact"] = *p.artifact;
      if (p.bytes_done) o["bytes_done"] = *p.bytes_done;
      if (p.bytes_total) o["bytes_total"] = *p.bytes_total;
      if (p.updated_at) o["updated_at"] = *p.updated_at;
      if (p.artifacts_stored) o["artifacts_stored"] = *p.artifacts_stored;
      if (p.artifacts_total) o["artifacts_total"] = *p.artifacts_total;
      if (p.bytes_stored) o["bytes_stored"] = *p.bytes_stored;
      if (p.plan_bytes_total) o["plan_bytes_total"] = *p.plan_bytes_total;
      if (p.import_started) o["import_started"] = *p.import_started;
      j["progress"] = std::move(o);
    }
    list.push_back(std::move(j));
  }
  nlohmann::ordered_json top;
  top["generations"] = std::move(list);
  return top.dump() + "\n";
}

std::string FormatGenerationsText(const GenerationsInputs& in,
                                  const std::vector<GenerationRow>& rows) {
  std::string out;
  if (in.privhelper.ok()) {
    absl::StrAppend(&out, "privhelper: reachable; collection running: ",
                    in.privhelper->collection_running ? "yes" : "no",
                    "; preparation running: ", in.privhelper->preparation_running ? "yes" : "no",
                    in.privhelper->truncated ? "; its list is truncated" : "", "\n");
  } else {
    absl::StrAppend(&out, "privhelper: UNREACHABLE (", Msg(in.privhelper.status()),
                    ")\n  the rows below are what the agent alone knows (pins, progress "
                    "records, stored specifications, the operation record)\n");
  }
  for (const std::string& p : in.problems) absl::StrAppend(&out, "unreadable: ", p, "\n");
  if (rows.empty()) {
    absl::StrAppend(&out, "no generations\n");
    return out;
  }
  absl::StrAppend(&out, "\n");
  for (const GenerationRow& r : rows) {
    absl::StrAppend(&out, "generation ", r.generation, "  ",
                    r.specification_digest.substr(0, kDigestPrefix), "  ", r.state);
    if (!r.roles.empty()) absl::StrAppend(&out, "  [", absl::StrJoin(r.roles, ", "), "]");
    if (r.diagnostic.has_value()) absl::StrAppend(&out, "  diagnostic ", *r.diagnostic);
    absl::StrAppend(&out, "\n");
    if (r.references.empty()) {
      absl::StrAppend(&out, "    held by: nothing\n");
    } else {
      for (const std::string& ref : r.references) absl::StrAppend(&out, "    held by: ", ref, "\n");
    }
    if (r.progress.has_value()) {
      const GenerationRow::Progress& p = *r.progress;
      absl::StrAppend(&out, "    progress:");
      if (p.phase) absl::StrAppend(&out, " phase ", *p.phase);
      if (p.artifact) absl::StrAppend(&out, " (", *p.artifact, ")");
      if (p.bytes_done && p.bytes_total) {
        absl::StrAppend(&out, " ", *p.bytes_done, " of ", *p.bytes_total, " bytes uploaded");
      }
      if (p.artifacts_stored && p.artifacts_total) {
        absl::StrAppend(&out, "; ", *p.artifacts_stored, " of ", *p.artifacts_total,
                        " artifacts stored");
      }
      if (p.import_started) {
        absl::StrAppend(&out, *p.import_started ? "; import started" : "; import not started");
      }
      absl::StrAppend(&out, "\n");
    }
  }
  return out;
}

int RunGenerationsCommand(const AgentConfig& config, bool json, std::FILE* out,
                          std::FILE* err) {
  GenerationsInputs in = ReadGenerationsInputs(config);
  std::vector<GenerationRow> rows = BuildGenerationRows(in);
  const std::string text = json ? FormatGenerationsJson(rows) : FormatGenerationsText(in, rows);
  std::fwrite(text.data(), 1, text.size(), out);
  if (json) {
    if (!in.privhelper.ok()) {
      std::fprintf(err, "agent generations: privhelper unreachable (%s); showing what the agent "
                        "alone knows\n",
                   Msg(in.privhelper.status()).c_str());
    }
    for (const std::string& p : in.problems) {
      std::fprintf(err, "agent generations: unreadable: %s\n", p.c_str());
    }
  }
  return in.privhelper.ok() && in.problems.empty() ? 0 : 1;
}

}  // namespace sn::agent
