// The verdict of one frame, as `wirecheck` prints it (without the file name):
//   "ok TYPE"                 decodes for the receiving role
//   "invalid: REASON"         the frame closes the connection (1008, or 1009 for size)
//   "invalid-request: REASON" an envelope-valid request that earns an `invalid` response
#ifndef SANDBOX_NODE_TOOLS_WIRECHECK_CHECK_H_
#define SANDBOX_NODE_TOOLS_WIRECHECK_CHECK_H_

#include <string>
#include <string_view>

#include "common/wire/frames.h"

namespace sn::wirecheck {

struct Verdict {
  enum Kind { kOk, kInvalid, kInvalidRequest } kind = kOk;
  std::string text;  // the line above
};

Verdict Check(std::string_view bytes, wire::Role receiver);

}  // namespace sn::wirecheck

#endif  // SANDBOX_NODE_TOOLS_WIRECHECK_CHECK_H_
