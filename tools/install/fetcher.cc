#include "tools/install/fetcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"
#include "common/release/artifact.h"
#include "common/status_macros.h"
#include "privhelper/helpers/spawn.h"
#include "tools/install/fetch_child.h"

namespace sn::install {
namespace {

using fetchwire::Kind;

constexpr size_t kMaxReadyBytes = 4096;
// How long a child that closed its end (or that root is done with) gets to exit by itself
// before it is killed; poll on a pidfd, so no polling loop.
constexpr int kExitGraceMs = 5000;

// A /proc file (its size is 0 to stat, so ReadSmallFile does not fit), at most 64 KiB.
absl::StatusOr<std::string> ReadProcFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open " + path);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || out.size() > 64 * 1024) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

// The "Threads:" count of /proc/self/status; -1 when it cannot be read.
int ThreadCount() {
  absl::StatusOr<std::string> status = ReadProcFile("/proc/self/status");
  if (!status.ok()) return -1;
  for (absl::string_view line : absl::StrSplit(absl::string_view(*status), '\n')) {
    if (absl::ConsumePrefix(&line, "Threads:")) {
      int n = -1;
      return absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &n) ? n : -1;
    }
  }
  return -1;
}

// Waits for `pid` to exit for up to `grace_ms` (0: not at all), then kills it; reaps it either
// way. Its wait status.
int Reap(pid_t pid, int grace_ms) {
  if (grace_ms > 0) {
    int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      while (poll(&p, 1, grace_ms) < 0 && errno == EINTR) {
      }
      close(pidfd);
    }
  }
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) == pid) return status;
  kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return absl::StrCat("was killed by signal ", sig, " (", strsignal(sig), ")",
                        sig == SIGSYS ? ": a system call its seccomp filter forbids" : "");
  }
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  return "ended";
}

// The four ids of a "Uid:" or "Gid:" line all equal to `want`.
bool AllIds(absl::string_view value, unsigned want) {
  int seen = 0;
  for (absl::string_view f : absl::StrSplit(value, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    unsigned id = 0;
    if (!absl::SimpleAtoi(f, &id) || id != want) return false;
    ++seen;
  }
  return seen == 4;
}

}  // namespace

absl::Status CheckChildConfined(pid_t pid, uid_t uid, gid_t gid) {
  ASSIGN_OR_RETURN(std::string text, ReadProcFile(absl::StrCat("/proc/", pid, "/status")));
  // The native helpers' check: NoNewPrivs 1, Seccomp 2, every capability set zero.
  RETURN_IF_ERROR(privhelper::CheckSandboxedStatus(text, 1));
  bool uids = false, gids = false, groups = false;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text), '\n')) {
    if (absl::ConsumePrefix(&line, "Uid:")) uids = AllIds(line, uid);
    if (absl::ConsumePrefix(&line, "Gid:")) gids = AllIds(line, gid);
    if (absl::ConsumePrefix(&line, "Groups:")) groups = absl::StripAsciiWhitespace(line).empty();
  }
  if (!uids || !gids || !groups) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the network child's ids are not the agent user's alone (uid ", uid, ", gid ", gid, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Fetcher>> Fetcher::Start(FetcherOptions options) {
  if (options.uid == 0) {
    return absl::FailedPreconditionError("the network child must not run as uid 0");
  }
  if (!options.key.has_value()) return absl::InvalidArgumentError("no release public key");
  if (int threads = ThreadCount(); threads != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the network child is forked from a single-threaded installer, but it has ", threads,
        " threads"));
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return ErrnoStatus(errno, "socketpair");
  }
  const pid_t parent = getpid();
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(sv[0]);
    close(sv[1]);
    return ErrnoStatus(e, "fork the network child");
  }
  if (pid == 0) {
    close(sv[0]);
    RunFetchChild(sv[1], parent, options);
  }
  close(sv[1]);
  std::unique_ptr<Fetcher> f(new Fetcher(std::move(options), pid, sv[0]));
  constexpr std::string_view kWhat = "confining itself";
  f->waited_ = f->options_.start_deadline;
  absl::StatusOr<fetchwire::Frame> ready =
      fetchwire::ReadFrame(f->channel_, kMaxReadyBytes, absl::Now() + f->waited_);
  if (!ready.ok()) return f->Fail(ready.status(), kWhat);
  if (ready->kind != Kind::kReady) {
    return f->Fail(absl::DataLossError("out of protocol: not a ready frame"), kWhat);
  }
  absl::Status confined;
  if (absl::Status p = fetchwire::DecodeStatusResult(ready->payload, &confined); !p.ok()) {
    return f->Fail(p, kWhat);
  }
  if (!confined.ok()) {
    f->Stop();
    return absl::InternalError(absl::StrCat(
        "the installer's network child could not confine itself: ", confined.message()));
  }
  // Root checks rather than trusts: the kernel's view of the child.
  if (absl::Status s = CheckChildConfined(f->pid_, f->options_.uid, f->options_.gid); !s.ok()) {
    f->Stop();
    return absl::InternalError(
        absl::StrCat("the installer's network child is not confined: ", s.message()));
  }
  return f;
}

