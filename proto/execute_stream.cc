#include "proto/execute_stream.h"

namespace sn::privhelper {

std::string* MutablePayload(v1::ExecuteRequest* r) {
  if (r->has_write_file()) return r->mutable_write_file()->mutable_content();
  if (r->has_exec()) return r->mutable_exec()->mutable_stdin();
  return nullptr;
}

const std::string* Payload(const v1::ExecuteRequest& r) {
  if (r.has_write_file()) return &r.write_file().content();
  if (r.has_exec()) return &r.exec().stdin();
  return nullptr;
}

std::string TakePayload(v1::ExecuteRequest* r) {
  std::string out;
  if (std::string* p = MutablePayload(r)) out.swap(*p);
  r->set_payload_bytes(static_cast<int64_t>(out.size()));
  return out;
}

}  // namespace sn::privhelper
