// The permit table (privhelper/rpc/permits.h) is the complete list of what privhelper serves:
// every method of proto/privhelper.proto's PrivHelper service has exactly one row, and every
// row names a method of that service. A method added to the proto without a row (served by
// nothing but the catch-all, a violation) or a row without a method fails here.
#include "privhelper/rpc/permits.h"

#include "privhelper/rpc/permits_proto.h"

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

// The check privhelper's server makes of each row before it serves (permits_proto.h): the
// handler it registers for a row must take and answer the proto's messages, with the proto's
// streaming. Each way a row and its handler could disagree is caught.
TEST(PermitsTest, ARowWhoseHandlerDisagreesWithTheProtoIsNamed) {
  const Permit& probe = *FindPermit(Rpc::kProbe);
  const Permit& execute = *FindPermit(Rpc::kExecute);
  EXPECT_EQ(RowMismatch(probe, v1::ProbeRequest::descriptor(), v1::ProbeResponse::descriptor(),
                        false),
            "");
  EXPECT_EQ(RowMismatch(execute, v1::ExecuteMessage::descriptor(),
                        v1::ExecuteResponse::descriptor(), true),
            "");
  EXPECT_EQ(RowMismatch(probe, v1::ListGenerationsRequest::descriptor(),
                        v1::ProbeResponse::descriptor(), false),
            "/sn.privhelper.v1.PrivHelper/Probe: its handler's message types are not the proto's");
  EXPECT_EQ(RowMismatch(probe, v1::ProbeRequest::descriptor(),
                        v1::ListGenerationsResponse::descriptor(), false),
            "/sn.privhelper.v1.PrivHelper/Probe: its handler's message types are not the proto's");
  EXPECT_EQ(RowMismatch(execute, v1::ExecuteMessage::descriptor(),
                        v1::ExecuteResponse::descriptor(), false),
            "/sn.privhelper.v1.PrivHelper/Execute: its handler's streaming is not the proto's");
  constexpr Permit kUnknown{Rpc::kProbe, "/sn.privhelper.v1.PrivHelper/Reboot", false, true,
                            true, false};
  EXPECT_EQ(RowMismatch(kUnknown, v1::ProbeRequest::descriptor(),
                        v1::ProbeResponse::descriptor(), false),
            "/sn.privhelper.v1.PrivHelper/Reboot: no such method in proto/privhelper.proto");
  constexpr Permit kOtherService{Rpc::kProbe, "/other.Service/Probe", false, true, true, false};
  EXPECT_NE(RowMismatch(kOtherService, v1::ProbeRequest::descriptor(),
                        v1::ProbeResponse::descriptor(), false),
            "");
  EXPECT_EQ(MethodCountMismatch(std::size(kPermits)), "");
  EXPECT_EQ(MethodCountMismatch(std::size(kPermits) - 1),
            "the permit table has 7 rows, the proto's service 8 methods");
}

}  // namespace
}  // namespace sn::privhelper
