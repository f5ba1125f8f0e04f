#include "tests/privhelper/native/docker_e2e_fixture.h"

namespace sn::privhelper::e2e {

std::string Runfile(const std::string& rel) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  return (srcdir && ws) ? std::string(srcdir) + "/" + ws + "/" + rel : rel;
}

// A random v4 uuid (tests run in PID namespaces, so pids do not tell parallel runs apart).
std::string Uuid(int) {
  unsigned char b[16];
  std::ifstream("/dev/urandom", std::ios::binary).read(reinterpret_cast<char*>(b), sizeof b);
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  char out[37];
  snprintf(out, sizeof out,
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return out;
}

// Peak resident memory of a process (VmHWM, bytes), 0 when unreadable.
int64_t PeakResidentBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return out;
}

bool DockerAnswers(std::string* why) {
  docker::BeastDockerEngine engine(kDockerSocket);
  absl::StatusOr<docker::HttpResponse> ping = engine.Request("GET", "/_ping", "", {});
  if (ping.ok() && ping->status == 200) return true;
  *why = ping.ok() ? "status " + std::to_string(ping->status) : std::string(ping.status().message());
  return false;
}

// Imports a busybox-static image (no registry) once.
bool ImportImage() {
  sn::testing::ShortTempDir dir;
  std::string root = dir.File("rootfs");
  std::string cmd = absl::StrCat(
      "set -e; mkdir -p ", root, "/bin ", root, "/tmp; chmod 1777 ", root, "/tmp; cp /bin/busybox ",
      root, "/bin/; for a in sh sleep cat echo ls head true false; do ln -s busybox ", root,
      "/bin/$a; done; tar -C ", root, " -cf - . | docker import - ", kImage, " >/dev/null");
  return system(cmd.c_str()) == 0;
}

}  // namespace sn::privhelper::e2e
