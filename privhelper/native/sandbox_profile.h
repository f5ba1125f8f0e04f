// The sandbox profile: the one set of container settings every sandbox is created with
// (docs/security.md, "The sandbox profile"). Every number of it is named here; Create
// (docker_ops.cc) applies it through SandboxHostConfig and nowhere else.
//
// What a sandbox gets beyond its create arguments (cpu_millis -> NanoCpus, memory_bytes ->
// Memory):
//  - no swap (MemorySwap = Memory), at most kPidsLimit tasks, no network, no restart;
//  - an init process (docker-init, i.e. tini) as PID 1 that reaps orphans and forwards signals;
//  - no-new-privileges, the capability set kCapabilities (narrower than Docker's default 14),
//    Docker's default seccomp profile (not overridden);
//  - ulimits: kOpenFiles descriptors, no core files;
//  - no container log at all (Core reads outputs through exec, never through logs).
// Not bounded: the container's writable layer. overlay2 on ext4 (this project's hosts) has no
// per-container size option (StorageOpt size needs overlay2 on xfs with pquota, or
// devicemapper/btrfs/zfs); see docs/security.md for what that leaves open.
#ifndef SANDBOX_NODE_PRIVHELPER_NATIVE_SANDBOX_PROFILE_H_
#define SANDBOX_NODE_PRIVHELPER_NATIVE_SANDBOX_PROFILE_H_

#include <cstdint>

#include <nlohmann/json_fwd.hpp>

namespace sn::native::profile {

inline constexpr int64_t kPidsLimit = 256;      // tasks (processes + threads) per sandbox
inline constexpr int64_t kOpenFiles = 1024;     // RLIMIT_NOFILE, soft = hard
inline constexpr int64_t kCoreFileBytes = 0;    // RLIMIT_CORE
inline constexpr char kLogDriver[] = "none";
inline constexpr char kNetworkMode[] = "none";
inline constexpr char kNoNewPrivileges[] = "no-new-privileges:true";
// Kept from Docker's default set (CHOWN, DAC_OVERRIDE, FSETID, FOWNER, MKNOD, NET_RAW, SETGID,
// SETUID, SETFCAP, SETPCAP, NET_BIND_SERVICE, SYS_CHROOT, KILL, AUDIT_WRITE): what a root
// process needs to install and own files in its own filesystem (CHOWN, DAC_OVERRIDE, FOWNER),
// to signal its own processes of other uids (KILL) and to drop to another uid (SETUID,
// SETGID). Why each other default is dropped: docs/security.md.
inline constexpr const char* kCapabilities[] = {"CHOWN", "FOWNER", "DAC_OVERRIDE",
                                                "KILL",  "SETGID", "SETUID"};
// The same set as the kernel's bit mask (CapEff of a root process in the sandbox):
// CHOWN 0, DAC_OVERRIDE 1, FOWNER 3, KILL 5, SETGID 6, SETUID 7.
inline constexpr uint64_t kCapabilityMask = (1u << 0) | (1u << 1) | (1u << 3) | (1u << 5) |
                                            (1u << 6) | (1u << 7);

// The create body's HostConfig for a sandbox with these compute arguments.
nlohmann::json SandboxHostConfig(int64_t cpu_millis, int64_t memory_bytes);

}  // namespace sn::native::profile

#endif  // SANDBOX_NODE_PRIVHELPER_NATIVE_SANDBOX_PROFILE_H_
