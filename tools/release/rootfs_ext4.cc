#include "tools/release/rootfs_ext4.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace sn::release_tool::rootfs {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kInodeBytes = 256;
constexpr uint64_t kBlocksPerMiB = kMiB / 4096;
constexpr size_t kMessageTail = 2048;

// mke2fs's whole configuration: the host's /etc/mke2fs.conf is never read.
constexpr char kMke2fsConf[] =
    "[defaults]\n"
    "\tbase_features = sparse_super,large_file,filetype,dir_index,ext_attr\n"
    "\tdefault_mntopts = acl,user_xattr\n"
    "\tenable_periodic_fsck = 0\n"
    "\tblocksize = 4096\n"
    "\tinode_size = 256\n"
    "\tinode_ratio = 16384\n"
    "\treserved_ratio = 0\n"
    "\thash_alg = half_md4\n"
    "\tflex_bg_size = 16\n"
    "\tlazy_itable_init = false\n"
    "\tdiscard = false\n"
    "[fs_types]\n"
    "\text4 = {\n"
    "\t\tfeatures = extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize\n"
    "\t}\n"
    "\trootfs = {\n"
    "\t\tinode_size = 256\n"
    "\t}\n";

struct Child {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string out;  // stdout and stderr go to these files
  std::string err;
};

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (std::string& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

absl::StatusOr<int> WaitChild(pid_t pid, const std::function<bool()>& interrupted) {
  bool killed = false;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (killed) return absl::AbortedError("interrupted");
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (r < 0 && errno != EINTR) return ErrnoStatus(errno, "waitpid");
    if (!killed && interrupted()) {
      kill(pid, SIGKILL);
      killed = true;
    }
    const struct timespec pause = {0, 10 * 1000 * 1000};
    nanosleep(&pause, nullptr);
  }
}

// fork + execve of c.argv[0] (an absolute path) with exactly c.env; no shell.
absl::StatusOr<int> Run(Child c, const std::function<bool()>& interrupted) {
  const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int out = open(c.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int err = open(c.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int open_errno = errno;
  UniqueFd in_fd(in), out_fd(out), err_fd(err);
  if (in < 0 || out < 0 || err < 0) return ErrnoStatus(open_errno, "open a child's output");
  std::vector<char*> argv = Pointers(c.argv);
  std::vector<char*> envp = Pointers(c.env);
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return ErrnoStatus(errno, "fork");
  if (pid == 0) {
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return WaitChild(pid, interrupted);
}

// The last bytes of a child's output file, for a message.
std::string Tail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (all.size() > kMessageTail) all = "..." + all.substr(all.size() - kMessageTail);
  while (!all.empty() && (all.back() == '\n' || all.back() == ' ')) all.pop_back();
  return all;
}

std::vector<std::string> Environment(const Ext4Request& r) {
  return {"LC_ALL=C", absl::StrCat("E2FSPROGS_FAKE_TIME=", r.epoch),
          absl::StrCat("MKE2FS_CONFIG=", r.work_dir, "/mke2fs.conf")};
}

// Runs `argv` (e2fsprogs); an exit status other than 0, or (debugfs, which exits 0 after a
// failed command) any stderr line but its version banner, is an error.
absl::Status RunTool(const Ext4Request& r, std::vector<std::string> argv, const std::string& tag,
                     const std::function<bool()>& interrupted) {
  Child c{std::move(argv), Environment(r), absl::StrCat(r.work_dir, "/", tag, ".out"),
          absl::StrCat(r.work_dir, "/", tag, ".err")};
  const std::string tool = c.argv[0];
  ASSIGN_OR_RETURN(int status, Run(c, interrupted));
  if (status == 127) return absl::FailedPreconditionError("cannot execute " + tool);
  std::string complaint;
  std::ifstream err(c.err);
  for (std::string line; std::getline(err, line);) {
    if (!line.empty() && line.rfind("debugfs ", 0) != 0) complaint = line;
  }
  if (status != 0 || (tool == kDebugfs && !complaint.empty())) {
    return absl::FailedPreconditionError(
        absl::StrCat(tool, " failed (exit status ", status, "): ", Tail(c.err)));
  }
  return absl::OkStatus();
}

absl::Status Mke2fs(const Ext4Request& r, const std::function<bool()>& interrupted) {
  RETURN_IF_ERROR(WriteFileAtomically(r.work_dir + "/mke2fs.conf", kMke2fsConf, 0600));
  std::vector<std::string> argv = {
      kMke2fs, "-q", "-F", "-t", "ext4", "-T", "rootfs", "-o", "Linux", "-b", "4096",
      "-I", "256", "-N", absl::StrCat(r.inodes), "-m", "0", "-U", kImageUuid, "-E",
      absl::StrCat("hash_seed=", kImageHashSeed, ",root_owner=0:0,lazy_itable_init=0,nodiscard"),
      "-d", r.source_dir, r.image, absl::StrCat(r.size_mib * kBlocksPerMiB)};
  return RunTool(r, std::move(argv), "mke2fs", interrupted);
}

// The value of the "NAME: value" line of debugfs's `stats -h`.
std::optional<uint64_t> StatsField(const std::string& path, std::string_view name) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    absl::string_view v(line);
    if (!absl::ConsumePrefix(&v, absl::string_view(name.data(), name.size()))) continue;
    if (!absl::ConsumePrefix(&v, ":")) continue;
    uint64_t n = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(v), &n)) return n;
  }
  return std::nullopt;
}

