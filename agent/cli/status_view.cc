#include "agent/cli/status_view.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/metrics/node_status.h"
#include "nlohmann/json.hpp"

namespace sn::agent {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr size_t kMaxStatusBytes = 64 * 1024;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

std::string HumanBytes(int64_t n) {
  if (n >= (int64_t{1} << 30)) return absl::StrCat(n >> 30, " GiB");
  if (n >= (int64_t{1} << 20)) return absl::StrCat(n >> 20, " MiB");
  if (n >= (int64_t{1} << 10)) return absl::StrCat(n >> 10, " KiB");
  return absl::StrCat(n, " B");
}

// The live document, parsed; null when there is none or it is not an object.
json Live(const StatusInputs& in) {
  if (!in.live.ok()) return nullptr;
  json doc = json::parse(*in.live, nullptr, /*allow_exceptions=*/false);
  return doc.is_object() ? doc : json(nullptr);
}

std::string Str(const json& j, const char* key, const std::string& fallback = "?") {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>()
                                                                : fallback;
}

// Whether privhelper answers: the running agent's latest probes say (they run every health
// report, and root could not ask privhelper itself: it serves only the agent's user); with the
// agent stopped, privhelper's own answer to ListGenerations.
bool PrivhelperAnswers(const StatusInputs& in, const json& live) {
  if (!live.is_null() && live.contains("provider")) {
    return Str(live["provider"], "privhelper") == "answering";
  }
  return in.durable.privhelper.ok();
}

std::string PrivhelperProblem(const StatusInputs& in, const json& live) {
  if (!live.is_null() && live.contains("provider")) {
    return absl::StrCat("the agent's probes fail since ", Str(live["provider"], "failing_since"));
  }
  return Msg(in.durable.privhelper.status());
}

}  // namespace

absl::StatusOr<std::string> FetchLiveStatus(const std::string& socket_path,
                                            absl::Duration timeout) {
  sockaddr_un a{};
  if (socket_path.size() >= sizeof a.sun_path) return absl::InvalidArgumentError("path too long");
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError("socket");
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("no answer on ", socket_path, ": ", strerror(err)));
  }
  const std::string req = "GET /status HTTP/1.0\r\nHost: agent\r\n\r\n";
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return absl::UnavailableError("the status socket closed");
  }
  std::string got;
  const absl::Time deadline = absl::Now() + timeout;
  char buf[4096];
  for (;;) {
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    pollfd p{fd, POLLIN, 0};
    if (ms <= 0 || poll(&p, 1, ms) != 1) {
      close(fd);
      return absl::DeadlineExceededError("the agent did not answer in time");
    }
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
    if (got.size() > kMaxStatusBytes) {
      close(fd);
      return absl::DataLossError("the agent's status is larger than 64 KiB");
    }
  }
  close(fd);
  const size_t body = got.find("\r\n\r\n");
  if (got.rfind("HTTP/1.0 200", 0) != 0 && got.rfind("HTTP/1.1 200", 0) != 0) {
    return absl::DataLossError("the status socket answered without 200");
  }
  if (body == std::string::npos) return absl::DataLossError("a response without a body");
  return got.substr(body + 4);
}

StatusInputs ReadStatusInputs(const AgentConfig& config) {
  StatusInputs in;
  StateFiles files(config.state_dir);
  in.identity = files.ReadIdentity();
  in.owner_epoch = FileEpochStore(files.OwnerEpochPath()).Load();
  in.durable = ReadGenerationsInputs(config);
  in.live = FetchLiveStatus(StatusSocketPath(config.state_dir));
  return in;
}

std::string FormatStatusJson(const StatusInputs& in) {
  ordered_json doc;
  doc["schema"] = 1;
  doc["agent"] = in.live.ok() ? "running" : "not running";
  if (in.identity.ok()) {
    doc["node"] = {{"node_id", in.identity->node_id},
                   {"installation_id", in.identity->installation_id},
                   {"provider", in.identity->provider},
                   {"core_origin", in.identity->core_origin},
                   {"enrolled_generation", in.identity->deployment_generation}};
  } else {
    doc["node"] = nullptr;
  }
  doc["owner_epoch"] = in.owner_epoch.ok() ? ordered_json(*in.owner_epoch) : ordered_json(nullptr);
  const json live = Live(in);
  doc["privhelper"] = PrivhelperAnswers(in, live) ? "answering" : "not answering";
  const DeploymentPins& pins = in.durable.pins;
  doc["deployment"] = {
      {"serving", pins.serving ? ordered_json(pins.serving->generation) : ordered_json(nullptr)},
      {"target", pins.target ? ordered_json(pins.target->generation) : ordered_json(nullptr)}};
  ordered_json preps = ordered_json::array();
  for (const auto& [g, p] : in.durable.progress) {
    preps.push_back({{"generation", g},
                     {"state", p.state},
                     {"phase", p.progress.phase},
                     {"bytes_done", p.progress.bytes_done},
                     {"bytes_total", p.progress.bytes_total},
                     {"updated_at", p.updated_at}});
  }
  doc["preparations"] = preps;
  doc["live"] = live.is_null() ? ordered_json(nullptr) : ordered_json::parse(live.dump());
  ordered_json problems = ordered_json::array();
  if (!in.identity.ok()) problems.push_back(absl::StrCat("identity: ", Msg(in.identity.status())));
  if (!in.live.ok()) problems.push_back(absl::StrCat("agent: ", Msg(in.live.status())));
  if (!PrivhelperAnswers(in, live)) {
    problems.push_back(absl::StrCat("privhelper: ", PrivhelperProblem(in, live)));
  }
  for (const std::string& p : in.durable.problems) problems.push_back(p);
  doc["problems"] = problems;
  return doc.dump() + "\n";
}

