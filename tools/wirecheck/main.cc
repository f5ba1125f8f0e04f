// wirecheck --as=node|core FILE... ('-' reads stdin): one frame per file; prints one verdict
// line per file and exits 0 only if every frame is ok (2 on a usage or read error).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tools/wirecheck/check.h"

namespace {

bool ReadAll(const std::string& path, std::string* out) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    *out = ss.str();
    return !std::cin.bad();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

int Usage() {
  std::cerr << "usage: wirecheck --as=node|core FILE... ('-' for stdin)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<sn::wire::Role> role;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--as=node") {
      role = sn::wire::Role::kNode;
    } else if (a == "--as=core") {
      role = sn::wire::Role::kCore;
    } else if (a.rfind("--", 0) == 0) {
      return Usage();
    } else {
      files.push_back(a);
    }
  }
  if (!role || files.empty()) return Usage();
  int rc = 0;
  for (const std::string& f : files) {
    std::string bytes;
    if (!ReadAll(f, &bytes)) {
      std::cout << f << ": unreadable\n";
      rc = 2;
      continue;
    }
    const sn::wirecheck::Verdict v = sn::wirecheck::Check(bytes, *role);
    std::cout << f << ": " << v.text << "\n";
    if (v.kind != sn::wirecheck::Verdict::kOk && rc == 0) rc = 1;
  }
  return rc;
}