Fetcher::~Fetcher() {
  if (channel_ >= 0) close(channel_);  // the child reads EOF and exits 0
  channel_ = -1;
  if (pid_ > 0) Reap(pid_, kExitGraceMs);
  pid_ = -1;
}

void Fetcher::Stop() {
  if (channel_ >= 0) close(channel_);
  channel_ = -1;
  if (pid_ > 0) Reap(pid_, 0);
  pid_ = -1;
}

absl::Status Fetcher::Fail(const absl::Status& why, std::string_view what_view) {
  const absl::string_view what(what_view.data(), what_view.size());  // Debian's Abseil
  const std::string who =
      absl::StrCat("the installer's network child (pid ", pid_, ", uid ", options_.uid, ")");
  absl::Status out;
  if (absl::IsDeadlineExceeded(why)) {
    Stop();
    out = absl::UnavailableError(absl::StrCat(
        who, " gave no answer in time (", absl::FormatDuration(waited_), ") while ", what,
        "; it was killed (is Core reachable? run it again)"));
  } else if (absl::IsDataLoss(why)) {
    Stop();
    out = absl::DataLossError(absl::StrCat(who, " answered ", why.message(), " while ", what,
                                           "; it was killed and nothing it sent was used"));
  } else {
    // It closed the socketpair (or it broke): it died or is dying; say how.
    if (channel_ >= 0) close(channel_);
    channel_ = -1;
    const int status = Reap(pid_, kExitGraceMs);
    pid_ = -1;
    out = absl::UnavailableError(absl::StrCat(who, " ", DescribeExit(status), " while ", what,
                                              "; nothing it sent was used"));
  }
  spent_ = absl::FailedPreconditionError(
      absl::StrCat("the installer's network child is gone (", out.message(), ")"));
  return out;
}

absl::StatusOr<std::string> Fetcher::Call(
    Kind kind, std::string_view payload, std::string_view what,
    const std::function<absl::Status(std::string_view)>& on_data) {
  if (!spent_.ok()) return spent_;
  if (absl::Status s = fetchwire::WriteFrame(channel_, kind, payload); !s.ok()) {
    return Fail(s, what);
  }
  const size_t max_frame = std::max(fetchwire::MaxResultBytes(), fetchwire::kMaxDataFrameBytes);
  waited_ = options_.reply_deadline;
  for (;;) {
    absl::StatusOr<fetchwire::Frame> f =
        fetchwire::ReadFrame(channel_, max_frame, absl::Now() + options_.reply_deadline);
    if (!f.ok()) return Fail(f.status(), what);
    if (f->kind == Kind::kResult) return std::move(f->payload);
    if (f->kind != Kind::kData || !on_data ||
        f->payload.size() > fetchwire::kMaxDataPieceBytes) {
      return Fail(absl::DataLossError(absl::StrCat("out of protocol: a frame of kind ",
                                                   static_cast<int>(f->kind))),
                  what);
    }
    if (absl::Status s = on_data(f->payload); !s.ok()) {
      // Root refused the bytes (or could not write them): the stream is abandoned midway,
      // and the child with it.
      Stop();
      spent_ = absl::FailedPreconditionError(absl::StrCat(
          "the installer's network child was stopped after ", std::string(what), " failed"));
      return s;
    }
  }
}

