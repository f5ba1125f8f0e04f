#include "tools/install/fetch_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "agent/cli/enroll.h"
#include "agent/state/specification.h"
#include "common/atomic_file.h"
#include "common/release/verify.h"
#include "common/status_macros.h"
#include "tools/install/fetch.h"
#include "tools/install/fetch_sandbox.h"

namespace sn::install {
namespace {

using fetchwire::Kind;

constexpr int kChannelFd = 3;

// The channel at fd 3, stdin and stdout on /dev/null, stderr kept (a crash's last words);
// every other descriptor of root's — the installer's lock, its records — is closed.
absl::Status ArrangeDescriptors(int channel) {
  constexpr int kHigh = 10;
  int lifted = fcntl(channel, F_DUPFD_CLOEXEC, kHigh);
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (lifted < 0 || devnull < 0) return ErrnoStatus(errno, "the child's descriptors");
  int high_devnull = fcntl(devnull, F_DUPFD_CLOEXEC, kHigh);
  if (high_devnull < 0) return ErrnoStatus(errno, "the child's descriptors");
  if (dup2(high_devnull, 0) < 0 || dup2(high_devnull, 1) < 0 || dup2(lifted, kChannelFd) < 0) {
    return ErrnoStatus(errno, "the child's descriptors");
  }
  if (syscall(SYS_close_range, kChannelFd + 1, ~0U, 0) != 0) {
    return ErrnoStatus(errno, "close_range");
  }
  return absl::OkStatus();
}

// --ca-bundle's contents in an anonymous file the child can name (the operator's file may be
// readable by root alone). Made after the uid change: the memfd is the agent user's.
absl::StatusOr<std::string> CaBundleInMemory(const std::string& pem) {
  int fd = memfd_create("sandbox-node-install-ca", MFD_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "memfd_create");
  std::string_view rest = pem;
  while (!rest.empty()) {
    ssize_t n = write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "write the CA bundle");
    rest.remove_prefix(static_cast<size_t>(n));
  }
  return absl::StrCat("/proc/self/fd/", fd);
}

class Server {
 public:
  Server(const FetcherOptions& o, std::optional<std::string> ca_path)
      : o_(o), ca_path_(std::move(ca_path)), console_(o.origin, ca_path_, &*o.key) {}

  // The result payload of one request (kData frames are written as the bytes arrive).
  std::string Handle(const fetchwire::Frame& f) {
    switch (f.kind) {
      case Kind::kCurrent: {
        absl::StatusOr<std::string> source = console_.Current();
        if (!source.ok()) return fetchwire::EncodeStatusResult(source.status());
        return fetchwire::EncodeCurrentResult(*source);
      }
      case Kind::kMetadata: return Metadata(f.payload);
      case Kind::kEnroll: {
        absl::StatusOr<wire::EnrollRequest> req = fetchwire::DecodeEnrollRequest(f.payload);
        if (!req.ok()) return fetchwire::EncodeStatusResult(req.status());
        absl::StatusOr<wire::EnrollResponse> resp =
            agent::CallEnrollRoute(o_.origin, ca_path_, *req);
        if (!resp.ok()) return fetchwire::EncodeStatusResult(resp.status());
        return fetchwire::EncodeEnrollResult(*resp);
      }
      case Kind::kConfiguration: return Configuration(f.payload);
      case Kind::kArtifact: return Artifact(f.payload);
      default:
        return fetchwire::EncodeStatusResult(absl::InvalidArgumentError("not a request"));
    }
  }

 private:
  std::string Metadata(std::string_view payload) {
    fetchwire::FieldReader r(payload);
    std::string source;
    r.Str("source", wire::kMaxReleaseSourceBytes, &source);
    if (absl::Status s = r.Finish(); !s.ok()) return fetchwire::EncodeStatusResult(s);
    absl::StatusOr<fetchwire::MetadataFiles> files = console_.Files(source);
    if (!files.ok()) return fetchwire::EncodeStatusResult(files.status());
    // Verified here first, so that a bad release is refused with the child's full diagnostic;
    // root verifies the same bytes again before it believes them.
    absl::StatusOr<release::VerifiedRelease> v =
        release::VerifyRelease(source, files->manifest, files->signature, files->sums, *o_.key);
    if (!v.ok()) return fetchwire::EncodeStatusResult(v.status());
    return fetchwire::EncodeMetadataResult(*files);
  }

