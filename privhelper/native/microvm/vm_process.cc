#include "privhelper/native/microvm/vm_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/absl_view.h"
#include "common/atomic_file.h"
#include "common/json/record.h"
#include "nlohmann/json.hpp"

namespace sn::microvm {

std::string EncodeSupervisorRecord(const SupervisorRecord& r) {
  nlohmann::json doc = {{"schema", 1},
                        {"supervisor_pid", r.supervisor_pid},
                        {"supervisor_start", r.supervisor_start},
                        {"qemu_pid", r.qemu_pid},
                        {"qemu_start", r.qemu_start}};
  return doc.dump() + "\n";
}

absl::StatusOr<SupervisorRecord> DecodeSupervisorRecord(std::string_view text) {
  absl::StatusOr<json::RecordObject> d = json::RecordObject::Parse(text, "supervisor record", 4096);
  if (!d.ok()) return json::Recoded(d.status(), absl::StatusCode::kDataLoss);
  SupervisorRecord r;
  absl::Status s = d->Schema(1);
  auto pid = [&](std::string_view name, pid_t* out) {
    if (!s.ok()) return;
    absl::StatusOr<int64_t> v = d->Int(name);
    if (!v.ok()) {
      s = v.status();
    } else if (*v <= 0 || *v > (int64_t{1} << 22)) {
      s = d->MemberMalformed(name, "not a pid");
    } else {
      *out = static_cast<pid_t>(*v);
    }
  };
  auto start = [&](std::string_view name, uint64_t* out) {
    if (!s.ok()) return;
    absl::StatusOr<uint64_t> v = d->Uint(name);
    if (!v.ok()) s = v.status();
    else *out = *v;
  };
  pid("supervisor_pid", &r.supervisor_pid);
  start("supervisor_start", &r.supervisor_start);
  pid("qemu_pid", &r.qemu_pid);
  start("qemu_start", &r.qemu_start);
  if (s.ok()) s = d->Finish();
  if (!s.ok()) return json::Recoded(s, absl::StatusCode::kDataLoss);
  return r;
}

absl::StatusOr<uint64_t> ProcessStartTime(pid_t pid) {
  // (/proc files report size 0: read until EOF, not by the size.)
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return absl::NotFoundError(path);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(path, ": ", std::strerror(errno)));
  char buf[4096];
  ssize_t n = 0;
  do {
    n = read(fd, buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  close(fd);
  if (n < 0 && err == ESRCH) return absl::NotFoundError(path);
  if (n <= 0) return absl::UnavailableError(absl::StrCat(path, ": unreadable"));
  const std::string stat(buf, static_cast<size_t>(n));
  // The command name (field 2) is in parentheses and may hold anything: fields after the
  // last ')' are numbers. starttime is field 22, the 20th after it.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return absl::UnavailableError("unreadable /proc stat");
  std::vector<absl::string_view> fields =
      absl::StrSplit(AV(std::string_view(stat).substr(paren + 2)), ' ');
  uint64_t start = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &start)) {
    return absl::UnavailableError("unreadable /proc stat");
  }
  return start;
}

LiveVm::~LiveVm() {
  if (pidfd_ >= 0) close(pidfd_);
}

absl::StatusOr<std::optional<LiveVm>> FindLiveVm(const std::string& vm_dir,
                                                 std::string* why_not) {
  auto none = [why_not](const char* why) {
    if (why_not != nullptr) *why_not = why;
    return std::optional<LiveVm>();
  };
  absl::StatusOr<std::string> text =
      ReadSmallFile(absl::StrCat(vm_dir, "/", kSupervisorRecord), 4096);
  if (absl::IsNotFound(text.status())) return none("no supervisor record");
  if (!text.ok()) return absl::UnavailableError(text.status().message());
  absl::StatusOr<SupervisorRecord> r = DecodeSupervisorRecord(*text);
  if (!r.ok()) return absl::UnavailableError(r.status().message());
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, r->supervisor_pid, 0));
  if (pidfd < 0 && errno == ESRCH) return none("its supervisor's pid is gone");
  if (pidfd < 0) return ErrnoStatus(errno, "pidfd_open");
  LiveVm vm(pidfd, *r);
  // The pidfd refers to whatever process had the pid when it was opened. Its start time read
  // now, while the pidfd still reports it running (checked after the read), tells whether it
  // is the recorded supervisor or a later process that was given the same pid.
  absl::StatusOr<uint64_t> start = ProcessStartTime(r->supervisor_pid);
  if (absl::IsNotFound(start.status())) return none("its supervisor's /proc entry is gone");
  if (!start.ok()) return start.status();
  pollfd p{pidfd, POLLIN, 0};
  int polled = 0;
  do {
    polled = poll(&p, 1, 0);
  } while (polled < 0 && errno == EINTR);
  if (polled < 0) return ErrnoStatus(errno, "poll of the supervisor's pidfd");
  if (polled != 0) return none("its supervisor has exited");
  if (*start != r->supervisor_start) return none("its supervisor's pid is another process's");
  return std::optional<LiveVm>(std::move(vm));
}

}  // namespace sn::microvm
