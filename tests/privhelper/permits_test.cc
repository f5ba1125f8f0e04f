// The permit table (privhelper/rpc/permits.h) is the complete list of what privhelper serves:
// every method of proto/privhelper.proto's PrivHelper service has exactly one row, and every
// row names a method of that service. A method added to the proto without a row (served by
// nothing but the catch-all, a violation) or a row without a method fails here.
#include "privhelper/rpc/permits.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::privhelper {
namespace {

TEST(PermitsTest, TheTableAndTheProtoServiceNameTheSameMethods) {
  const google::protobuf::ServiceDescriptor* service =
      v1::ProbeRequest::descriptor()->file()->FindServiceByName("PrivHelper");
  ASSERT_NE(service, nullptr);
  std::set<std::string> in_proto;
  for (int i = 0; i < service->method_count(); ++i) {
    in_proto.insert("/" + service->full_name() + "/" + service->method(i)->name());
  }
  std::set<std::string> in_table;
  std::set<Rpc> rpcs;
  for (const Permit& p : kPermits) {
    EXPECT_TRUE(in_table.insert(std::string(p.method)).second) << p.method << " twice";
    EXPECT_TRUE(rpcs.insert(p.rpc).second) << p.method << ": its Rpc has another row";
    EXPECT_EQ(FindPermit(p.rpc), &p) << p.method;
    EXPECT_FALSE(p.in_starting) << p.method << ": nothing is served while starting";
  }
  EXPECT_EQ(in_table, in_proto);
  EXPECT_EQ(std::string(v1::PrivHelper::service_full_name()), service->full_name());
}

}  // namespace
}  // namespace sn::privhelper
