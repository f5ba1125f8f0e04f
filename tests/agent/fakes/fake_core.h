// An in-memory Core for preparation tests (CoreDownloads): routes by target, each a body and
// a status, streamed in pieces; a route can cut its stream, lie in its Content-Length, or run
// a hook when half of its body has been delivered (to change /releases/current or cancel the
// attempt mid-download). A range request (`Range: bytes=N-`) is answered 206 with its
// Content-Range as Core does, unless the route ignores ranges (200, the whole body). Records
// every target asked for, and every range asked. Thread-compatible: one preparation.
#ifndef SANDBOX_NODE_TESTS_AGENT_FAKES_FAKE_CORE_H_
#define SANDBOX_NODE_TESTS_AGENT_FAKES_FAKE_CORE_H_

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
    bool ignore_range = false;                  // answer a range request with 200, whole
    std::optional<std::string> content_range;   // a Content-Range other than the true one
  };

  void Set(const std::string& target, std::string body, int status = 200) {
    Route r;
    r.status = status;
    r.body = std::move(body);
    routes[target] = std::move(r);
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

  absl::Status GetStream(const std::string& target, uint64_t range_from,
                         const HttpStreamSink& sink, CancelToken* cancel) override {
    asked.push_back(target);
    ranges.push_back(range_from);
    auto it = routes.find(target);
    Route r;
    if (it == routes.end()) {
      r.status = 404;
    } else {
      r = it->second;
    }
    std::string content_range;
    if (range_from > 0 && r.status == 200 && !r.ignore_range && range_from < r.body.size()) {
      content_range = absl::StrCat("bytes ", range_from, "-", r.body.size() - 1, "/",
                                   r.body.size());
      r.status = 206;
      r.body = r.body.substr(range_from);
      if (r.cut_after.has_value()) *r.cut_after -= std::min<size_t>(*r.cut_after, range_from);
    }
    if (r.content_range.has_value()) content_range = *r.content_range;
    std::optional<uint64_t> length = r.content_length.value_or(r.body.size());
    if (r.chunked) length.reset();
    if (sink.on_content_range) sink.on_content_range(content_range);
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
  std::vector<uint64_t> ranges;  // GetStream's range_from, in order (0: the whole body)
  std::vector<std::string> credentialed_targets;
};

}  // namespace sn::agent::testing

#endif  // SANDBOX_NODE_TESTS_AGENT_FAKES_FAKE_CORE_H_
