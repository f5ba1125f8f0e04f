#include "privhelper/rpc/permits_proto.h"

#include <google/protobuf/descriptor.h>

#include "proto/privhelper.grpc.pb.h"

namespace sn::privhelper {
namespace {

const google::protobuf::ServiceDescriptor* ProtoService() {
  return google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      std::string(v1::PrivHelper::service_full_name()));
}

}  // namespace

std::string RowMismatch(const Permit& p, const google::protobuf::Descriptor* request,
                        const google::protobuf::Descriptor* response, bool client_streaming) {
  const std::string method(p.method);
  const google::protobuf::ServiceDescriptor* service = ProtoService();
  if (service == nullptr) return "proto/privhelper.proto's service is not linked";
  const std::string prefix = "/" + service->full_name() + "/";
  const google::protobuf::MethodDescriptor* m =
      method.rfind(prefix, 0) == 0 ? service->FindMethodByName(method.substr(prefix.size()))
                                   : nullptr;
  if (m == nullptr) return method + ": no such method in proto/privhelper.proto";
  if (m->input_type() != request || m->output_type() != response) {
    return method + ": its handler's message types are not the proto's";
  }
  if (m->client_streaming() != client_streaming || m->server_streaming()) {
    return method + ": its handler's streaming is not the proto's";
  }
  return "";
}

std::string MethodCountMismatch(size_t rows) {
  const google::protobuf::ServiceDescriptor* service = ProtoService();
  if (service == nullptr) return "proto/privhelper.proto's service is not linked";
  if (static_cast<size_t>(service->method_count()) != rows) {
    return "the permit table has " + std::to_string(rows) + " rows, the proto's service " +
           std::to_string(service->method_count()) + " methods";
  }
  return "";
}

}  // namespace sn::privhelper
