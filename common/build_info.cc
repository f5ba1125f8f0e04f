#include "common/build_info.h"

#include <cstdio>

namespace sn {

std::string VersionLine(std::string_view program) {
  std::string line(program);
  line += ' ';
  line += BuildRelease();
  line += " (commit ";
  line += BuildCommit();
  line += ')';
  return line;
}

std::string_view FirstArgument(int argc, char** argv) {
  return argc >= 2 && argv[1] != nullptr ? std::string_view(argv[1]) : std::string_view();
}

std::optional<int> AnswerHelpOrVersion(std::string_view first_argument, std::string_view program,
                                       std::string_view usage) {
  std::string out;
  if (first_argument == "--help") {
    out = std::string(usage);
    if (out.empty() || out.back() != '\n') out += '\n';
  } else if (first_argument == "--version") {
    out = VersionLine(program) + '\n';
  } else {
    return std::nullopt;
  }
  const bool written = std::fwrite(out.data(), 1, out.size(), stdout) == out.size();
  return written && std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace sn
