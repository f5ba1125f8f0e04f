// An in-memory Core for preparation tests (CoreDownloads): routes by target, each a body and
// a status, streamed in pieces; a route can cut its stream, lie in its Content-Length, or run
// a hook when half of its body has been delivered (to change /releases/current or cancel the
// attempt mid-download). Records every target asked for. Thread-compatible: one preparation.
#ifndef SANDBOX_NODE_TESTS_AGENT_GENERATIONS_FAKE_CORE_H_
#define SANDBOX_NODE_TESTS_AGENT_GENERATIONS_FAKE_CORE_H_

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/generations/prepare_seams.h"

namespace sn::agent::testing {

class FakeCore final : public CoreDownloads {
 public:
  struct Route {
    int status = 200;
    std::string body;
    std::optional<size_t> cut_after;           // the stream breaks after this many bytes
    std::optional<uint64_t> content_length;    // a Content-Length other than the body's
    bool chunked = false;                       // no Content-Length at all
    std::function<void()> at_half;              // runs once, halfway through the body
  };

  void Set(const std::string& target, std::string body, int status = 200) {
    routes[target] = Route{status, std::move(body), std::nullopt, std::nullopt, false, nullptr};
  }

  absl::StatusOr<HttpResult> Get(const std::string& target, bool credentialed, size_t max_bytes,
                                 CancelToken* cancel) override {
    asked.push_back(target);
    if (credentialed) credentialed_targets.push_back(target);
    if (cancel != nullptr && cancel->cancelled()) return absl::CancelledError("cancelled");
    auto it = routes.find(target);
    if (it == routes.end()) return HttpResult{404, ""};
    if (it->second.body.size() > max_bytes) return absl::ResourceExhaustedError("too large");
    return HttpResult{it->second.status, it->second.body};
  }

  absl::Status GetStream(const std::string& target, const HttpStreamSink& sink,
                         CancelToken* cancel) override {
    asked.push_back(target);
    auto it = routes.find(target);
    Route r = it == routes.end() ? Route{404, "", std::nullopt, std::nullopt, false, nullptr}
                                 : it->second;
    std::optional<uint64_t> length = r.content_length.value_or(r.body.size());
    if (r.chunked) length.reset();
    absl::Status st = sink.on_head(r.status, length);
    if (!st.ok()) return st;
    const size_t end = std::min(r.body.size(), r.cut_after.value_or(r.body.size()));
    bool hooked = false;
    for (size_t at = 0; at < end; at += kPiece) {
      if (!hooked && at >= r.body.size() / 2 && r.at_half) {
        hooked = true;
        r.at_half();
      }
      if (cancel != nullptr && cancel->cancelled()) return absl::CancelledError("cancelled");
      st = sink.on_data(std::string_view(r.body).substr(at, std::min(kPiece, end - at)));
      if (!st.ok()) return st;
    }
    if (r.cut_after.has_value() && *r.cut_after < r.body.size()) {
      return absl::UnavailableError("the response body was cut short: end of stream");
    }
    return absl::OkStatus();
  }

  static constexpr size_t kPiece = 64 << 10;
  std::map<std::string, Route> routes;
  std::vector<std::string> asked;
  std::vector<std::string> credentialed_targets;
};

}  // namespace sn::agent::testing

#endif  // SANDBOX_NODE_TESTS_AGENT_GENERATIONS_FAKE_CORE_H_