// The inodes in use that hold files: the root and those from the first non-reserved one on.
absl::StatusOr<std::vector<uint64_t>> InodesInUse(const Ext4Request& r,
                                                  const std::function<bool()>& interrupted) {
  RETURN_IF_ERROR(RunTool(r, {kDebugfs, "-R", "stats -h", r.image}, "stats", interrupted));
  const std::optional<uint64_t> count = StatsField(r.work_dir + "/stats.out", "Inode count");
  const std::optional<uint64_t> first = StatsField(r.work_dir + "/stats.out", "First inode");
  if (!count || !first || *first < 3 || *first > *count) {
    return absl::InternalError("debugfs stats: no inode count");
  }
  std::string script = "testi <2>\n";
  for (uint64_t i = *first; i <= *count; ++i) absl::StrAppend(&script, "testi <", i, ">\n");
  const std::string script_path = r.work_dir + "/testi.cmd";
  RETURN_IF_ERROR(WriteFileAtomically(script_path, script, 0600));
  RETURN_IF_ERROR(RunTool(r, {kDebugfs, "-f", script_path, r.image}, "testi", interrupted));
  std::vector<uint64_t> used;
  std::ifstream in(r.work_dir + "/testi.out");
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    uint64_t ino = 0;
    if (words.size() == 6 && words[0] == "Inode" && words[2] == "is" && words[3] == "marked" &&
        words[4] == "in" && words[5] == "use" && absl::SimpleAtoi(words[1], &ino)) {
      used.push_back(ino);
    }
  }
  return used;
}

absl::Status FixTimes(const Ext4Request& r, const std::function<bool()>& interrupted) {
  ASSIGN_OR_RETURN(std::vector<uint64_t> used, InodesInUse(r, interrupted));
  if (used.empty() || used.front() != 2) return absl::InternalError("debugfs: no root inode");
  std::string script;
  for (uint64_t ino : used) {
    for (const char* field : {"atime", "mtime", "ctime", "crtime"}) {
      absl::StrAppend(&script, "sif <", ino, "> ", field, " @", r.epoch, "\n");
    }
  }
  const std::string script_path = r.work_dir + "/times.cmd";
  RETURN_IF_ERROR(WriteFileAtomically(script_path, script, 0600));
  return RunTool(r, {kDebugfs, "-w", "-f", script_path, r.image}, "times", interrupted);
}

}  // namespace

uint64_t InodesFor(const TreeSize& tree) {
  const uint64_t base = tree.inodes + 12;  // reserved inodes 1-10, lost+found, one spare
  return base + base / 16;
}

uint64_t SizeMibFor(const TreeSize& tree, uint64_t inodes) {
  const uint64_t bytes =
      tree.data_bytes + tree.data_bytes / 16 + inodes * kInodeBytes + 8 * kMiB;
  return (bytes + kMiB - 1) / kMiB;
}

absl::Status MakeExt4Image(const Ext4Request& r, const std::function<bool()>& interrupted) {
  if (r.epoch < 1) return absl::InternalError("the epoch must be at least 1");
  RETURN_IF_ERROR(Mke2fs(r, interrupted));
  return FixTimes(r, interrupted);
}

}  // namespace sn::release_tool::rootfs
