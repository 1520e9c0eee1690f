#include "strata/common/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>

#ifdef STRATA_HAVE_SPDLOG
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#endif

namespace strata {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::atomic<LogFormat> g_format{LogFormat::kText};

constexpr char kTextPattern[] = "[%Y-%m-%d %H:%M:%S.%e] [%l] %v";
constexpr char kJsonPattern[] = "{\"time\":\"%Y-%m-%dT%H:%M:%S.%f%z\",\"level\":\"%l\",%v}";

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (u < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          *out += "\\u00";
          out->push_back(kHex[u >> 4]);
          out->push_back(kHex[u & 15]);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

bool NeedsQuotes(std::string_view value) {
  if (value.empty()) return true;
  for (const char c : value) {
    if (c == ' ' || c == '"' || c == '=' || static_cast<unsigned char>(c) < 0x20) return true;
  }
  return false;
}

#ifdef STRATA_HAVE_SPDLOG
// Logs go to stderr: the tools print their results on stdout.
spdlog::logger& Logger() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>("strata",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern(kTextPattern);
    l->set_level(spdlog::level::trace);  // g_level filters
    l->flush_on(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

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

StatusOr<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return InvalidArgumentError("log format must be text or json; got '" + std::string(name) + "'");
}

void SetLogLevel(LogLevel level) { g_level.store(level); }

void SetLogFormat(LogFormat format) {
  g_format.store(format);
#ifdef STRATA_HAVE_SPDLOG
  Logger().set_pattern(format == LogFormat::kJson ? kJsonPattern : kTextPattern);
#endif
}

std::string FormatLogLine(LogFormat format, std::string_view message,
                          std::initializer_list<LogField> fields) {
  std::string line;
  if (format == LogFormat::kJson) {
    line = "\"msg\":";
    AppendJsonString(&line, message);
    for (const LogField& f : fields) {
      line.push_back(',');
      AppendJsonString(&line, f.key);
      line.push_back(':');
      AppendJsonString(&line, f.value);
    }
    return line;
  }
  line = message;
  for (const LogField& f : fields) {
    line.push_back(' ');
    line += f.key;
    line.push_back('=');
    if (NeedsQuotes(f.value)) {
      AppendJsonString(&line, f.value);
    } else {
      line += f.value;
    }
  }
  return line;
}

void Log(LogLevel level, std::string_view message, std::initializer_list<LogField> fields) {
  if (level < g_level.load() || level == LogLevel::kOff) return;
  const std::string line = FormatLogLine(g_format.load(), message, fields);
#ifdef STRATA_HAVE_SPDLOG
  Logger().log(ToSpd(level), "{}", line);
#else
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (g_format.load() == LogFormat::kJson) {
    std::fprintf(stderr, "{\"level\":\"%s\",%s}\n", LevelName(level), line.c_str());
  } else {
    std::fprintf(stderr, "[%s] %s\n", LevelName(level), line.c_str());
  }
#endif
}

}  // namespace strata
