// STRATA_CHECK: guards programmer invariants only, never input. A failed check prints the
// condition and location and aborts; input errors are reported through Status instead.
#pragma once

namespace strata::internal {
[[noreturn]] void CheckFailed(const char* condition, const char* file, int line);
}  // namespace strata::internal

#define STRATA_CHECK(cond)                                                   \
  do {                                                                       \
    if (!(cond)) ::strata::internal::CheckFailed(#cond, __FILE__, __LINE__); \
  } while (0)
