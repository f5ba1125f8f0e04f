// The permit table (permits.h) against proto/privhelper.proto's PrivHelper service. server.cc
// registers one handler per row and nothing else; before it serves, each row's method name,
// its handler's message types and its streaming must be the proto's, and the table must name
// every method of the service. A mismatch stops privhelper's start (it would otherwise decode
// a call as the wrong message, or leave a method to the catch-all).
#ifndef SANDBOX_NODE_PRIVHELPER_RPC_PERMITS_PROTO_H_
#define SANDBOX_NODE_PRIVHELPER_RPC_PERMITS_PROTO_H_

#include <cstddef>
#include <string>

#include "privhelper/rpc/permits.h"

namespace google::protobuf {
class Descriptor;
}  // namespace google::protobuf

namespace sn::privhelper {

// "" when the proto's method named by `p.method` exists, takes `request`, answers `response`
// and is client-streaming exactly when `client_streaming` (never server-streaming); else what
// differs, naming the method.
std::string RowMismatch(const Permit& p, const google::protobuf::Descriptor* request,
                        const google::protobuf::Descriptor* response, bool client_streaming);

// "" when the proto's service has exactly `rows` methods; else what differs.
std::string MethodCountMismatch(size_t rows);

}  // namespace sn::privhelper

#endif  // SANDBOX_NODE_PRIVHELPER_RPC_PERMITS_PROTO_H_
