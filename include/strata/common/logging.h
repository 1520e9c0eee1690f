// Process-wide logging setup. Wraps spdlog where it is installed; on machines without it
// (the GPU box builds with STRATA_SERVER=OFF) messages go to stderr with the same format.
//
// Two formats: text (default; "message key=value ...") and JSON (one object per line:
// {"time": ..., "level": ..., "msg": ..., "<key>": "<value>", ...}) for log collectors.
// Structured fields (a request id, a status code) go in `fields`, never spliced into the
// message, so both formats carry them as fields.
//
// Thread-safe: any thread may log.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "strata/common/status.h"

namespace strata {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };
enum class LogFormat { kText, kJson };

// One structured field of a log line.
struct LogField {
  std::string_view key;
  std::string_view value;
};

// Parses "trace", "debug", "info", "warn", "error", "off".
StatusOr<LogLevel> ParseLogLevel(std::string_view name);

// Parses "text", "json".
StatusOr<LogFormat> ParseLogFormat(std::string_view name);

// Sets the level below which messages are dropped. Default: kInfo.
void SetLogLevel(LogLevel level);
// Default: kText.
void SetLogFormat(LogFormat format);

void Log(LogLevel level, std::string_view message, std::initializer_list<LogField> fields = {});

// The line Log writes for `message` and `fields` in `format`, without time and level: text
// gives "message key=value ..." (values with spaces or quotes are quoted), JSON gives the
// members after "level" ("\"msg\":\"...\",\"key\":\"value\"") with every string escaped.
std::string FormatLogLine(LogFormat format, std::string_view message,
                          std::initializer_list<LogField> fields);
inline void LogInfo(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kInfo, m, f);
}
inline void LogWarn(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kWarn, m, f);
}
inline void LogError(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kError, m, f);
}
inline void LogDebug(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kDebug, m, f);
}

}  // namespace strata
