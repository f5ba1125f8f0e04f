// Fuzz target for the host end of the microVM guest channel (privhelper/native/microvm/
// guest_channel.h): the input is what a hostile guest answers. Layout: byte 0 picks the
// request (hello, start, exec, write_file, read_file, sync, poweroff), bytes 1..8 its
// parameter (a nonce, an output limit, max_bytes, a content size), the rest is the answer
// frame's body. Invariants, each aborting when broken, for every answer CheckAnswer accepts:
//   1. it fits the request's frame bound and names the request's id;
//   2. it is the request's kind of answer, or an Error with a known code and a bounded message;
//   3. exec output within the output limit and an exit code in 0..383; read_file content
//      within max_bytes, size >= content, truncated iff size > content; write_file's size is
//      the content's; Ready carries the nonce and the protocol version;
//   4. re-serialised and checked again, it is accepted again.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "privhelper/native/microvm/guest_channel.h"

namespace {

using sn::guest::v1::FromGuest;
using sn::guest::v1::ToGuest;

void Require(bool ok) {
  if (!ok) std::abort();
}

ToGuest Request(uint8_t kind, uint64_t param) {
  ToGuest r;
  r.set_id(1 + (param & 0xff));
  switch (kind % 7) {
    case 0:
      r.mutable_hello()->set_nonce(param);
      break;
    case 1:
      r.mutable_start()->add_argv("/bin/sh");
      break;
    case 2:
      r.mutable_exec()->add_argv("true");
      r.mutable_exec()->set_output_limit_bytes(static_cast<int64_t>(param % 70000) - 10);
      break;
    case 3:
      r.mutable_write_file()->set_path("/f");
      r.mutable_write_file()->set_content(std::string(param % 300, 'c'));
      break;
    case 4:
      r.mutable_read_file()->set_path("/f");
      r.mutable_read_file()->set_max_bytes(static_cast<int64_t>(param % 70000) - 10);
      break;
    case 5:
      r.mutable_sync();
      break;
    default:
      r.mutable_poweroff();
      break;
  }
  return r;
}

void CheckAccepted(const ToGuest& r, std::string_view frame, const FromGuest& a) {
  Require(frame.size() <= sn::microvm::MaxAnswerBytes(r));
  Require(a.id() == r.id());
  if (a.answer_case() == FromGuest::kError) {
    Require(a.error().code() != sn::guest::v1::ERROR_NONE);
    Require(a.error().message().size() <= sn::microvm::kMaxGuestErrorBytes);
    return;
  }
  switch (r.request_case()) {
    case ToGuest::kHello:
      Require(a.answer_case() == FromGuest::kReady);
      Require(a.ready().nonce() == r.hello().nonce());
      Require(a.ready().protocol_version() == sn::microvm::kGuestProtocolVersion);
      break;
    case ToGuest::kExec: {
      Require(a.answer_case() == FromGuest::kExec);
      const int64_t out = static_cast<int64_t>(a.exec().stdout().size() + a.exec().stderr().size());
      Require(out <= std::max<int64_t>(r.exec().output_limit_bytes(), 0));
      Require(a.exec().exit_code() >= 0 && a.exec().exit_code() <= 383);
      break;
    }
    case ToGuest::kReadFile: {
      Require(a.answer_case() == FromGuest::kReadFile);
      const int64_t got = static_cast<int64_t>(a.read_file().content().size());
      Require(got <= std::max<int64_t>(r.read_file().max_bytes(), 0));
      Require(a.read_file().size() >= got);
      Require(a.read_file().truncated() == (a.read_file().size() > got));
      break;
    }
    case ToGuest::kWriteFile:
      Require(a.answer_case() == FromGuest::kWriteFile);
      Require(a.write_file().size() ==
              static_cast<int64_t>(r.write_file().content().size()));
      break;
    default:
      Require(a.answer_case() == FromGuest::kDone);
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  uint64_t param = 0;
  for (int i = 1; i <= 8; ++i) param = (param << 8) | data[i];
  const ToGuest r = Request(data[0], param);
  const std::string_view frame(reinterpret_cast<const char*>(data + 9), size - 9);
  absl::StatusOr<FromGuest> a = sn::microvm::CheckAnswer(r, frame);
  if (!a.ok()) {
    Require(absl::IsDataLoss(a.status()));
    return 0;
  }
  CheckAccepted(r, frame, *a);
  const std::string again = a->SerializeAsString();
  Require(sn::microvm::CheckAnswer(r, again).ok());
  return 0;
}
