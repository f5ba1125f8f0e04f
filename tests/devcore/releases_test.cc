// devcore's §6 release routes without sockets: what is served from the releases directory,
// what is 404, and single-range requests.
#include "tools/devcore/releases.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/atomic_file.h"
#include "common/release/layout.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/devcore/fixture.h"
#include "tests/release/fixture.h"
#include "tools/release/publisher.h"

namespace sn::devcore::testing {
namespace {

using json = nlohmann::json;
using Kind = RangeDecision::Kind;

// The bytes a FileBody names.
std::string BodyOf(const HttpResponse& r) {
  if (!r.file) return r.body;
  std::string out(r.file->length, '\0');
  EXPECT_EQ(pread(r.file->fd, out.data(), out.size(), static_cast<off_t>(r.file->offset)),
            static_cast<ssize_t>(out.size()));
  return out;
}

std::string Header(const HttpResponse& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "";
}

class ReleaseRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir() + "/releases";
    in_ = MakeTempDir();
    ASSERT_TRUE(WriteFileAtomically(in_ + "/image.tar", image_, 0644).ok());
    ASSERT_TRUE(WriteFileAtomically(in_ + "/helper", "helper", 0644).ok());
    release_tool::PublishRequest r;
    r.releases_dir = dir_;
    r.source = "r1";
    r.make_current = true;
    r.artifacts = {{"image", in_ + "/image.tar"}, {"helper", in_ + "/helper"}};
    ASSERT_TRUE(release_tool::Publish(r, key_, clock_).ok());
  }

  HttpResponse Get(const std::string& target, const std::string& range = "",
                   const std::string& if_range = "") {
    HttpRequest req;
    req.method = "GET";
    req.target = target;
    req.range = range;
    req.if_range = if_range;
    return routes_.Handle(req);
  }

  release::PrivateKey key_ = release::testing::NewKey();
  SimulatedClock clock_;
  std::string dir_, in_;
  std::string image_ = std::string(100000, 'i') + "end";
  ReleaseRoutes routes_{""};
};

TEST_F(ReleaseRoutesTest, CurrentAnswersItsSourceAndFilesAreServedByteExact) {
  routes_ = ReleaseRoutes(dir_);
  HttpResponse current = Get("/releases/current");
  EXPECT_EQ(current.status, 200);
  EXPECT_EQ(current.body, "{\"source\":\"r1\"}");
  for (const char* f : {"manifest.json", "manifest.json.sig", "SHA256SUMS", "image.tar", "helper"}) {
    HttpResponse r = Get(std::string("/releases/r1/") + f);
    EXPECT_EQ(r.status, 200) << f;
    ASSERT_TRUE(r.file) << f;  // streamed, not copied
    EXPECT_EQ(BodyOf(r), *ReadSmallFile(dir_ + "/r1/" + f, 1 << 20)) << f;
    EXPECT_EQ(Header(r, "Accept-Ranges"), "bytes");
  }
  EXPECT_EQ(Get("/releases/r1/manifest.json").content_type, "application/json");
  EXPECT_EQ(Get("/releases/r1/image.tar").content_type, "application/octet-stream");
  // Query strings do not change the file.
  EXPECT_EQ(Get("/releases/r1/helper?x=1").status, 200);
}

TEST_F(ReleaseRoutesTest, AnythingNotNamedByTheManifestIs404) {
  routes_ = ReleaseRoutes(dir_);
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/r1/extra", "x", 0644).ok());
  ASSERT_EQ(symlink((in_ + "/helper").c_str(), (dir_ + "/r1/link").c_str()), 0);
  for (const char* t : {"/releases/r1/extra", "/releases/r1/.publish.lock", "/releases/r2/helper",
                        "/releases/r1/../r1/helper", "/releases/../releases/r1/helper",
                        "/releases/r1/", "/releases/r1", "/releases/", "/releases",
                        "/releases/r1/helper/x", "/releases/current/helper",
                        "/releases/.publish.lock", "/releases/r1/link",
                        "/releases/r1/%68elper"}) {
    EXPECT_EQ(Get(t).status, 404) << t;
  }
  // A declared artifact whose file is a symlink is not served either.
  ASSERT_EQ(unlink((dir_ + "/r1/helper").c_str()), 0);
  ASSERT_EQ(symlink((in_ + "/helper").c_str(), (dir_ + "/r1/helper").c_str()), 0);
  EXPECT_EQ(Get("/releases/r1/helper").status, 404);
  // A symlinked release directory is not served.
  ASSERT_EQ(symlink((dir_ + "/r1").c_str(), (dir_ + "/r3").c_str()), 0);
  EXPECT_EQ(Get("/releases/r3/manifest.json").status, 404);
  HttpRequest post;
  post.method = "POST";
  post.target = "/releases/current";
  EXPECT_EQ(routes_.Handle(post).status, 405);
}

