#include "agent/requests/privhelper_executor.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "agent/privhelper_rpc/channel.h"
#include "agent/requests/privhelper_convert.h"
#include "common/log.h"
#include "proto/execute_stream.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::agent {
namespace {

using privhelper::kMaxPayloadChunkBytes;

ExecOutcome Error(const char* code) {
  ExecOutcome o;
  o.error_code = code;
  return o;
}

// One call's state; owned by Impl::inflight_ until its last completion is taken from the queue.
// The Execute stream (proto/privhelper.proto, ExecuteMessage) carries the request, then its
// payload in chunks.
// - Without a payload (inspect, kill, most operations) the stream is one message and its
//   half-close, which on the wire is exactly a unary call: it is made as one, through a generic
//   stub on the same method, so that the initial metadata, the message, the half-close and the
//   receipt of the answer are one batch with one tag: nothing completes until privhelper
//   answers.
// - With a payload, the last message half-closes the stream in the same batch (WriteLast), and
//   the initial metadata is corked into the first write; Finish is started at once, beside the
//   writes. Two tags: one for the write in flight, one for Finish.
struct Conn;

struct Call {
  struct Tag {
    Call* call;
    bool finish;
  };
  grpc::ClientContext ctx;
  pb::ExecuteRequest req;
  std::string payload;  // moved out of the request; sent in chunks
  size_t sent = 0;      // payload bytes written so far
  pb::ExecuteResponse resp;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncWriter<pb::ExecuteMessage>> writer;    // with a payload
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::ExecuteResponse>> unary;  // without
  std::function<void(const grpc::Status&)> on_done;  // runs on the event loop
  std::shared_ptr<Conn> conn;                        // the connection it runs on
  std::unique_ptr<boost::asio::steady_timer> deadline;  // polls once the gRPC deadline passed
  Tag write_tag{this, false};
  Tag finish_tag{this, true};
  bool writing = false;   // write_tag is in the queue's hands
  bool finished = false;  // finish_tag came back: `status` is final

  // REQUIRES: ctx has its deadline; `unary` was prepared, or ctx has corked initial metadata
  // and `writer` was prepared.
  void Start() {
    if (unary != nullptr) {
      unary->StartCall();  // no batch yet: Finish sends and receives in one
      unary->Finish(&resp, &status, &finish_tag);
      return;
    }
    writer->StartCall(nullptr);  // corked: no batch and no tag of its own
    pb::ExecuteMessage m;
    *m.mutable_request() = std::move(req);
    Write(m);
    writer->Finish(&status, &finish_tag);
  }

  // Whether a payload message is still to be written or in gRPC's hands.
  bool WritesPending() const { return writer != nullptr && (writing || sent < payload.size()); }

  // Takes one completion; true when the call is over (Finish and any write came back).
  bool Complete(const Tag* tag, bool ok) {
    if (tag->finish) {
      finished = true;
    } else {
      writing = false;
      // A failed write means the stream ended (privhelper answered already, or the transport
      // failed): Finish tells which.
      if (ok && sent < payload.size()) {
        pb::ExecuteMessage m;
        const size_t n = std::min(kMaxPayloadChunkBytes, payload.size() - sent);
        m.set_payload(payload.substr(sent, n));
        sent += n;
        Write(m);
      }
    }
    return finished && !writing;
  }

 private:
  void Write(const pb::ExecuteMessage& m) {
    writing = true;
    grpc::WriteOptions options;
    if (sent >= payload.size()) options.set_last_message();  // half-closes in the same batch
    writer->Write(m, options, &write_tag);
  }
};

// One connection to privhelper: a socket this executor connected, the gRPC channel made on it
// (a direct channel: gRPC never reconnects it behind our back) and duplicates of the descriptor
// that the event loop watches (Impl, below): one for reading, always; one for writing only
// while a payload is being written (asio keeps EPOLLOUT registered for a descriptor once
// asked, and privhelper reading any request would then wake the loop).
struct Conn {
  explicit Conn(boost::asio::io_context& io) : read_watch(io) {}
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::PrivHelper::Stub> stub;
  std::unique_ptr<grpc::TemplatedGenericStub<pb::ExecuteMessage, pb::ExecuteResponse>> generic;
  boost::asio::posix::stream_descriptor read_watch;
  std::unique_ptr<boost::asio::posix::stream_descriptor> write_watch;
  int calls = 0;          // in flight on it
  bool broken = false;    // privhelper hung up or the transport failed: no new call on it
  bool read_armed = false;
  uint64_t write_wait = 0;  // the write watch's current wait (0: none)
};

}  // namespace