  std::string Configuration(std::string_view payload) {
    absl::StatusOr<fetchwire::ConfigurationRequest> req =
        fetchwire::DecodeConfigurationRequest(payload);
    if (!req.ok()) return fetchwire::EncodeStatusResult(req.status());
    absl::StatusOr<std::string> bytes =
        FetchConfiguration(o_.origin, ca_path_, req->credential, req->generation);
    if (!bytes.ok()) return fetchwire::EncodeStatusResult(bytes.status());
    absl::StatusOr<agent::VerifiedSpecification> spec = agent::VerifySpecificationBytes(
        *std::move(bytes), req->generation, req->specification_digest, req->provider);
    if (!spec.ok()) {
      return fetchwire::EncodeStatusResult(
          absl::FailedPreconditionError(spec.status().message()));
    }
    return fetchwire::EncodeConfigurationResult(spec->document);
  }

  std::string Artifact(std::string_view payload) {
    absl::StatusOr<fetchwire::ArtifactRequest> req = fetchwire::DecodeArtifactRequest(payload);
    if (!req.ok()) return fetchwire::EncodeStatusResult(req.status());
    absl::Status s =
        console_.Stream(req->source, req->artifact, [](std::string_view bytes) -> absl::Status {
          while (!bytes.empty()) {
            const std::string_view piece = bytes.substr(0, fetchwire::kMaxDataPieceBytes);
            RETURN_IF_ERROR(fetchwire::WriteFrame(kChannelFd, Kind::kData, piece));
            bytes.remove_prefix(piece.size());
          }
          return absl::OkStatus();
        });
    return fetchwire::EncodeStatusResult(s);
  }

  const FetcherOptions& o_;
  std::optional<std::string> ca_path_;
  ConsoleReleases console_;
};

}  // namespace

void RunFetchChild(int channel, pid_t parent, const FetcherOptions& o) {
  // Dies with root; and if root is already gone, there is no one to answer.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent) _exit(1);
  rlimit no_core{0, 0};  // a core file would hold the token and the credential
  absl::Status s = ArrangeDescriptors(channel);
  if (s.ok() && setrlimit(RLIMIT_CORE, &no_core) != 0) s = ErrnoStatus(errno, "RLIMIT_CORE");
  if (s.ok()) s = ConfineToUser(o.uid, o.gid);
  std::optional<std::string> ca_path;
  if (s.ok() && o.ca_pem.has_value()) {
    absl::StatusOr<std::string> path = CaBundleInMemory(*o.ca_pem);
    if (path.ok()) ca_path = *path;
    s = path.status();
  }
  if (s.ok()) s = InstallFetchFilter();
  if (s.ok() && o.child_test_hook) o.child_test_hook(kChannelFd, Kind::kReady);
  if (!fetchwire::WriteFrame(kChannelFd, Kind::kReady, fetchwire::EncodeStatusResult(s)).ok() ||
      !s.ok()) {
    _exit(1);
  }
  Server server(o, ca_path);
  for (;;) {
    absl::StatusOr<fetchwire::Frame> f =
        fetchwire::ReadFrame(kChannelFd, fetchwire::kMaxRequestBytes, absl::InfiniteFuture());
    if (!f.ok()) _exit(absl::IsOutOfRange(f.status()) ? 0 : 1);  // root closed: done
    if (o.child_test_hook && o.child_test_hook(kChannelFd, f->kind)) continue;
    const std::string result = server.Handle(*f);
    if (!fetchwire::WriteFrame(kChannelFd, Kind::kResult, result).ok()) _exit(1);
  }
}

}  // namespace sn::install
