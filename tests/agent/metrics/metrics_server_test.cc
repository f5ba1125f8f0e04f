// The `GET /metrics` listener against a real socket: what it answers, and its bounds (four
// connections at once, 8 KiB of request), and the unix socket's stale-file rules and mode.
#include "agent/metrics/metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace sn::agent {
namespace {

// Under /tmp: a unix socket's path must fit 107 bytes, which TEST_TMPDIR may not.
std::string TempDir() {
  std::string t = "/tmp/sn-ms-XXXXXX";
  return mkdtemp(t.data());
}

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    thread_ = std::thread([this] { io_.run(); });
  }
  // The servers go once the loop stopped (MetricsServer's contract), then their files.
  void TearDown() override {
    work_.reset();
    io_.stop();
    thread_.join();
    server_.reset();
    for (const std::string& f : cleanup_) unlink(f.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  void Start(const MetricsListen& where) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> s =
        MetricsServer::Start(io_, where, [] { return std::string("# a metric\nm 1\n"); });
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  int Port() const {
    const std::string a = server_->address();
    return std::atoi(a.substr(a.rfind(':') + 1).c_str());
  }
  int Dial() const {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(Port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  }
  // Sends `request` and reads to the end (the server closes after one answer).
  static std::string Exchange(int fd, const std::string& request) {
    if (!request.empty()) (void)!write(fd, request.data(), request.size());
    std::string got;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
    close(fd);
    return got;
  }

  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_ =
      std::make_unique<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>(
          io_.get_executor());
  std::thread thread_;
  std::unique_ptr<MetricsServer> server_;
  std::vector<std::string> cleanup_;
  std::string dir_;
};

TEST_F(MetricsServerTest, ServesTheExpositionAtMetricsOnly) {
  Start({"", "127.0.0.1", 0});
  EXPECT_EQ(server_->address().rfind("127.0.0.1:", 0), 0u);
  const std::string ok = Exchange(Dial(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
            std::string::npos);
  EXPECT_NE(ok.find("\r\n\r\n# a metric\nm 1\n"), std::string::npos) << ok;
  EXPECT_EQ(Exchange(Dial(), "GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(Exchange(Dial(), "GET /metrics/../x HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(Exchange(Dial(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
                .rfind("HTTP/1.1 405", 0),
            0u);
}

TEST_F(MetricsServerTest, AFifthConnectionIsClosedAndAnOversizedRequestGetsNothing) {
  Start({"", "127.0.0.1", 0});
  // Four idle connections hold the four places (the acceptor takes connections in order, so
  // all four are sessions before the fifth is accepted); the fifth is closed at accept.
  std::vector<int> idle;
  for (int i = 0; i < kMaxMetricsConnections; ++i) idle.push_back(Dial());
  EXPECT_EQ(Exchange(Dial(), "GET /metrics HTTP/1.1\r\n\r\n"), "");
  for (int fd : idle) close(fd);
  // Once they are gone the listener serves again (each closed session frees its place).
  std::string again;
  for (int attempt = 0; attempt < 1000 && again.rfind("HTTP/1.1 200", 0) != 0; ++attempt) {
    again = Exchange(Dial(), "GET /metrics HTTP/1.1\r\n\r\n");
  }
  EXPECT_EQ(again.rfind("HTTP/1.1 200", 0), 0u) << again;
  const std::string big =
      "GET /metrics HTTP/1.1\r\nX-Filler: " + std::string(kMaxMetricsRequestBytes, 'a') +
      "\r\n\r\n";
  EXPECT_EQ(Exchange(Dial(), big).find("200 OK"), std::string::npos);
}

// A scraper that connects and sends nothing holds its place only until the read deadline (5 s
// in the agent; 300 ms here, given to Start), then is closed without an answer.
TEST_F(MetricsServerTest, AConnectionThatSendsNothingIsClosedAtTheReadDeadline) {
  absl::StatusOr<std::unique_ptr<MetricsServer>> s = MetricsServer::Start(
      io_, {"", "127.0.0.1", 0}, {{"/metrics", kExpositionContentType, [] { return "m 1\n"; }}},
      0660, std::chrono::milliseconds(300));
  ASSERT_TRUE(s.ok()) << s.status();
  server_ = *std::move(s);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Exchange(Dial(), ""), "");  // reads until the server closes
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(250));
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST_F(MetricsServerTest, AUnixSocketReplacesAStaleOneRefusesALiveOneOrAFileAndIs0660) {
  const std::string dir = TempDir();
  const std::string path = dir + "/metrics.sock";
  // A stale socket: bound by a process that is gone (no listener behind it).
  {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    ASSERT_LT(path.size(), sizeof a.sun_path);
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    close(fd);
  }
  Start({path, "", 0});
  struct stat st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  // A second listener at the same path would take it from a live one: refused.
  absl::StatusOr<std::unique_ptr<MetricsServer>> second =
      MetricsServer::Start(io_, {path, "", 0}, [] { return std::string(); });
  EXPECT_FALSE(second.ok());
  EXPECT_NE(std::string(second.status().message()).find("another process serves"),
            std::string::npos);
  // Any other file is never replaced.
  const std::string file = dir + "/not-a-socket";
  close(open(file.c_str(), O_CREAT | O_WRONLY, 0600));
  absl::StatusOr<std::unique_ptr<MetricsServer>> over =
      MetricsServer::Start(io_, {file, "", 0}, [] { return std::string(); });
  EXPECT_FALSE(over.ok());
  EXPECT_EQ(lstat(file.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  cleanup_ = {path, file};
  dir_ = dir;
}

}  // namespace
}  // namespace sn::agent
