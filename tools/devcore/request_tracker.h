// Provider requests on one live connection, Core side (spec/wire.md §4-§5).
// devcore assigns each request's id and sequence, keeps at most 32 pending, waits for the
// response up to timeout_ms plus a margin, and validates every response against the pending
// request before handing it to the caller:
//   - an unknown or duplicate id, another connection_id, or a `result` whose shape does not
//     match the operation closes the connection with 4006 (the caller gets 502);
//   - `unsupported` whose evidence is missing or differs from the provider's registered
//     declaration, and a `create_settled` receipt that is not exactly this request's, are
//     reported as `unconfirmed` (the node's code stays visible as node_error_code).
// A request whose wait ended stays pending until the node answers or the connection closes:
// the node still counts it. REQUIRES (thread): devcore's event-loop thread.
#ifndef SANDBOX_NODE_TOOLS_DEVCORE_REQUEST_TRACKER_H_
#define SANDBOX_NODE_TOOLS_DEVCORE_REQUEST_TRACKER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>

#include "common/clock.h"
#include "common/wire/frames.h"

namespace sn::devcore {

// What the admin API asks for: POST /admin/v1/nodes/{node_id}/requests.
struct AdminRequest {
  int64_t generation = 0;
  std::string operation;
  int64_t timeout_ms = 0;
  std::string arguments_json;  // a JSON object, sent as is
};

// The admin API's answer.
struct RequestOutcome {
  int http_status = 200;
  std::string body;  // JSON
  // For a node response: Core's view of the round trip on the monotonic clock, from handing
  // the request frame to the connection to decoding the response frame (reported by the
  // admin API as the Sn-Node-Round-Trip-Us header; used by tests/bench/request_bench).
  std::optional<absl::Duration> node_round_trip;
};
using RequestDone = std::function<void(RequestOutcome)>;

// A provider request parsed and checked once, with everything but the envelope members that
// belong to a connection (id, connection_id, owner_epoch, sequence): the heavy part of a
// request (a 64 MiB write_file is parsed, re-encoded and decoded as the node will), made by a
// pure function that devcore runs off its event loop.
struct PreparedRequest {
  int64_t generation = 0;
  std::string operation;
  int64_t timeout_ms = 0;
  std::string arguments;  // the arguments object, compact JSON
  std::optional<std::string> sandbox_id;
};

// Checks `req` and encodes its arguments; on failure, the admin API's answer (400, or 413 for
// a frame over the size limit). The check decodes the frame as the node will, with each
// connection member at its longest (a canonical uuid, int64 max), so the frame sent with the
// real members is no larger and just as valid. Pure: safe on any thread.
std::variant<PreparedRequest, RequestOutcome> PrepareRequest(const AdminRequest& req);

// The body of POST /admin/v1/nodes/{node_id}/requests: members generation (int64), operation
// (string), timeout_ms (int64), arguments (object), each required, no others. Then as
// PrepareRequest. Pure: safe on any thread.
std::variant<PreparedRequest, RequestOutcome> PrepareRequestBody(std::string_view body);

// What Core knows about the node that the evidence checks need.
struct RequestContext {
  std::string provider;
  // The specification digest of a generation announced to the node, or nullopt.
  std::function<std::optional<std::string>(int64_t generation)> digest_of;
};

class RequestTracker {
 public:
  static constexpr absl::Duration kWaitMargin = absl::Seconds(5);

  // REQUIRES: `timers` and `clock` outlive the tracker.
  RequestTracker(TimerQueue* timers, const Clock* clock) : timers_(timers), clock_(clock) {}
  ~RequestTracker();

  // Binds the tracker to the connection's identity once it is live.
  void Bind(std::string connection_id, int64_t owner_epoch, RequestContext context,
            std::function<void(std::string)> send);

  // Sends a request; `done` runs exactly once: with the node's response, or an error
  // (400 a request that would be an invalid frame, 429 when 32 are pending, 504 when the wait
  // ended, 502 when the connection closed first). Errors after sending carry the request id.
  void Send(const AdminRequest& req, RequestDone done);
  // The same for a request prepared already (PrepareRequest): what is left is cheap (the
  // envelope's members and one copy of the arguments' text).
  void Send(PreparedRequest req, RequestDone done);

  // A response frame arrived (`raw` is its text). Returns the close code (4006) when it
  // breaks correlation; otherwise delivers it.
  std::optional<int> OnResponse(const wire::Response& response, std::string_view raw);

  // The connection is closing or closed: every waiter gets 502; nothing more is sent.
  void FailAll(std::string_view why);

  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    std::optional<wire::Operation> operation;  // nullopt: not a §5 operation
    std::string operation_name;
    int64_t generation = 0;
    std::optional<std::string> sandbox_id;
    RequestDone done;  // empty once the wait ended
    std::unique_ptr<Timer> timer;
    MonoTime sent_at;
  };
  // nullopt when the evidence holds; otherwise why it is reported as unconfirmed.
  std::optional<std::string> EvidenceProblem(const Pending& p, const std::string& id,
                                             const wire::Response& r) const;

  TimerQueue* timers_;
  const Clock* clock_;
  bool bound_ = false;
  bool closed_ = false;
  std::string connection_id_;
  int64_t owner_epoch_ = 0;
  int64_t sequence_ = 0;
  RequestContext context_;
  std::function<void(std::string)> send_;
  std::map<std::string, Pending> pending_;
  std::set<std::string> answered_;
};

}  // namespace sn::devcore

#endif  // SANDBOX_NODE_TOOLS_DEVCORE_REQUEST_TRACKER_H_
