// Small helpers both Redis users of the cache module share (private to src/cache).
#pragma once

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <chrono>
#include <string>

namespace strata::cache {

inline timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// Why the last call on `ctx` failed, for a log line.
inline std::string ContextError(const redisContext* ctx) {
  return ctx != nullptr && ctx->err != 0 ? std::string(ctx->errstr) : std::string("no reply");
}

}  // namespace strata::cache
