#include "strata/common/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#ifdef STRATA_HAVE_SPDLOG
#include <spdlog/spdlog.h>
#endif

namespace strata {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kInfo};

#ifdef STRATA_HAVE_SPDLOG
spdlog::level::level_enum ToSpd(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}
#else
const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warning";
    case LogLevel::kError:
      return "error";
    case LogLevel::kOff:
      return "off";
  }
  return "info";
}
#endif
}  // namespace

StatusOr<LogLevel> ParseLogLevel(std::string_view name) {
  if (name == "trace") return LogLevel::kTrace;
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn" || name == "warning") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  if (name == "off") return LogLevel::kOff;
  return InvalidArgumentError(
      "log level must be one of trace, debug, info, warn, error, off; got '" + std::string(name) +
      "'");
}

void SetLogLevel(LogLevel level) {
  g_level.store(level);
#ifdef STRATA_HAVE_SPDLOG
  spdlog::set_level(ToSpd(level));
#endif
}

void Log(LogLevel level, std::string_view message) {
  if (level < g_level.load() || level == LogLevel::kOff) return;
#ifdef STRATA_HAVE_SPDLOG
  spdlog::log(ToSpd(level), "{}", message);
#else
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[%s] %.*s\n", LevelName(level), static_cast<int>(message.size()),
               message.data());
#endif
}

}  // namespace strata
