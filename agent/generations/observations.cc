#include "agent/generations/observations.h"

#include <algorithm>
#include <utility>

#include "common/wire/limits.h"

namespace sn::agent {

std::vector<wire::Observation> ObservationRotor::Next(std::vector<wire::Observation> leading,
                                                      std::vector<wire::Observation> others) {
  std::vector<wire::Observation> out = std::move(leading);
  if (out.size() > wire::kMaxGenerationObservations) out.resize(wire::kMaxGenerationObservations);
  std::sort(others.begin(), others.end(),
            [](const wire::Observation& a, const wire::Observation& b) {
              return a.generation < b.generation;
            });
  const size_t room = wire::kMaxGenerationObservations - out.size();
  const size_t take = std::min(room, others.size());
  if (take == 0) return out;
  // The first generation after the cursor (wrapping to the start).
  size_t start = 0;
  while (start < others.size() && others[start].generation <= cursor_) ++start;
  if (start == others.size()) start = 0;
  for (size_t i = 0; i < take; ++i) {
    out.push_back(std::move(others[(start + i) % others.size()]));
  }
  cursor_ = out.back().generation;
  return out;
}

}  // namespace sn::agent
