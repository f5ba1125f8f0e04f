// privhelper's start-up configuration: `privhelper --config=FILE`, a JSON object with exactly
//   socket (absolute path), agent_uid (int), state_dir (absolute path), provider ("docker"),
//   docker_socket (optional absolute path, default /var/run/docker.sock),
//   max_active (optional int 1..100000, default 16), max_retained (optional int 0..1000000,
//   default 64): the capacity privhelper enforces itself and reports through Probe,
//   helper_idle_seconds (optional int 1..86400, default 600): a native helper with no call for
//   this long is stopped (and started again on the next call),
//   max_generations (optional int 2..4096, default 64): generation records privhelper holds
//   (dropped generations' markers excluded); a preparation of a new generation beyond it is
//   refused storage_exhausted (store/generations.h),
//   release_public_key (required string): base64 of the 32-byte Ed25519 key of the console
//   releases privhelper trusts; privhelper verifies every release with this copy only,
//   microvm (an object, required with provider "microvm", refused with any other): the
//   microVM provider's host settings, each member below (MicrovmConfig); unknown members
//   refused like the top level's.
// The installation identity is not configured: privhelper owns it (installation.h). The
// native helper executable is "native_helper" beside the privhelper executable.
// Unknown members, missing members and wrong types are start-up errors naming the member.
#ifndef SANDBOX_NODE_PRIVHELPER_CONFIG_H_
#define SANDBOX_NODE_PRIVHELPER_CONFIG_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sn::privhelper {

inline constexpr char kDefaultDockerSocket[] = "/var/run/docker.sock";
inline constexpr size_t kMaxConfigBytes = 64 * 1024;

inline constexpr int64_t kDefaultMaxActive = 16;
inline constexpr int64_t kDefaultMaxRetained = 64;
inline constexpr int64_t kDefaultHelperIdleSeconds = 600;
inline constexpr int64_t kMaxHelperIdleSeconds = 86400;
inline constexpr int64_t kDefaultMaxGenerations = 64;
inline constexpr int64_t kMinMaxGenerations = 2;
inline constexpr int64_t kMaxMaxGenerations = 4096;

// provider "microvm" (docs/operator-guide.md, "The microVM provider"):
//   accel (optional "kvm" | "tcg" | "auto", default "auto"): "auto" uses KVM when a probe
//     proves it runs a guest, else TCG; "kvm" that cannot run a guest is
//     virtualization_unavailable;
//   store_dir (required absolute path, at most kMaxMicrovmStoreDir bytes: the longest channel
//     socket, the boot probe's STORE/probe/vms/<uuid>/agent.sock, must fit a unix socket's 107
//     bytes):
//     the installation's private store of VM disks and records;
//   vm_uid, vm_gid (required integers): the unprivileged identity qemu runs as; neither 0, and
//     vm_uid is not the agent's uid;
//   disk_bytes (optional, 64 MiB..1 TiB, default 1 GiB): the size each sandbox's disk shows
//     its guest (its qcow2 overlay's virtual size; the guest grows the image's ext4 to it);
//   free_space_floor_bytes (optional, 0..1 PiB, default 1 GiB): a create or resume that would
//     leave less free space in store_dir, once every overlay's growth to its full disk is
//     reserved, is refused capacity (docs/protocol.md 24j);
//   qemu, qemu_img (optional absolute paths, default Debian's /usr/bin/qemu-system-x86_64
//     and /usr/bin/qemu-img).
inline constexpr size_t kMaxMicrovmStoreDir = 107 - (sizeof("/probe/vms/") - 1) - 36 -
                                              (sizeof("/agent.sock") - 1);
inline constexpr int64_t kDefaultMicrovmDiskBytes = int64_t{1} << 30;
inline constexpr int64_t kMinMicrovmDiskBytes = int64_t{64} << 20;
inline constexpr int64_t kMaxMicrovmDiskBytes = int64_t{1} << 40;
inline constexpr int64_t kDefaultMicrovmFreeSpaceFloor = int64_t{1} << 30;
inline constexpr int64_t kMaxMicrovmFreeSpaceFloor = int64_t{1} << 50;
inline constexpr char kDefaultQemu[] = "/usr/bin/qemu-system-x86_64";
inline constexpr char kDefaultQemuImg[] = "/usr/bin/qemu-img";

struct MicrovmConfig {
  std::string accel = "auto";
  std::string store_dir;
  uid_t vm_uid = 0;
  gid_t vm_gid = 0;
  int64_t disk_bytes = kDefaultMicrovmDiskBytes;
  int64_t free_space_floor_bytes = kDefaultMicrovmFreeSpaceFloor;
  std::string qemu = kDefaultQemu;
  std::string qemu_img = kDefaultQemuImg;
};

struct Config {
  std::string socket;     // where privhelper listens (unix socket, created by privhelper)
  uid_t agent_uid = 0;    // the one uid whose connections are served
  std::string state_dir;  // privhelper's private state
  std::string provider;   // "docker" or "microvm"
  std::string docker_socket = kDefaultDockerSocket;
  int64_t max_active = kDefaultMaxActive;
  int64_t max_retained = kDefaultMaxRetained;
  int64_t helper_idle_seconds = kDefaultHelperIdleSeconds;
  int64_t max_generations = kDefaultMaxGenerations;
  std::string release_public_key;  // base64, checked at start-up (a valid Ed25519 key)
  std::optional<MicrovmConfig> microvm;  // present iff provider is "microvm"
};

// Parses and validates the JSON text with the durable records' strict reader
// (common/json/record.h): one JSON object of at most kMaxConfigBytes, no member named twice,
// no unknown member, every member of its type. InvalidArgument messages name the offending
// member.
absl::StatusOr<Config> ParseConfig(std::string_view json_text);

// Reads (at most kMaxConfigBytes) and parses `path`. The file is privhelper's trust anchor:
// refused (FailedPrecondition naming the file and the reason) unless it is a regular file,
// reached without following a symbolic link through directories only root can change, owned
// by root (privhelper's euid) and not writable by group or others (store/safe_dir.h).
absl::StatusOr<Config> LoadConfig(const std::string& path);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_CONFIG_H_
