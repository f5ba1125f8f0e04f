// Which generation observations one hello or heartbeat carries (spec/wire.md §3): at most 8;
// the target and serving generations first; the remaining slots rotate fairly over every
// other generation the node reports, in generation order, continuing after the last one sent.
// With at most two leading entries, at least six others fit in each message, so each of n
// reported generations appears within ⌈n/6⌉ messages while the set is unchanged; a
// generation that appears or goes never makes another wait longer than one more turn.
// Pure state (the cursor); single-threaded on the event loop.
#ifndef SANDBOX_NODE_AGENT_GENERATIONS_OBSERVATIONS_H_
#define SANDBOX_NODE_AGENT_GENERATIONS_OBSERVATIONS_H_

#include <cstdint>
#include <vector>

#include "common/wire/frames.h"

namespace sn::agent {

class ObservationRotor {
 public:
  // `leading`: the target's and the serving generation's observations (0..2, distinct
  // generations). `others`: one observation per other reported generation (unique numbers,
  // none of leading's), in any order. Returns `leading`, then as many of `others` as fit,
  // starting after the generation the previous call ended with.
  std::vector<wire::Observation> Next(std::vector<wire::Observation> leading,
                                      std::vector<wire::Observation> others);

 private:
  int64_t cursor_ = 0;  // the last `others` generation sent; 0 before the first
};

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_GENERATIONS_OBSERVATIONS_H_
