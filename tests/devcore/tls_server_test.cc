// devcore with --tls-cert/--tls-key: https routes and a wss connection, checked by a client
// that trusts only the test's self-signed certificate (made in-process with OpenSSL).
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include "common/clock.h"
#include "common/wire/codec.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/devcore/fixture.h"
#include "common/asio_timer_queue.h"
#include "tools/devcore/server.h"

namespace sn::devcore::testing {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;
using json = nlohmann::json;

// Writes a self-signed P-256 certificate for CN=127.0.0.1 and its key; returns the cert PEM.
std::string MakeCertificate(const std::string& cert_path, const std::string& key_path) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509_sign(x, key, EVP_sha256());
  FILE* f = std::fopen(cert_path.c_str(), "w");
  PEM_write_X509(f, x);
  std::fclose(f);
  f = std::fopen(key_path.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, x);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(n));
  BIO_free(bio);
  X509_free(x);
  EVP_PKEY_free(key);
  return pem;
}

class TlsServerTest : public DevcoreTest {
 protected:
  void SetUp() override {
    DevcoreTest::SetUp();
    cert_pem_ = MakeCertificate(dir_ + "/cert.pem", dir_ + "/key.pem");
    // The fixture's devcore runs on the simulated clock; the server needs the real one.
    devcore_.reset();
    auto store = NodeStore::Open(dir_);
    ASSERT_TRUE(store.ok());
    auto generations = GenerationStore::Open(dir_);
    ASSERT_TRUE(generations.ok());
    devcore_ = std::make_unique<Devcore>(*std::move(store), *std::move(generations), "",
                                         SystemClock::Get(), &timers_);
    auto server = Server::Start(
        ioc_, devcore_.get(), ServerOptions{"127.0.0.1:0", dir_ + "/cert.pem", dir_ + "/key.pem"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_tls_.add_certificate_authority(boost::asio::buffer(cert_pem_));
    client_tls_.set_verify_mode(ssl::verify_peer);
    thread_ = std::thread([this] { ioc_.run(); });
  }

  void TearDown() override {
    if (!thread_.joinable()) return;
    boost::asio::post(ioc_, [this] { server_->Stop(); });
    thread_.join();
    server_.reset();
    devcore_.reset();
  }

  tcp::socket Dial() {
    tcp::socket s(client_ioc_);
    s.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), server_->port()));
    return s;
  }

  std::string cert_pem_;
  boost::asio::io_context ioc_{1};
  AsioTimerQueue timers_{ioc_};
  std::unique_ptr<Server> server_;
  std::thread thread_;
  boost::asio::io_context client_ioc_;
  ssl::context client_tls_{ssl::context::tls_client};
};

TEST_F(TlsServerTest, ServesHttpsAndWss) {
  EXPECT_EQ(server_->url(), "https://127.0.0.1:" + std::to_string(server_->port()));

  beast::ssl_stream<beast::tcp_stream> https(beast::tcp_stream(Dial()), client_tls_);
  https.handshake(ssl::stream_base::client);
  http::request<http::string_body> req(http::verb::get, "/admin/v1/nodes", 11);
  req.set(http::field::host, "127.0.0.1");
  http::write(https, req);
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(https, buf, res);
  ASSERT_EQ(res.result_int(), 200u);
  EXPECT_EQ(json::parse(res.body())["nodes"][0]["node_id"], node_id_);

  websocket::stream<beast::ssl_stream<tcp::socket>> wss(Dial(), client_tls_);
  wss.next_layer().handshake(ssl::stream_base::client);
  wss.set_option(websocket::stream_base::decorator([this](websocket::request_type& r) {
    r.set(http::field::authorization, "Bearer " + credential_);
  }));
  wss.handshake("127.0.0.1", "/api/v1/sandbox-node/connect?node_id=" + node_id_);
  wss.text(true);
  wss.write(boost::asio::buffer(wire::Encode(MatchingHello())));
  beast::flat_buffer wbuf;
  wss.read(wbuf);
  auto frame = wire::Decode(beast::buffers_to_string(wbuf.data()), wire::Role::kNode);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_TRUE(std::holds_alternative<wire::Welcome>(*frame));
}

}  // namespace
}  // namespace sn::devcore::testing