absl::StatusOr<std::string> Fetcher::Current() {
  constexpr std::string_view kWhat = "reading /releases/current";
  ASSIGN_OR_RETURN(std::string payload, Call(Kind::kCurrent, "", kWhat, nullptr));
  absl::StatusOr<absl::StatusOr<std::string>> r = fetchwire::DecodeCurrentResult(payload);
  if (!r.ok()) return Fail(r.status(), kWhat);
  return *std::move(r);
}

absl::StatusOr<release::VerifiedRelease> Fetcher::Metadata(const std::string& source) {
  const std::string what = absl::StrCat("reading the metadata of release ", source);
  ASSIGN_OR_RETURN(std::string payload, Call(Kind::kMetadata,
                                             fetchwire::FieldWriter().Str(source).Take(), what,
                                             nullptr));
  absl::StatusOr<absl::StatusOr<fetchwire::MetadataFiles>> r =
      fetchwire::DecodeMetadataResult(payload);
  if (!r.ok()) return Fail(r.status(), what);
  if (!r->ok()) return r->status();
  fetchwire::MetadataFiles& f = **r;
  // Root's own verification, signature first: the manifest is parsed only once it is known
  // to be the publisher's.
  return release::VerifyRelease(source, std::move(f.manifest), f.signature, f.sums,
                                *options_.key);
}

absl::StatusOr<wire::EnrollResponse> Fetcher::Enroll(const wire::EnrollRequest& request) {
  constexpr std::string_view kWhat = "enrolling";
  ASSIGN_OR_RETURN(std::string payload,
                   Call(Kind::kEnroll, fetchwire::EncodeEnrollRequest(request), kWhat, nullptr));
  absl::StatusOr<absl::StatusOr<wire::EnrollResponse>> r = fetchwire::DecodeEnrollResult(payload);
  if (!r.ok()) return Fail(r.status(), kWhat);
  return *std::move(r);
}

absl::StatusOr<wire::SpecificationDocument> Fetcher::Configuration(const std::string& credential,
                                                                   int64_t generation,
                                                                   const std::string& digest,
                                                                   const std::string& provider) {
  const std::string what = absl::StrCat("reading the configuration of generation ", generation);
  fetchwire::ConfigurationRequest req{credential, generation, digest, provider};
  ASSIGN_OR_RETURN(std::string payload,
                   Call(Kind::kConfiguration, fetchwire::EncodeConfigurationRequest(req), what,
                        nullptr));
  absl::StatusOr<absl::StatusOr<wire::SpecificationDocument>> r =
      fetchwire::DecodeConfigurationResult(payload);
  if (!r.ok()) return Fail(r.status(), what);
  if (r->ok() && ((*r)->generation != generation || (*r)->provider != provider)) {
    return Fail(absl::DataLossError("out of protocol: another generation or provider"), what);
  }
  return *std::move(r);
}

absl::Status Fetcher::Artifact(const std::string& source, const wire::RuntimeArtifact& a,
                               const std::string& path) {
  const std::string what = absl::StrCat("downloading ", a.name, " of release ", source);
  StagedFile out(path);
  RETURN_IF_ERROR(out.Open());
  release::ArtifactVerifier verifier(a);  // root's own: size and SHA-256 as the bytes arrive
  uint64_t written = 0;
  ASSIGN_OR_RETURN(
      std::string payload,
      Call(Kind::kArtifact, fetchwire::EncodeArtifactRequest({source, a}), what,
           [&](std::string_view bytes) -> absl::Status {
             RETURN_IF_ERROR(verifier.Update(bytes));
             RETURN_IF_ERROR(out.Write(bytes));
             written += bytes.size();
             if (options_.on_artifact_bytes) options_.on_artifact_bytes(a, written);
             return absl::OkStatus();
           }));
  absl::Status child;
  if (absl::Status p = fetchwire::DecodeStatusResult(payload, &child); !p.ok()) {
    return Fail(p, what);
  }
  RETURN_IF_ERROR(child);
  RETURN_IF_ERROR(verifier.Finish());
  return out.Commit();
}

}  // namespace sn::install
