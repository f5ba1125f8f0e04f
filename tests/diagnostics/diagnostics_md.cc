// Prints docs/diagnostics.md from common/diagnostics.def:
//   bazel run //tests/diagnostics:diagnostics_md > docs/diagnostics.md
// diagnostics_test checks the committed file against the fixture.
#include <cstdio>
#include <string>

#include "common/diagnostics.h"

int main() {
  std::string out =
      "# Node diagnostic codes\n"
      "\n"
      "<!-- Generated from common/diagnostics.def by\n"
      "     `bazel run //tests/diagnostics:diagnostics_md > docs/diagnostics.md`;\n"
      "     tests/diagnostics checks this table against tests/testdata/node-diagnostics.json. -->\n"
      "\n"
      "An unready provider reports exactly one of these codes (spec/wire.md §7). The codes are\n"
      "classified on the node from typed errors; probe text, host paths and daemon messages stay\n"
      "in the node's logs and never cross the wire. Core stores an unknown code as\n"
      "`provider_unavailable`.\n"
      "\n"
      "| code | cause |\n"
      "|---|---|\n";
  for (const sn::DiagnosticInfo& d : sn::kDiagnostics) {
    out += "| ";
    out.append(d.code);
    out += " | ";
    out.append(d.cause);
    out += " |\n";
  }
  fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
