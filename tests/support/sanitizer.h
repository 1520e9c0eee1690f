// Whether this test binary is built with AddressSanitizer or ThreadSanitizer (GCC's and clang's
// ways of saying so), for tests of what glibc's own allocator does: a sanitizer replaces it.
#pragma once

namespace strata::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace strata::testing