// The event loop is the only thread that takes completions from the queue, and it does gRPC's
// reads and writes for these calls itself: it watches the connection's socket (a duplicate of
// gRPC's descriptor, through asio) and, when the socket is readable (or, while a payload is
// being written, writable), polls the queue without blocking (AsyncNext with a past deadline),
// which reads what arrived and hands over every finished call. So an answer costs one wake-up
// of the event loop, not a completion thread's wake-up plus a hand-off to the loop
// (docs/performance.md, "Node overhead on inspect"). An idle connection stays watched, so
// privhelper's frames between calls (pings, its GOAWAY) are answered and its hang-up is seen;
// a connection whose peer hung up is not (its end would stay readable).
//
// This relies on no other thread reading the socket: the agent runs gRPC with its "poll"
// engine (agent/cli/main.cc), in which a completion queue polls only the descriptors of its own
// calls, not one epoll set for the whole process (where a probe or an upload on another thread
// would read these answers). Completions that arrive without the socket (gRPC's timer ending a
// call at its deadline; work gRPC hands to its executor threads) are taken by polls that run
// while calls are in flight: each call's deadline, and 10 ms, 100 ms, then every second after
// the last call started.
class PrivhelperExecutor::Impl {
 public:
  Impl(PrivhelperExecutorOptions options, boost::asio::io_context& io)
      : options_(std::move(options)), io_(io), poll_timer_(io) {}

  // Cancels the calls in flight and takes their completions (each `done` runs, here), so no
  // callback runs after this. Runs where the event loop ran, after it stopped or on it.
  ~Impl() {
    alive_.reset();
    for (const auto& [key, call] : inflight_) call->ctx.TryCancel();
    while (!inflight_.empty()) {
      void* tag = nullptr;
      bool ok = false;
      if (cq_.AsyncNext(&tag, &ok, std::chrono::system_clock::now() +
                                       std::chrono::milliseconds(100)) ==
          grpc::CompletionQueue::GOT_EVENT) {
        Handle(tag, ok);
      }
    }
    for (const std::shared_ptr<Conn>& c : conns_) {
      EndWriteWatch(c);
      c->read_watch.close();
    }
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  void Execute(const wire::Request& request, absl::Duration remaining,
               std::function<void(ExecOutcome)> done);

 private:
  absl::StatusOr<std::shared_ptr<Conn>> Connection();
  void ArmRead(const std::shared_ptr<Conn>& c);
  void ArmWrite(const std::shared_ptr<Conn>& c);
  void EndWriteWatch(const std::shared_ptr<Conn>& c);
  void OnReady(const std::shared_ptr<Conn>& c);
  // Takes every completion the queue has now (reading what the sockets hold); the count.
  int Poll();
  void Handle(void* tag, bool ok);
  void SchedulePoll(absl::Duration after);
  static bool HungUp(Conn& c);
  void Forget(const std::shared_ptr<Conn>& c);

  PrivhelperExecutorOptions options_;
  boost::asio::io_context& io_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for handlers queued in io_
  grpc::CompletionQueue cq_;
  std::map<Call*, std::shared_ptr<Call>> inflight_;
  std::shared_ptr<Conn> current_;                // new calls go here
  std::vector<std::shared_ptr<Conn>> conns_;     // current_ and broken ones with calls left
  const std::string execute_method_ =
      absl::StrCat("/", pb::PrivHelper::service_full_name(), "/Execute");
  boost::asio::steady_timer poll_timer_;
  absl::Duration poll_backoff_ = absl::Milliseconds(10);
  uint64_t write_waits_ = 0;
  bool logged_connect_failure_ = false;
};

absl::StatusOr<std::shared_ptr<Conn>> PrivhelperExecutor::Impl::Connection() {
  // (A direct channel has no connectivity state to ask: the socket's end and the calls'
  // UNAVAILABLE say when privhelper went away.)
  if (current_ != nullptr && !current_->broken && HungUp(*current_)) {
    current_->broken = true;  // privhelper went away since the last call: connect anew
  }
  if (current_ != nullptr && !current_->broken) return current_;
  absl::StatusOr<int> connected = ConnectPrivhelperSocket(options_.socket_path);
  if (!connected.ok()) return connected.status();
  const int fd = *connected;
  const int watch_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (watch_fd < 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("dup: ", strerror(err)));
  }
  auto c = std::make_shared<Conn>(io_);
  c->read_watch.assign(watch_fd);
  // gRPC owns `fd` from here (and makes it non-blocking; the duplicate shares that).
  c->channel = PrivhelperChannelOnSocket(fd);
  c->stub = pb::PrivHelper::NewStub(c->channel);
  c->generic = std::make_unique<
      grpc::TemplatedGenericStub<pb::ExecuteMessage, pb::ExecuteResponse>>(c->channel);
  if (current_ != nullptr && current_->calls == 0) Forget(current_);
  current_ = c;
  conns_.push_back(c);
  if (logged_connect_failure_) LogInfo("privhelper reachable again");
  logged_connect_failure_ = false;
  return c;
}

