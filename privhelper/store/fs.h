// privhelper's store works on the node's filesystem seam, common/fs/fs.h (moved there so the
// agent's durable files share it); these are the seam's names in the store's namespace, so
// the store's code reads them unqualified.
#ifndef SANDBOX_NODE_PRIVHELPER_STORE_FS_H_
#define SANDBOX_NODE_PRIVHELPER_STORE_FS_H_

#include "common/fs/fs.h"

namespace sn::privhelper::store {

using fs::Dir;
using fs::FileInfo;
using fs::FileLock;
using fs::FileType;
using fs::Fs;
using fs::IsComponent;
using fs::LockMode;
using fs::ReadableFile;
using fs::WritableFile;

}  // namespace sn::privhelper::store

#endif  // SANDBOX_NODE_PRIVHELPER_STORE_FS_H_
