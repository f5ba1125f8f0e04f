#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>

namespace sn {
namespace {

std::string& Component() {
  static std::string* c = new std::string("node");
  return *c;
}
std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "info";
}

bool NeedsQuote(std::string_view v) {
  if (v.empty()) return true;
  for (unsigned char c : v) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f) return true;
  }
  return false;
}

void AppendValue(std::string& out, std::string_view v) {
  if (!NeedsQuote(v)) {
    out.append(v);
    return;
  }
  out.push_back('"');
  for (unsigned char c : v) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

}  // namespace

void InitLogging(std::string_view component, LogLevel min_level) {
  Component() = std::string(component);
  g_min_level = static_cast<int>(min_level);
}

std::string FormatLogLine(LogLevel level, std::string_view component, std::string_view msg,
                          std::initializer_list<LogField> fields) {
  std::string line = "level=";
  line += LevelName(level);
  line += " component=";
  AppendValue(line, component);
  line += " msg=";
  AppendValue(line, msg);
  for (const LogField& f : fields) {
    line.push_back(' ');
    line.append(f.key);
    line.push_back('=');
    AppendValue(line, f.value);
  }
  line.push_back('\n');
  return line;
}

void Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_min_level.load()) return;
  std::string line = FormatLogLine(level, Component(), msg, fields);
  static std::mutex* mu = new std::mutex();
  std::lock_guard<std::mutex> lock(*mu);
  ssize_t unused = write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

}  // namespace sn