std::string FormatStatusText(const StatusInputs& in) {
  std::string out;
  auto line = [&out](const std::string& l) { absl::StrAppend(&out, l, "\n"); };
  if (in.identity.ok()) {
    line(absl::StrCat("node ", in.identity->node_id, "  provider ", in.identity->provider,
                      "  Core ", in.identity->core_origin));
  } else {
    line(absl::StrCat("node: unknown (", Msg(in.identity.status()), ")"));
  }
  const json live = Live(in);
  if (live.is_null()) {
    line(absl::StrCat("agent: not running (", Msg(in.live.status()),
                      "); what it left on disk follows"));
    line(absl::StrCat("owner epoch: ", in.owner_epoch.ok() ? absl::StrCat(*in.owner_epoch)
                                                           : std::string("none recorded")));
  } else {
    const json& c = live["connection"];
    std::string conn = absl::StrCat("connection: ", Str(c, "state"));
    if (c.contains("since") && c["since"].is_string())
      absl::StrAppend(&conn, " since ", Str(c, "since"));
    if (c.contains("owner_epoch") && c["owner_epoch"].is_number()) {
      absl::StrAppend(&conn, ", owner epoch ", c["owner_epoch"].get<int64_t>());
    }
    if (c.contains("last_close") && c["last_close"].is_string()) {
      absl::StrAppend(&conn, ", last ended with ", Str(c, "last_close"));
    }
    line(conn);
  }
  if (!PrivhelperAnswers(in, live)) {
    line(absl::StrCat("privhelper: NOT ANSWERING (", PrivhelperProblem(in, live), ")"));
  } else if (!live.is_null() && live.contains("provider") && live["provider"].contains("ready")) {
    const json& p = live["provider"];
    line(absl::StrCat(
        "provider: ", Str(p, "name"),
        p["ready"].get<bool>() ? std::string(" ready") : " NOT READY: " + Str(p, "diagnostic"),
        " (", Str(p, "backend_fingerprint", ""), ")"));
  } else {
    line("privhelper: answering");
  }
  // The running agent's roles when it answers, else the durable pins.
  const DeploymentPins& pins = in.durable.pins;
  std::string serving = pins.serving ? absl::StrCat(pins.serving->generation) : "none";
  std::string target = pins.target ? absl::StrCat(pins.target->generation) : "none";
  if (!live.is_null() && live["generations"].is_array()) {
    serving = target = "none";
    for (const json& g : live["generations"]) {
      const std::string n = absl::StrCat(g.value("generation", int64_t{0}));
      if (g.value("serving", false)) serving = n;
      if (g.value("target", false)) target = n;
    }
  }
  line(absl::StrCat("generations: serving ", serving, ", target ", target));
  if (!live.is_null() && live["generations"].is_array()) {
    for (const json& g : live["generations"]) {
      std::string row = absl::StrCat("  ", g.value("generation", int64_t{0}), " ", Str(g, "state"));
      if (g.contains("diagnostic") && g["diagnostic"].is_string()) {
        absl::StrAppend(&row, " (", Str(g, "diagnostic"), ")");
      }
      if (g.contains("preparation")) {
        const json& p = g["preparation"];
        absl::StrAppend(&row, ": ", Str(p, "phase"), " ",
                        HumanBytes(p.value("bytes_done", int64_t{0})), " of ",
                        HumanBytes(p.value("bytes_total", int64_t{0})));
        if (p["eta_seconds"].is_number()) {
          absl::StrAppend(&row, ", ETA ", p["eta_seconds"].get<int64_t>(), " s");
        }
      }
      line(row);
    }
  } else {
    for (const auto& [g, p] : in.durable.progress) {
      line(absl::StrCat("  ", g, " last preparation ", p.state, " (", p.progress.phase, " ",
                        HumanBytes(p.progress.bytes_done), " of ",
                        HumanBytes(p.progress.bytes_total), ", updated ", p.updated_at, ")"));
    }
  }
  if (!live.is_null() && live.contains("sandboxes")) {
    const json& s = live["sandboxes"];
    line(absl::StrCat("sandboxes: ", s.value("active", int64_t{0}), " active of ",
                      s.value("max_active", int64_t{0}), ", ", s.value("retained", int64_t{0}),
                      " retained of ", s.value("max_retained", int64_t{0})));
  }
  if (!live.is_null() && live.contains("requests")) {
    const json& r = live["requests"];
    std::vector<std::string> parts;
    if (r["last_minute"].is_object()) {
      for (auto it = r["last_minute"].begin(); it != r["last_minute"].end(); ++it) {
        parts.push_back(absl::StrCat(it.key(), " ", it.value().get<int64_t>()));
      }
    }
    line(absl::StrCat(
        "requests in the last minute: ", parts.empty() ? "none" : absl::StrJoin(parts, ", "),
        "; now ", r.value("in_flight", int64_t{0}), " in flight"));
    if (live["last_error"].is_object()) {
      const json& e = live["last_error"];
      line(absl::StrCat("last error: ", Str(e, "operation"), " ", Str(e, "outcome"), " at ",
                        Str(e, "at")));
    }
  }
  for (const std::string& p : in.durable.problems) line("problem: " + p);
  return out;
}

int RunStatusCommand(const AgentConfig& config, bool json_out, std::FILE* out, std::FILE* err) {
  const StatusInputs in = ReadStatusInputs(config);
  const std::string text = json_out ? FormatStatusJson(in) : FormatStatusText(in);
  std::fwrite(text.data(), 1, text.size(), out);
  if (!in.identity.ok()) {
    std::fprintf(err, "agent status: the node's identity cannot be read: %s\n",
                 Msg(in.identity.status()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace sn::agent