TEST_F(ReleaseRoutesTest, WithoutAReleasesDirectoryOrCurrentFileEverythingIs404) {
  EXPECT_EQ(Get("/releases/current").status, 404);
  EXPECT_EQ(Get("/releases/r1/manifest.json").status, 404);
  routes_ = ReleaseRoutes(dir_);
  ASSERT_EQ(unlink((dir_ + "/current").c_str()), 0);
  EXPECT_EQ(Get("/releases/current").status, 404);
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/current", "r1", 0644).ok());  // no newline
  EXPECT_EQ(Get("/releases/current").status, 500);
}

TEST_F(ReleaseRoutesTest, CurrentIsReadOnEveryRequest) {
  routes_ = ReleaseRoutes(dir_);
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/current", "r2\n", 0644).ok());
  EXPECT_EQ(Get("/releases/current").body, "{\"source\":\"r2\"}");
}

TEST_F(ReleaseRoutesTest, AHostileReleaseIsServedAsItIsForTheNodeToRefuse) {
  routes_ = ReleaseRoutes(dir_);
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/r1/manifest.json.sig", "garbage\n", 0644).ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/r1/image.tar", "other bytes", 0644).ok());
  EXPECT_EQ(BodyOf(Get("/releases/r1/manifest.json.sig")), "garbage\n");
  EXPECT_EQ(BodyOf(Get("/releases/r1/image.tar")), "other bytes");
  // A manifest that does not decode names no artifact.
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/r1/manifest.json", "{", 0644).ok());
  EXPECT_EQ(Get("/releases/r1/manifest.json").status, 200);
  EXPECT_EQ(Get("/releases/r1/image.tar").status, 404);
}

TEST_F(ReleaseRoutesTest, ASingleRangeIsAnswered206AndAnUnsatisfiableOne416) {
  routes_ = ReleaseRoutes(dir_);
  HttpResponse part = Get("/releases/r1/image.tar", "bytes=99998-");
  EXPECT_EQ(part.status, 206);
  EXPECT_EQ(BodyOf(part), "iiend");
  EXPECT_EQ(Header(part, "Content-Range"), "bytes 99998-100002/100003");
  HttpResponse mid = Get("/releases/r1/image.tar", "bytes=10-19");
  EXPECT_EQ(mid.status, 206);
  EXPECT_EQ(BodyOf(mid), std::string(10, 'i'));
  HttpResponse tail = Get("/releases/r1/image.tar", "bytes=-3");
  EXPECT_EQ(BodyOf(tail), "end");
  HttpResponse beyond = Get("/releases/r1/image.tar", "bytes=100003-");
  EXPECT_EQ(beyond.status, 416);
  EXPECT_FALSE(beyond.file);
  EXPECT_EQ(Header(beyond, "Content-Range"), "bytes */100003");
  // If-Range with the current ETag keeps the range; any other validator sends everything.
  const std::string etag = Header(part, "ETag");
  ASSERT_FALSE(etag.empty());
  EXPECT_EQ(Get("/releases/r1/image.tar", "bytes=100000-", etag).status, 206);
  HttpResponse changed = Get("/releases/r1/image.tar", "bytes=100000-", "\"other\"");
  EXPECT_EQ(changed.status, 200);
  EXPECT_EQ(changed.file->length, image_.size());
}

TEST(DecideRangeTest, OnlyOneWellFormedByteRangeIsHonoured) {
  auto d = [](const char* h, uint64_t size) { return DecideRange(h, size); };
  EXPECT_EQ(d("", 10).kind, Kind::kWhole);
  EXPECT_EQ(d("bytes=0-", 10).kind, Kind::kPartial);
  EXPECT_EQ(d("bytes=0-", 10).length, 10u);
  EXPECT_EQ(d("bytes=2-100", 10).length, 8u);  // clamped to the end
  EXPECT_EQ(d("bytes=-20", 10).first, 0u);
  EXPECT_EQ(d("bytes=-20", 10).length, 10u);
  EXPECT_EQ(d("bytes=10-", 10).kind, Kind::kUnsatisfiable);
  EXPECT_EQ(d("bytes=-0", 10).kind, Kind::kUnsatisfiable);
  EXPECT_EQ(d("bytes=0-", 0).kind, Kind::kUnsatisfiable);
  // Malformed, multiple or other units: ignored, the whole file is sent.
  for (const char* h : {"bytes=5-2", "bytes=0-1,3-4", "items=0-1", "bytes=a-", "bytes= 0-1",
                        "bytes=-", "bytes=1", "bytes=+1-2", "bytes=99999999999999999999-"}) {
    EXPECT_EQ(d(h, 10).kind, Kind::kWhole) << h;
  }
}

}  // namespace
}  // namespace sn::devcore::testing
