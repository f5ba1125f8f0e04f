// Certificates made in the test with the OpenSSL API: a CA and a server certificate for
// 127.0.0.1 signed by it.
#ifndef SANDBOX_NODE_TESTS_AGENT_FAKES_TEST_CERTS_H_
#define SANDBOX_NODE_TESTS_AGENT_FAKES_TEST_CERTS_H_

#include <string>

namespace sn::agent::testing {

struct TestPki {
  std::string ca_pem;           // the CA certificate (what a client trusts)
  std::string server_cert_pem;  // CN and SAN IP 127.0.0.1, signed by the CA
  std::string server_key_pem;
};

// A fresh CA and server certificate. Each call makes a new, unrelated CA.
TestPki MakeTestPki();

}  // namespace sn::agent::testing

#endif  // SANDBOX_NODE_TESTS_AGENT_FAKES_TEST_CERTS_H_
