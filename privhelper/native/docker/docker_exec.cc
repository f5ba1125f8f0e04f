// exec: the Engine exec API over a hijacked connection; stdout and stderr bounded together.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/wire/argument_rules.h"
#include "privhelper/native/docker/docker_ops.h"
#include "privhelper/native/docker/docker_ops_internal.h"

namespace sn::native::docker {
namespace {

using json = nlohmann::json;
using internal::ErrorResponse;
using internal::LogOpFailure;
using internal::Options;

// Demultiplexes Docker's raw stream (8-byte frame headers: stream, 0, 0, 0, big-endian size),
// keeping at most `limit` bytes of stdout and stderr together and discarding the rest as it
// arrives (the stream is still drained to its end, so the exit code is the command's own).
// Memory: the first byte of a stream reserves the room still left under the limit, once; the
// kept bytes are never reallocated (a regrowth would hold them twice for a moment), and
// untouched reserved pages cost no memory.
class Demux {
 public:
  explicit Demux(uint64_t limit) : limit_(limit) {}

  void Feed(std::string_view data) {
    while (!data.empty()) {
      if (remaining_ == 0) {
        size_t n = std::min(8 - header_.size(), data.size());
        header_.append(data.data(), n);
        data.remove_prefix(n);
        if (header_.size() < 8) return;
        const auto* h = reinterpret_cast<const unsigned char*>(header_.data());
        stream_ = h[0];
        remaining_ = (uint64_t{h[4]} << 24) | (uint64_t{h[5]} << 16) | (uint64_t{h[6]} << 8) | h[7];
        header_.clear();
        continue;
      }
      size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size()));
      std::string_view piece = data.substr(0, n);
      data.remove_prefix(n);
      remaining_ -= n;
      if (stream_ != 1 && stream_ != 2) continue;  // stdin echo or unknown: not output
      uint64_t room = limit_ - kept_;
      size_t take = static_cast<size_t>(std::min<uint64_t>(room, piece.size()));
      std::string& out = stream_ == 1 ? stdout_ : stderr_;
      if (take > 0 && out.capacity() < out.size() + take) out.reserve(out.size() + room);
      out.append(piece.data(), take);
      kept_ += take;
      if (take < piece.size()) truncated_ = true;
    }
  }

  // False when the stream ended inside a frame: the daemon cut it off.
  bool complete() const { return remaining_ == 0 && header_.empty(); }

  std::string stdout_, stderr_;
  bool truncated_ = false;

 private:
  const uint64_t limit_;
  uint64_t kept_ = 0;
  std::string header_;
  int stream_ = 0;
  uint64_t remaining_ = 0;
};

// Creates the exec instance: its id, or the error that answers the call (nothing ran yet).
std::optional<std::string> CreateExecInstance(::sn::docker::DockerEngine& engine,
                                              const std::string& container, const pb::ExecArgs& a,
                                              const CallControl& ctl, pb::ErrorCode* error) {
  json create = {{"AttachStdin", !a.stdin().empty()},
                 {"AttachStdout", true},
                 {"AttachStderr", true},
                 {"Tty", false},
                 {"Cmd", std::vector<std::string>(a.argv().begin(), a.argv().end())}};
  absl::StatusOr<::sn::docker::HttpResponse> r = engine.Request(
      "POST", absl::StrCat(kApi, "/containers/", container, "/exec"), create.dump(), Options(ctl));
  *error = pb::ERROR_CODE_UNAVAILABLE;
  if (!r.ok()) return std::nullopt;
  if (r->status == 409) {  // not running
    *error = pb::ERROR_CODE_CONFLICT;
    return std::nullopt;
  }
  if (r->status != 201) {
    LogOpFailure("exec", "create", absl::StrCat("http ", r->status));
    return std::nullopt;
  }
  return internal::CreatedId(r->body);
}

