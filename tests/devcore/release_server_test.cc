// The release routes over the real Beast server: a 64 MiB artifact is streamed (devcore's
// memory does not grow with it), a download resumed with a Range request yields the same
// bytes, and the connection stays usable after a file response.
#include <sys/resource.h>

#include <memory>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/asio_timer_queue.h"
#include "common/atomic_file.h"
#include "common/clock.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/devcore/fixture.h"
#include "tests/release/fixture.h"
#include "tools/devcore/devcore.h"
#include "tools/devcore/server.h"
#include "tools/release/publisher.h"

namespace sn::devcore::testing {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

constexpr uint64_t kImageBytes = uint64_t{64} << 20;

// Byte i of the test image: not constant, so a misplaced range shows in the digest.
char ImageByte(uint64_t i) { return static_cast<char>((i * 131) ^ (i >> 11)); }

long MaxRssKiB() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

class ReleaseServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string root = MakeTempDir();
    releases_ = root + "/releases";
    // Written 1 MiB at a time: the test itself must not hold the image either.
    const std::string image = root + "/image.tar";
    FILE* f = std::fopen(image.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::string chunk(1 << 20, '\0');
    Sha256Stream hash;
    for (uint64_t off = 0; off < kImageBytes; off += chunk.size()) {
      for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = ImageByte(off + i);
      ASSERT_EQ(std::fwrite(chunk.data(), 1, chunk.size(), f), chunk.size());
      hash.Update(chunk);
    }
    ASSERT_EQ(std::fclose(f), 0);
    digest_ = hash.FinishHex();
    release_tool::PublishRequest r;
    r.releases_dir = releases_;
    r.source = "big";
    r.make_current = true;
    r.artifacts = {{"image", image}};
    ASSERT_TRUE(release_tool::Publish(r, key_, clock_).ok());

    const std::string state = MakeTempDir();
    auto store = NodeStore::Open(state);
    auto generations = GenerationStore::Open(state);
    ASSERT_TRUE(store.ok() && generations.ok());
    devcore_ = std::make_unique<Devcore>(*std::move(store), *std::move(generations), releases_,
                                         SystemClock::Get(), &timers_);
    auto server = Server::Start(ioc_, devcore_.get(), ServerOptions{"127.0.0.1:0", "", ""});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    thread_ = std::thread([this] { ioc_.run(); });
  }

  void TearDown() override {
    if (!thread_.joinable()) return;
    boost::asio::post(ioc_, [this] { server_->Stop(); });
    thread_.join();
  }

  struct Download {
    unsigned status = 0;
    std::string content_range;
    uint64_t bytes = 0;
  };

  // GETs `target` on `stream`, feeding the body into `hash` 64 KiB at a time.
  Download Get(beast::tcp_stream& stream, const std::string& target, const std::string& range,
               Sha256Stream* hash) {
    http::request<http::empty_body> req(http::verb::get, target, 11);
    req.set(http::field::host, "127.0.0.1");
    if (!range.empty()) req.set(http::field::range, range);
    http::write(stream, req);
    beast::flat_buffer buf;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(kImageBytes + 1);
    http::read_header(stream, buf, parser);
    Download d;
    d.status = parser.get().result_int();
    d.content_range = std::string(parser.get()[http::field::content_range]);
    std::vector<char> piece(64 * 1024);
    while (!parser.is_done()) {
      parser.get().body().data = piece.data();
      parser.get().body().size = piece.size();
      beast::error_code ec;
      http::read(stream, buf, parser, ec);
      if (ec && ec != http::error::need_buffer) {
        ADD_FAILURE() << ec.message();
        break;
      }
      const size_t n = piece.size() - parser.get().body().size;
      hash->Update(std::string_view(piece.data(), n));
      d.bytes += n;
    }
    return d;
  }

  release::PrivateKey key_ = release::testing::NewKey();
  SimulatedClock clock_;
  std::string releases_;
  std::string digest_;
  boost::asio::io_context ioc_{1};
  AsioTimerQueue timers_{ioc_};
  std::unique_ptr<Devcore> devcore_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  boost::asio::io_context client_ioc_;
};

TEST_F(ReleaseServerTest, A64MiBArtifactStreamsAndAResumedDownloadYieldsTheSameBytes) {
  beast::tcp_stream stream(client_ioc_);
  stream.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), server_->port()));
  const long rss_before = MaxRssKiB();

  // An interrupted download: the first 10 MiB and 3 bytes, then the rest with a Range request.
  const uint64_t cut = (uint64_t{10} << 20) + 3;
  Sha256Stream resumed;
  Download first = Get(stream, "/releases/big/image.tar", "bytes=0-" + std::to_string(cut - 1),
                       &resumed);
  EXPECT_EQ(first.status, 206u);
  EXPECT_EQ(first.bytes, cut);
  EXPECT_EQ(first.content_range, "bytes 0-" + std::to_string(cut - 1) + "/" +
                                     std::to_string(kImageBytes));
  // Same connection (keep-alive after a file response).
  Download rest = Get(stream, "/releases/big/image.tar", "bytes=" + std::to_string(cut) + "-",
                      &resumed);
  EXPECT_EQ(rest.status, 206u);
  EXPECT_EQ(rest.bytes, kImageBytes - cut);
  EXPECT_EQ(resumed.FinishHex(), digest_);

  Sha256Stream whole;
  Download all = Get(stream, "/releases/big/image.tar", "", &whole);
  EXPECT_EQ(all.status, 200u);
  EXPECT_EQ(all.bytes, kImageBytes);
  EXPECT_EQ(whole.FinishHex(), digest_);

  // Three transfers of 64 MiB through devcore (same process) raised the peak by far less than
  // one copy of the file.
  EXPECT_LT(MaxRssKiB() - rss_before, 16 * 1024) << "peak RSS grew by KiB";

  Sha256Stream ignored;
  EXPECT_EQ(Get(stream, "/releases/big/absent.tar", "", &ignored).status, 404u);
}

}  // namespace
}  // namespace sn::devcore::testing
