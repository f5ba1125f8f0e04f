// Fuzz target for the strict wire decoder. Invariants checked on every input:
//   - Decode never crashes, for either receiving role;
//   - a frame that decodes re-encodes to text that decodes to an equal frame (requests with a
//     request-layer error excepted: their arguments are unspecified);
//   - a response's raw result can be offered to DecodeResult for every operation;
//   - a request the codec accepts (no request-layer error) passes privhelper's CheckArguments
//     once converted as the agent sends it (tests/fuzz/execute_oracle.h FromWireRequest): the
//     two lines of defence never disagree on what the codec let through;
//   - the recorded-response and HTTP body decoders never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/wire/codec.h"
#include "common/wire/http_bodies.h"
#include "privhelper/rpc/execute_check.h"
#include "tests/fuzz/execute_oracle.h"

namespace {

void CheckRoundTrip(const sn::wire::Frame& f, sn::wire::Role role) {
  if (const auto* r = std::get_if<sn::wire::Request>(&f); r && r->request_error) return;
  absl::StatusOr<sn::wire::Frame> again = sn::wire::Decode(sn::wire::Encode(f), role);
  if (!again.ok() || !(*again == f)) std::abort();
}

void CheckPrivhelperAgrees(const sn::wire::Frame& f) {
  const auto* r = std::get_if<sn::wire::Request>(&f);
  if (r == nullptr || r->request_error || r->operation == sn::wire::Operation::kObserve) return;
  if (sn::privhelper::CheckArguments(sn::fuzz::FromWireRequest(*r)).refused()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (sn::wire::Role role : {sn::wire::Role::kNode, sn::wire::Role::kCore}) {
    absl::StatusOr<sn::wire::Frame> f = sn::wire::Decode(bytes, role);
    if (!f.ok()) continue;
    CheckRoundTrip(*f, role);
    CheckPrivhelperAgrees(*f);
    if (const auto* resp = std::get_if<sn::wire::Response>(&*f); resp && resp->raw_result) {
      for (size_t op = 0; op < sn::wire::kOperationCount; ++op) {
        absl::StatusOr<sn::wire::Result> r =
            sn::wire::DecodeResult(static_cast<sn::wire::Operation>(op), *resp->raw_result);
        (void)r;
      }
    }
  }
  absl::StatusOr<sn::wire::RecordedResponse> rec = sn::wire::DecodeRecordedResponse(bytes);
  if (rec.ok()) {
    absl::StatusOr<sn::wire::RecordedResponse> again =
        sn::wire::DecodeRecordedResponse(sn::wire::EncodeRecordedResponse(*rec));
    if (!again.ok()) std::abort();
  }
  // The §6 bodies share the reader; they must not crash either.
  (void)sn::wire::DecodeEnrollRequest(bytes);
  (void)sn::wire::DecodeEnrollResponse(bytes);
  (void)sn::wire::DecodeSpecificationDocument(bytes);
  (void)sn::wire::DecodeReleaseManifest(bytes);
  (void)sn::wire::DecodeCurrentRelease(bytes);
  return 0;
}
