// The strict record reader's rules (common/json/record.h), checked record by record against
// the records main 9855679 wrote (tests/testdata/records): a member named twice (at the top or
// in a nested object) and a member the record does not define are refused naming the member;
// a record cut short, or of another schema, is "torn or foreign". Both processes' golden tests
// run these over their own records; each process refuses with its own code (privhelper's
// store FailedPrecondition, the agent DataLoss).
#ifndef SANDBOX_NODE_TESTS_COMMON_RECORD_STRICTNESS_H_
#define SANDBOX_NODE_TESTS_COMMON_RECORD_STRICTNESS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace sn::testing {

struct StrictRecordCase {
  std::string golden;      // a file of tests/testdata/records
  std::string top_member;  // a scalar member, repeated at the front: '"<name>":<value>,'
  std::string nested;      // a nested member's text, "" when the record nests nothing
  std::function<absl::Status(const std::string&)> read;  // the process's own reader
};

// The bytes of tests/testdata/records/<name> (a test failure when missing or empty).
std::string GoldenRecord(const std::string& name);

// Each reads its golden record, then the altered ones, expecting `refused` and the message.
void ExpectDuplicateMembersRefused(const std::vector<StrictRecordCase>& cases,
                                   absl::StatusCode refused);
void ExpectUnknownMembersRefused(const std::vector<StrictRecordCase>& cases,
                                 absl::StatusCode refused);
// `schema_required`: every record carries a "schema" member (one of another value is refused).
void ExpectCutShortRefused(const std::vector<StrictRecordCase>& cases, absl::StatusCode refused,
                           bool schema_required);

}  // namespace sn::testing

#endif  // SANDBOX_NODE_TESTS_COMMON_RECORD_STRICTNESS_H_
