#include "strata/common/tool_args.h"

#include <cstdio>
#include <cstdlib>

namespace strata {

void ToolArgs::Fail(const std::string& message, int code) const {
  std::fprintf(stderr, "%s: %s\n", tool_, message.c_str());
  std::exit(code);
}

long long ToolArgs::Int(const std::string& flag, const char* value, long long min) const {
  char* end = nullptr;
  const long long v = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0') {
    Fail(flag + " expects an integer, got '" + value + "'", usage_exit_code_);
  }
  if (v < min) {
    Fail(flag + " must be at least " + std::to_string(min) + ", got " + value, usage_exit_code_);
  }
  return v;
}

double ToolArgs::Number(const std::string& flag, const char* value) const {
  char* end = nullptr;
  const double v = std::strtod(value, &end);
  if (end == value || *end != '\0') {
    Fail(flag + " expects a number, got '" + value + "'", usage_exit_code_);
  }
  return v;
}

}  // namespace strata
