#include "privhelper/docker/inventory.h"

#include <cctype>
#include <charconv>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"

namespace sn::docker {
namespace {

using json = nlohmann::json;

std::string Label(const json& c, const char* key) {
  auto l = c.find("Labels");
  if (l == c.end() || !l->is_object()) return "";
  auto v = l->find(key);
  if (v == l->end() || !v->is_string()) return "";
  return v->get<std::string>();
}

}  // namespace

int64_t ParseGenerationLabel(std::string_view s) {
  if (s.empty() || s.front() < '0' || s.front() > '9') return 0;  // from_chars takes a '-'
  int64_t g = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), g);
  return ec == std::errc() && p == s.data() + s.size() && g > 0 ? g : 0;
}

std::string UrlEncode(std::string_view s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

absl::StatusOr<std::vector<SandboxContainer>> ListSandboxes(DockerEngine& engine,
                                                            std::string_view installation,
                                                            std::string_view sandbox_id,
                                                            const RequestOptions& options) {
  json labels = json::array({absl::StrCat(kLabelInstallation, "=", AV(installation))});
  if (!sandbox_id.empty()) labels.push_back(absl::StrCat(kLabelSandbox, "=", AV(sandbox_id)));
  const json filters = {{"label", labels}};
  const std::string target = absl::StrCat(kApiVersionPrefix, "/containers/json?all=1&filters=",
                                          UrlEncode(filters.dump()));
  absl::StatusOr<HttpResponse> r = engine.Request("GET", target, "", options);
  if (!r.ok()) return r.status();
  if (r->status != 200) return absl::UnavailableError(absl::StrCat("list: http ", r->status));
  const json doc = json::parse(r->body, nullptr, false);
  if (doc.is_discarded() || !doc.is_array()) return absl::UnavailableError("list: malformed");
  std::vector<SandboxContainer> out;
  for (const json& c : doc) {
    if (!c.is_object() || !c.contains("Id") || !c["Id"].is_string()) {
      return absl::UnavailableError("list entry without Id");
    }
    SandboxContainer s;
    s.id = c["Id"].get<std::string>();
    s.sandbox_id = Label(c, kLabelSandbox);
    // The daemon filtered by label; check again rather than trust it.
    if (Label(c, kLabelInstallation) != installation ||
        (!sandbox_id.empty() && s.sandbox_id != sandbox_id)) {
      return absl::UnavailableError("list entry with foreign labels");
    }
    auto st = c.find("State");
    if (st == c.end() || !st->is_string()) return absl::UnavailableError("entry without State");
    const std::string& state = st->get_ref<const std::string&>();
    if (state == "running") {
      s.running = true;
    } else if (state == "paused" || state == "restarting" || state == "removing" ||
               state == "dead") {
      s.running = true;  // counted as active; doubt for its own sandbox (the header)
      s.transitional = state;
    } else if (state != "created" && state != "exited") {
      return absl::UnavailableError(absl::StrCat("container in state ", state));
    }
    s.generation = ParseGenerationLabel(Label(c, kLabelGeneration));
    s.args_digest = Label(c, kLabelArgs);
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<Counts> CountSandboxes(DockerEngine& engine, std::string_view installation,
                                      const RequestOptions& options) {
  absl::StatusOr<std::vector<SandboxContainer>> all =
      ListSandboxes(engine, installation, "", options);
  if (!all.ok()) return all.status();
  Counts n;
  for (const SandboxContainer& c : *all) (c.running ? n.running : n.retained)++;
  return n;
}

}  // namespace sn::docker
