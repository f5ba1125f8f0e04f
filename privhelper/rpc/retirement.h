// privhelper's retirement RPCs over its stores, apart from gRPC: the service in
// server.cc admits each call (permit table; CollectGeneration shares preparation's single
// slot) and hands it here.
//  - CollectGeneration re-checks, with the installation lock and the generation's lease held
//    exclusively (store/generations.h), that nothing privhelper runs holds the generation: no
//    Execute call in flight on it (GenerationRefs), no helper of it before waitpid
//    (HelperManager::live_pids), no create of it that may still land (SandboxFence), the
//    caller still connected. An idle helper of the generation
//    is asked to stop first, so a retry soon finds it reaped.
//  - ListGenerations reads records, stat() and /proc/locks only.
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_RETIREMENT_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_RETIREMENT_H_

#include <functional>

#include "privhelper/retirement_hooks.h"
#include "privhelper/helpers/helper_manager.h"
#include "privhelper/importer.h"
#include "privhelper/rpc/references.h"
#include "privhelper/rpc/sandbox_fence.h"
#include "privhelper/store/generations.h"
#include "proto/privhelper.pb.h"

namespace sn::privhelper {

struct RetirementContext {
  store::GenerationStore* generations = nullptr;
  HelperManager* helpers = nullptr;  // may be null (no helpers run)
  GenerationRefs* refs = nullptr;
  ImageImporter* importer = nullptr;  // the backend's native cleanup
  RetirementHooks provider;           // the backend's own check and cleanup (may be empty)
  SandboxFence* fence = nullptr;      // may be null (tests without one)
};

// `cancelled` is polled when the references are checked.
v1::CollectGenerationResult CollectGeneration(const RetirementContext& ctx,
                                              const v1::CollectGenerationRequest& r,
                                              const std::function<bool()>& cancelled);

v1::ListGenerationsResponse ListGenerations(const RetirementContext& ctx,
                                            bool preparation_running);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_RETIREMENT_H_
