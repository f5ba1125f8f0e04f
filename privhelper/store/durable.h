// privhelper's store follows the node's durable-file discipline, common/fs/durable.h (private
// directories and records, publication by temporary, fsync, rename and directory fsync, stray
// temporaries removed at start); these are its names in the store's namespace.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_DURABLE_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_DURABLE_H_

#include "common/fs/durable.h"
#include "privhelper/store/fs.h"

namespace sn::privhelper::store {

using fs::OpenPrivateSubdir;
using fs::PublishOnce;
using fs::PublishReplacing;
using fs::ReadPrivateRecord;
using fs::RemoveStrayTemporaries;

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_DURABLE_H_
