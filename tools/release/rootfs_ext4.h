// The ext4 image `release rootfs` writes (tools/release/rootfs.h): mke2fs -d over a tree, then
// debugfs to fix the times mke2fs copies from the tree (ctime cannot be set on the source).
// Both run as children (fork + execve of an absolute path, no shell) with a fixed environment:
// LC_ALL=C, E2FSPROGS_FAKE_TIME=<epoch> and MKE2FS_CONFIG naming a configuration file this
// step writes, so neither the host's /etc/mke2fs.conf nor its locale nor its clock changes a
// byte. Everything that could vary is fixed:
//   - a file system made by our own mke2fs.conf: 4 KiB blocks, 256-byte inodes, the inode
//     count given, no reserved blocks, features ext_attr, dir_index, filetype, extent,
//     flex_bg (16), sparse_super, large_file, huge_file, dir_nlink, extra_isize,
//     metadata_csum, 64bit; no journal, no resize inode, no orphan file;
//   - the UUID (kImageUuid), the directory hash seed (kImageHashSeed) and half_md4 hashing;
//   - the root 0:0 (root_owner), inode tables written (lazy_itable_init=0), no discard;
//   - mke2fs's own times (superblock, root, lost+found, crtime) from E2FSPROGS_FAKE_TIME;
//   - afterwards every inode in use gets atime = mtime = ctime = crtime = epoch (debugfs sif).
// mke2fs 1.47 reads each directory sorted (scandir + alphasort, in the C locale), so inode and
// block allocation follow the names, not the source file system's directory order.
#ifndef SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_EXT4_H_
#define SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_EXT4_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "tools/release/rootfs_tree.h"

namespace sn::release_tool::rootfs {

inline constexpr char kMke2fs[] = "/usr/sbin/mke2fs";
inline constexpr char kDebugfs[] = "/usr/sbin/debugfs";
inline constexpr char kImageUuid[] = "6e6f6465-726f-4f74-8673-000000000001";
inline constexpr char kImageHashSeed[] = "6e6f6465-726f-4f74-8673-000000000002";

// The inode count mke2fs is given for a tree: its inodes, the reserved ones and lost+found,
// and a sixteenth more.
uint64_t InodesFor(const TreeSize& tree);
// The image size (MiB) computed for a tree: its data blocks and a sixteenth more, the inode
// tables, and 8 MiB for the other metadata (bitmaps, group descriptors, superblock copies,
// extent blocks), rounded up to a MiB.
uint64_t SizeMibFor(const TreeSize& tree, uint64_t inodes);

struct Ext4Request {
  std::string source_dir;  // the tree (mke2fs -d)
  std::string image;       // the image file to create (must not exist)
  std::string work_dir;    // for the configuration, scripts and children's output
  uint64_t size_mib = 0;
  uint64_t inodes = 0;
  int64_t epoch = 0;  // >= 1 (e2fsprogs reads E2FSPROGS_FAKE_TIME=0 as "unset")
};

// Makes the image. `interrupted` is polled while a child runs (the child is then killed).
absl::Status MakeExt4Image(const Ext4Request& r, const std::function<bool()>& interrupted);

}  // namespace sn::release_tool::rootfs

#endif  // SANDBOX_NODE_TOOLS_RELEASE_ROOTFS_EXT4_H_