void PrivhelperExecutor::Impl::ArmRead(const std::shared_ptr<Conn>& c) {
  if (c->read_armed || !c->read_watch.is_open()) return;
  c->read_armed = true;
  // The handlers hold the connection weakly: a forgotten one (and its channel) goes at once.
  c->read_watch.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                           [this, alive = std::weak_ptr<bool>(alive_),
                            weak = std::weak_ptr<Conn>(c)](const boost::system::error_code& ec) {
                             std::shared_ptr<Conn> c = weak.lock();
                             if (alive.expired() || c == nullptr) return;
                             c->read_armed = false;
                             if (!ec) OnReady(c);
                           });
}

void PrivhelperExecutor::Impl::ArmWrite(const std::shared_ptr<Conn>& c) {
  if (c->write_wait != 0 || c->broken || !c->read_watch.is_open()) return;
  if (c->write_watch == nullptr) {
    const int fd = fcntl(c->read_watch.native_handle(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
      SchedulePoll(absl::Milliseconds(1));  // no watch: the polls carry the writes on
      return;
    }
    c->write_watch = std::make_unique<boost::asio::posix::stream_descriptor>(io_, fd);
  }
  const uint64_t wait = ++write_waits_;
  c->write_wait = wait;
  c->write_watch->async_wait(boost::asio::posix::stream_descriptor::wait_write,
                             [this, alive = std::weak_ptr<bool>(alive_),
                              weak = std::weak_ptr<Conn>(c), wait](
                                 const boost::system::error_code& ec) {
                               std::shared_ptr<Conn> c = weak.lock();
                               if (alive.expired() || c == nullptr || c->write_wait != wait) {
                                 return;
                               }
                               c->write_wait = 0;
                               if (!ec) OnReady(c);
                             });
}

// Closes the write watch once no payload is being written on `c` (Poll).
void PrivhelperExecutor::Impl::EndWriteWatch(const std::shared_ptr<Conn>& c) {
  c->write_wait = 0;  // a wait still queued is stale from here
  if (c->write_watch != nullptr) {
    c->write_watch->close();
    c->write_watch.reset();
  }
}

// The socket became readable (an answer, privhelper's frames, its hang-up) or, while a payload
// is written, writable. The read watch is armed again after the poll; asio checks the socket
// when it arms, so nothing that arrived meanwhile is missed.
void PrivhelperExecutor::Impl::OnReady(const std::shared_ptr<Conn>& c) {
  if (HungUp(*c)) c->broken = true;  // gRPC sees the end when it reads; new calls connect anew
  Poll();
  if (c->broken && c->calls == 0) Forget(c);
}

bool PrivhelperExecutor::Impl::HungUp(Conn& c) {
  pollfd p{c.read_watch.native_handle(), POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

int PrivhelperExecutor::Impl::Poll() {
  int found = 0;
  // A deadline in the past: one non-blocking round of gRPC's polling (which handles one ready
  // descriptor per round), then whatever is queued. Rounds go on until three in a row took
  // nothing, so that a round spent on another descriptor does not leave an answer unread.
  for (int empty = 0; empty < 3;) {
    void* tag = nullptr;
    bool ok = false;
    if (cq_.AsyncNext(&tag, &ok, gpr_inf_past(GPR_CLOCK_MONOTONIC)) !=
        grpc::CompletionQueue::GOT_EVENT) {
      ++empty;
      continue;
    }
    empty = 0;
    ++found;
    Handle(tag, ok);
  }
  // Every live connection is watched, idle ones too, so that privhelper's frames between calls
  // (a ping, its GOAWAY when it stops) are answered and its hang-up is seen at once. Not one
  // that hung up: its end stays readable (its calls, if any, end by the polls above or the
  // schedule). Payload writes gRPC could not finish wait for the socket to drain; a
  // connection without any stops watching for that.
  for (const std::shared_ptr<Conn>& c : conns_) {
    if (!c->broken) ArmRead(c);
  }
  std::set<Conn*> writing;
  for (const auto& [key, call] : inflight_) {
    if (call->WritesPending()) {
      writing.insert(call->conn.get());
      ArmWrite(call->conn);
    }
  }
  for (const std::shared_ptr<Conn>& c : conns_) {
    if (c->write_watch != nullptr && !writing.contains(c.get())) EndWriteWatch(c);
  }
  return found;
}

void PrivhelperExecutor::Impl::Handle(void* tag, bool ok) {
  const auto* t = static_cast<const Call::Tag*>(tag);
  auto it = inflight_.find(t->call);
  if (it == inflight_.end()) return;
  std::shared_ptr<Call> call = it->second;
  if (!call->Complete(t, ok)) return;
  inflight_.erase(it);
  if (call->deadline != nullptr) call->deadline->cancel();
  std::shared_ptr<Conn> c = call->conn;
  --c->calls;
  if (call->status.error_code() == grpc::StatusCode::UNAVAILABLE) c->broken = true;
  call->on_done(call->status);
  if (c->broken && c->calls == 0) Forget(c);
  if (inflight_.empty()) poll_timer_.cancel();
}

// The polls that take what arrives without the socket (the class comment): 10 ms after a call
// starts, then 100 ms, then every second, while calls are in flight.
void PrivhelperExecutor::Impl::SchedulePoll(absl::Duration after) {
  poll_backoff_ = after;
  poll_timer_.expires_after(absl::ToChronoNanoseconds(after));
  poll_timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](
                             const boost::system::error_code& ec) {
    if (alive.expired() || ec) return;  // cancelled: rescheduled, or no call left
    Poll();
    if (!inflight_.empty()) SchedulePoll(std::min(poll_backoff_ * 10, absl::Seconds(1)));
  });
}

void PrivhelperExecutor::Impl::Forget(const std::shared_ptr<Conn>& c) {
  EndWriteWatch(c);
  c->read_watch.close();  // its wait ends with operation_aborted
  conns_.erase(std::remove(conns_.begin(), conns_.end(), c), conns_.end());
  if (current_ == c) current_ = nullptr;
}

void PrivhelperExecutor::Impl::Execute(const wire::Request& request, absl::Duration remaining,
                                       std::function<void(ExecOutcome)> done) {
  auto call = std::make_shared<Call>();
  if (!ToProto(request, &call->req)) {
    LogError("an operation privhelper does not run reached the executor", {{"id", request.id}});
    boost::asio::post(io_, [done = std::move(done)] { done(Error("unavailable")); });
    return;
  }
  absl::StatusOr<std::shared_ptr<Conn>> conn = Connection();
  if (!conn.ok()) {
    // Nothing was sent: unavailable, for a mutation too.
    if (!logged_connect_failure_) {
      LogWarning("privhelper unreachable", {{"error", std::string(conn.status().message())}});
      logged_connect_failure_ = true;
    }
    boost::asio::post(io_, [done = std::move(done)] { done(Error("unavailable")); });
    return;
  }
  call->conn = *conn;
  if (remaining < absl::Milliseconds(1)) remaining = absl::Milliseconds(1);
  call->req.set_budget_ms(absl::ToInt64Milliseconds(remaining));
  call->req.set_installation_id(options_.installation_id);
  call->payload = privhelper::TakePayload(&call->req);
  const absl::Duration deadline = remaining + options_.deadline_grace;
  SetCallDeadline(&call->ctx, deadline);
  const bool mutation = wire::IsMutationRequest(request.operation, request.args);
  call->on_done = [call_ptr = call.get(), request = WithoutPayload(request), mutation,
                   digest = options_.digest_of ? options_.digest_of(request.generation)
                                                   .value_or(std::string())
                                               : std::string(),
                   done = std::move(done)](const grpc::Status& st) mutable {
    ExecOutcome outcome;
    if (st.ok()) {
      const pb::ExecuteResponse& resp = call_ptr->resp;
      if (resp.refusal() != pb::REFUSAL_NONE) {
        // privhelper answered itself before any native I/O; error_code says what to answer.
        LogWarning("privhelper refused the call",
                   {{"id", request.id},
                    {"refusal", pb::Refusal_Name(resp.refusal())},
                    {"error_code", pb::ErrorCode_Name(resp.error_code())}});
      }
      outcome = FromProto(request, resp, digest);
    } else {
      // Non-OK statuses that only come before any work is done (the peer check; a method or
      // message privhelper does not serve): nothing started. Anything else — a transport loss
      // (UNAVAILABLE may come after the request was sent), cancellation, deadline — leaves a
      // mutation's fate unknown.
      const bool not_reached = st.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
                               st.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
                               st.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
                               st.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                               st.error_code() == grpc::StatusCode::UNIMPLEMENTED;
      outcome = Error(mutation && !not_reached ? "uncertain" : "unavailable");
      LogWarning("privhelper Execute failed",
                 {{"id", request.id},
                  {"grpc_code", static_cast<int>(st.error_code())},
                  {"error", st.error_message()}});
    }
    done(std::move(outcome));  // on the event loop (Impl::Handle), never inside Execute
  };
  Conn& c = **conn;
  if (call->payload.empty()) {
    pb::ExecuteMessage m;
    *m.mutable_request() = std::move(call->req);
    call->unary = c.generic->PrepareUnaryCall(&call->ctx, execute_method_, m, &cq_);
  } else {
    call->ctx.set_initial_metadata_corked(true);
    call->writer = c.stub->PrepareAsyncExecute(&call->ctx, &call->resp, &cq_);
  }
  // gRPC's timer ends the call at its deadline and queues its completion; this poll takes it.
  call->deadline = std::make_unique<boost::asio::steady_timer>(io_);
  call->deadline->expires_after(absl::ToChronoMilliseconds(deadline + absl::Milliseconds(50)));
  call->deadline->async_wait([this, alive = std::weak_ptr<bool>(alive_)](
                                 const boost::system::error_code& ec) {
    if (!alive.expired() && !ec) Poll();
  });
  inflight_.emplace(call.get(), call);
  ++c.calls;
  call->Start();  // the request is written here, in this thread, when the socket takes it
  ArmRead(call->conn);
  if (call->WritesPending()) ArmWrite(call->conn);
  SchedulePoll(absl::Milliseconds(10));
}

PrivhelperExecutor::PrivhelperExecutor(PrivhelperExecutorOptions options,
                                       boost::asio::io_context& io)
    : impl_(std::make_unique<Impl>(std::move(options), io)) {}
PrivhelperExecutor::~PrivhelperExecutor() = default;

void PrivhelperExecutor::Execute(const wire::Request& request, absl::Duration remaining_budget,
                                 std::function<void(ExecOutcome)> done) {
  impl_->Execute(request, remaining_budget, std::move(done));
}

}  // namespace sn::agent
