#include "common/process_init.h"

#include "absl/synchronization/mutex.h"
#include "common/log.h"

namespace sn {

void InitProcess(std::string_view component) {
  InitLogging(component);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace sn
