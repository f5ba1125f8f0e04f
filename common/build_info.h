// What an executable was built from, and the two flags every program answers with it.
//
// BuildRelease() and BuildCommit() are stamped at build time (docs/build.md, "Stamping"):
// tools/build/workspace_status.sh prints them as Bazel's stable status, and the genrule
// //common:build_info_stamp (the only stamped action) writes them into one small source file
// of this library. A new commit regenerates that file and relinks the programs; nothing else
// is compiled again.
//
// Every program (agent, privhelper, native_helper, vm_supervisor, sandbox-node-install,
// release, devcore) answers, as its FIRST argument only,
//   --help     its usage on standard output, exit 0;
//   --version  "<program> <release> (commit <sha>)", one line on standard output, exit 0.
// Usage errors stay on standard error with exit 2, as each program's own parser says.
#ifndef SANDBOX_NODE_COMMON_BUILD_INFO_H_
#define SANDBOX_NODE_COMMON_BUILD_INFO_H_

#include <optional>
#include <string>
#include <string_view>

namespace sn {

// $SN_RELEASE at build time (letters, digits, . _ + -), "dev" when unset.
const char* BuildRelease();
// The git commit (40 hex digits), with "-dirty" when tracked files had changes; "unknown"
// when the tree was not a git checkout.
const char* BuildCommit();

// "<program> <release> (commit <sha>)", no newline.
std::string VersionLine(std::string_view program);

// argv[1], or "" when there is none.
std::string_view FirstArgument(int argc, char** argv);

// When `first_argument` is "--help" or "--version": writes `usage` or VersionLine(program)
// and a newline to standard output and returns the exit status (0; 1 if standard output could
// not be written). std::nullopt for any other argument (the program parses its command line
// as before).
std::optional<int> AnswerHelpOrVersion(std::string_view first_argument, std::string_view program,
                                       std::string_view usage);

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_BUILD_INFO_H_
