// ToolArgs: what every command-line tool does with its arguments' failures — one line on
// stderr that starts with the tool's name, then an exit code — and strict number parsing
// (the whole value must be the number).
//
// Thread rules: immutable; Fail ends the process.
#pragma once

#include <climits>
#include <string>

namespace strata {

class ToolArgs {
 public:
  // `tool`: the name messages start with; `usage_exit_code`: the exit code of a bad flag value.
  constexpr ToolArgs(const char* tool, int usage_exit_code)
      : tool_(tool), usage_exit_code_(usage_exit_code) {}

  // Writes "TOOL: message" to stderr and exits with `code`.
  [[noreturn]] void Fail(const std::string& message, int code = 1) const;

  // `value` as a base-10 integer of at least `min`; otherwise fails naming `flag`, with the
  // usage exit code.
  long long Int(const std::string& flag, const char* value, long long min = LLONG_MIN) const;

  // `value` as a number (strtod syntax); otherwise fails naming `flag`, with the usage exit code.
  double Number(const std::string& flag, const char* value) const;

 private:
  const char* tool_;
  int usage_exit_code_;
};

}  // namespace strata
