#include "tests/agent/fakes/test_certs.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdlib>

namespace sn::agent::testing {
namespace {

std::string Pem(int (*write)(BIO*, void*), void* obj) {
  BIO* bio = BIO_new(BIO_s_mem());
  write(bio, obj);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

int WriteCert(BIO* b, void* x) { return PEM_write_bio_X509(b, static_cast<X509*>(x)); }
int WriteKey(BIO* b, void* k) {
  return PEM_write_bio_PrivateKey(b, static_cast<EVP_PKEY*>(k), nullptr, nullptr, 0, nullptr,
                                  nullptr);
}

void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) std::abort();
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

X509* NewCert(const char* cn, long serial) {
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  return x;
}

}  // namespace

TestPki MakeTestPki() {
  EVP_PKEY* ca_key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  EVP_PKEY* server_key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  if (ca_key == nullptr || server_key == nullptr) std::abort();

  X509* ca = NewCert("sn-test-ca", 1);
  X509_set_issuer_name(ca, X509_get_subject_name(ca));
  X509_set_pubkey(ca, ca_key);
  AddExt(ca, ca, NID_basic_constraints, "critical,CA:TRUE");
  AddExt(ca, ca, NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExt(ca, ca, NID_subject_key_identifier, "hash");
  X509_sign(ca, ca_key, EVP_sha256());

  X509* server = NewCert("127.0.0.1", 2);
  X509_set_issuer_name(server, X509_get_subject_name(ca));
  X509_set_pubkey(server, server_key);
  AddExt(server, ca, NID_basic_constraints, "critical,CA:FALSE");
  AddExt(server, ca, NID_subject_alt_name, "IP:127.0.0.1");
  AddExt(server, ca, NID_ext_key_usage, "serverAuth");
  X509_sign(server, ca_key, EVP_sha256());

  TestPki pki;
  pki.ca_pem = Pem(WriteCert, ca);
  pki.server_cert_pem = Pem(WriteCert, server);
  pki.server_key_pem = Pem(WriteKey, server_key);
  X509_free(ca);
  X509_free(server);
  EVP_PKEY_free(ca_key);
  EVP_PKEY_free(server_key);
  return pki;
}

}  // namespace sn::agent::testing
