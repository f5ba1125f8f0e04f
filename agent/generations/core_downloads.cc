#include "agent/generations/core_downloads.h"

namespace sn::agent {

absl::StatusOr<HttpResult> HttpCoreDownloads::Get(const std::string& target, bool credentialed,
                                                  size_t max_bytes, CancelToken* cancel) {
  HttpCallSpec spec;
  spec.method = "GET";
  spec.target = target;
  if (credentialed) spec.bearer = credential_;
  spec.timeout = timeout_;
  spec.max_body_bytes = max_bytes;
  spec.cancel = cancel;
  return HttpCall(origin_, ca_bundle_, spec);
}

absl::Status HttpCoreDownloads::GetStream(const std::string& target, uint64_t range_from,
                                          const HttpStreamSink& sink, CancelToken* cancel) {
  HttpCallSpec spec;
  if (range_from > 0) spec.range_from = range_from;
  spec.method = "GET";
  spec.target = target;
  spec.timeout = timeout_;
  spec.cancel = cancel;
  return HttpGetStream(origin_, ca_bundle_, spec, sink);
}

}  // namespace sn::agent
