// Process-wide logging setup. Wraps spdlog where it is installed; on machines without it
// (the GPU box builds with STRATA_SERVER=OFF) messages go to stderr with the same format.
// Thread-safe: any thread may log.
#pragma once

#include <string>
#include <string_view>

#include "strata/common/status.h"

namespace strata {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// Parses "trace", "debug", "info", "warn", "error", "off".
StatusOr<LogLevel> ParseLogLevel(std::string_view name);

// Sets the level below which messages are dropped. Default: kInfo.
void SetLogLevel(LogLevel level);

void Log(LogLevel level, std::string_view message);
inline void LogInfo(std::string_view m) { Log(LogLevel::kInfo, m); }
inline void LogWarn(std::string_view m) { Log(LogLevel::kWarn, m); }
inline void LogError(std::string_view m) { Log(LogLevel::kError, m); }
inline void LogDebug(std::string_view m) { Log(LogLevel::kDebug, m); }

}  // namespace strata
