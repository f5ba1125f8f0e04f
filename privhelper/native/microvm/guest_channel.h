// The host end of a microVM's guest channel (proto/guest_agent.proto): one request, one
// answer, each exchange under a deadline, every answer checked before anything uses it.
//
// The guest is as hostile as the agent. What it can send is bounded by the request it
// answers (MaxAnswerBytes): a 4-byte length above that bound closes the channel before one
// byte of the body is read; an answer that does not parse, answers another id, is of another
// kind, or breaks a size rule (CheckAnswer) closes it too; a guest that stops reading or
// writing runs into the exchange's deadline. A closed channel answers every later call with
// Unavailable: the caller reconnects (a new Hello) or gives up on this sandbox only.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_GUEST_CHANNEL_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_GUEST_CHANNEL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/guest_agent.pb.h"

namespace sn::microvm {

inline constexpr uint32_t kGuestProtocolVersion = 1;
inline constexpr size_t kMaxKernelReleaseBytes = 64;
inline constexpr size_t kMaxGuestErrorBytes = 256;
// Envelope and field overhead an answer may add to its payload (ids, tags, lengths).
inline constexpr size_t kGuestEnvelopeBytes = 4096;

// The largest answer frame `request` can legitimately get: its payload's bound (exec's output
// limit, read_file's max_bytes) plus the envelope. Requests that answer no payload get the
// envelope only.
size_t MaxAnswerBytes(const guest::v1::ToGuest& request);

// Checks the answer `frame` (one frame's body) to `request`: it parses, names the request's
// id, is the request's kind of answer (or an Error with a known code and a bounded message),
// and keeps every size rule of guest_agent.proto. DataLoss names the rule broken.
absl::StatusOr<guest::v1::FromGuest> CheckAnswer(const guest::v1::ToGuest& request,
                                                 std::string_view frame);

class GuestChannel {
 public:
  // Takes a connected stream socket (qemu's chardev socket for the "sn.agent" port); it is
  // made non-blocking and close-on-exec.
  explicit GuestChannel(int fd);
  ~GuestChannel();
  GuestChannel(const GuestChannel&) = delete;
  GuestChannel& operator=(const GuestChannel&) = delete;

  // Connects to the unix socket at `path` (no symlink is followed at its last component).
  static absl::StatusOr<std::unique_ptr<GuestChannel>> Connect(const std::string& path);

  // Sends `request` (its id is set here) and returns the checked answer. DeadlineExceeded when
  // `deadline` passes; DataLoss for a broken answer; Unavailable when the guest closed the
  // channel or it was closed by an earlier failure. Any failure closes the channel.
  absl::StatusOr<guest::v1::FromGuest> Call(guest::v1::ToGuest request, absl::Time deadline);

  // Hello (repeated every 250 ms: the guest may not have opened its port yet) until the guest
  // answers the newest one; answers to this connection's earlier Hellos are checked and
  // skipped.
  absl::StatusOr<guest::v1::Ready> Handshake(absl::Time deadline);

  bool open() const { return fd_ >= 0; }

  // True when the channel is open and nothing arrived on it since its last answer: no byte to
  // read and no hang-up (a poll that does not wait). A kept channel is used again only then
  // (channel_pool.h).
  bool Quiet() const;

  // Connects to `path` and handshakes, until `deadline`: a socket not there yet or not
  // listening yet (qemu binds before it listens), or a connection qemu drops while it starts,
  // is tried again every 20 ms; a guest that answers wrongly is not. `still_running`, when
  // given, is asked before each new try: an error from it (the VM exited) ends the wait at once
  // with that error instead of at the deadline.
  static absl::StatusOr<std::unique_ptr<GuestChannel>> ConnectAndHandshake(
      const std::string& path, absl::Time deadline, guest::v1::Ready* ready = nullptr,
      const std::function<absl::Status()>& still_running = nullptr);

 private:
  absl::Status WriteAll(std::string_view bytes, absl::Time deadline);
  absl::Status ReadExactly(char* out, size_t n, absl::Time deadline);
  void Close();

  // Reads one answer frame to `request`, skipping late Ready answers to this connection's
  // earlier Hellos (the handshake repeats Hello until one is answered; the others' answers may
  // still arrive).
  absl::StatusOr<guest::v1::FromGuest> ReadAnswer(const guest::v1::ToGuest& request,
                                                  absl::Time deadline);

  int fd_ = -1;
  uint64_t next_id_ = 1;
  std::map<uint64_t, guest::v1::ToGuest> unanswered_hellos_;  // bounded by the handshake
};

}  // namespace sn::microvm

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_MICROVM_GUEST_CHANNEL_H_