// The exit code of a finished exec instance; nothing when it cannot be read or still runs.
std::optional<int64_t> ExitCode(::sn::docker::DockerEngine& engine, const std::string& exec_id,
                                const CallControl& ctl) {
  absl::StatusOr<::sn::docker::HttpResponse> info =
      engine.Request("GET", absl::StrCat(kApi, "/exec/", exec_id, "/json"), "", Options(ctl));
  if (!info.ok() || info->status != 200) return std::nullopt;
  json doc = json::parse(info->body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("ExitCode") ||
      !doc["ExitCode"].is_number_integer() || (doc.contains("Running") && doc["Running"] == true)) {
    return std::nullopt;
  }
  return doc["ExitCode"].get<int64_t>();
}

}  // namespace

pb::ExecuteResponse DockerOperations::Exec(const pb::ExecArgs& a, const Call& call) {
  CallControl* ctl = call.control;
  // The helper keeps at most output_limit_bytes: a limit beyond the spec's is refused before
  // any I/O, as are arguments the Engine would otherwise receive unchecked.
  if (!wire::rules::OutputLimitBytes(a.output_limit_bytes()) ||
      !wire::rules::StdinBytes(a.stdin().size()) ||
      !wire::rules::ArgvCount(static_cast<size_t>(a.argv_size()))) {
    return ErrorResponse(pb::ERROR_CODE_INVALID, *ctl);
  }
  absl::StatusOr<internal::Lookup> found =
      internal::FindSandbox(*engine_, installation_, a.sandbox_id(), *ctl);
  if (!found.ok()) return ErrorResponse(pb::ERROR_CODE_UNAVAILABLE, *ctl);
  if (!found->exists) return ErrorResponse(pb::ERROR_CODE_NOT_FOUND, *ctl);
  if (found->generation != generation_ || !found->running) {
    return ErrorResponse(pb::ERROR_CODE_CONFLICT, *ctl);
  }
  const bool with_stdin = !a.stdin().empty();
  pb::ErrorCode error = pb::ERROR_CODE_UNAVAILABLE;
  const std::optional<std::string> instance =
      CreateExecInstance(*engine_, found->id, a, *ctl, &error);
  if (!instance) return ErrorResponse(error, *ctl);
  const std::string& exec_id = *instance;

  ctl->native_started = true;
  Demux demux(static_cast<uint64_t>(a.output_limit_bytes()));
  json start = {{"Detach", false}, {"Tty", false}};
  absl::StatusOr<::sn::docker::HttpResponse> s = engine_->Hijack(
      "POST", absl::StrCat(kApi, "/exec/", exec_id, "/start"), start.dump(), a.stdin(),
      /*close_input=*/with_stdin,
      [&demux, ctl](std::string_view d) {
        demux.Feed(d);
        return !(ctl->cancelled != nullptr && ctl->cancelled->load());
      },
      Options(*ctl, 1 << 20));
  if (!s.ok()) {
    LogOpFailure("exec", "start", s.status().ToString());
    return ErrorResponse(internal::MutationTransportCode(s.status()) == pb::ERROR_CODE_UNAVAILABLE
                             ? pb::ERROR_CODE_UNAVAILABLE
                             : pb::ERROR_CODE_UNCERTAIN,
                         *ctl);
  }
  if (s->status != 101 && s->status != 200) {
    LogOpFailure("exec", "start", absl::StrCat("http ", s->status));
    return ErrorResponse(s->status == 409 ? pb::ERROR_CODE_CONFLICT : pb::ERROR_CODE_UNCERTAIN, *ctl);
  }
  // A stream cut inside a frame means the daemon dropped the connection mid-output (it is
  // going away): the outputs are incomplete, so the outcome is uncertain.
  if (!demux.complete()) {
    LogOpFailure("exec", "stream", "the output stream ended inside a frame");
    return ErrorResponse(pb::ERROR_CODE_UNCERTAIN, *ctl);
  }
  const std::optional<int64_t> exit_code = ExitCode(*engine_, exec_id, *ctl);
  if (!exit_code) return ErrorResponse(pb::ERROR_CODE_UNCERTAIN, *ctl);
  pb::ExecuteResponse resp;
  resp.set_native_call_started(true);
  pb::ExecResult* out = resp.mutable_exec();
  out->set_exit_code(*exit_code);
  out->set_stdout(std::move(demux.stdout_));
  out->set_stderr(std::move(demux.stderr_));
  out->set_truncated(demux.truncated_);
  return resp;
}

}  // namespace sn::native::docker
