// Structured logging to stderr, one line per event, for journald:
//   level=info component=agent msg="connected" connection_id=...
// Values are quoted and escaped when needed. Never log secrets (credentials), request
// arguments or outputs: callers pass only what may be read by an operator.
#ifndef SANDBOX_NODE_COMMON_LOG_H_
#define SANDBOX_NODE_COMMON_LOG_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace sn {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

struct LogField {
  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(v) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(v) {}
  LogField(std::string_view k, int64_t v) : key(k), value(std::to_string(v)) {}
  LogField(std::string_view k, int v) : key(k), value(std::to_string(v)) {}
  LogField(std::string_view k, uint64_t v) : key(k), value(std::to_string(v)) {}
  LogField(std::string_view k, bool v) : key(k), value(v ? "true" : "false") {}
  std::string_view key;
  std::string value;
};

// Sets the component name printed on every line and the minimum level (default info).
void InitLogging(std::string_view component, LogLevel min_level = LogLevel::kInfo);
void Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields = {});
// Formats a line without writing it (tests).
std::string FormatLogLine(LogLevel level, std::string_view component, std::string_view msg,
                          std::initializer_list<LogField> fields);

inline void LogInfo(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kInfo, m, f);
}
inline void LogWarning(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kWarning, m, f);
}
inline void LogError(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kError, m, f);
}
inline void LogDebug(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kDebug, m, f);
}

}  // namespace sn

#endif  // SANDBOX_NODE_COMMON_LOG_H_
