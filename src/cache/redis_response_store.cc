#include "strata/cache/redis_response_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <memory>
#include <utility>

namespace strata::cache {
namespace {

using Clock = std::chrono::steady_clock;

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

std::string ContextError(redisContext* ctx) {
  return ctx != nullptr && ctx->err != 0 ? std::string(ctx->errstr) : std::string("no reply");
}

}  // namespace

RedisResponseStore::RedisResponseStore(RedisOptions options) : options_(std::move(options)) {}

RedisResponseStore::~RedisResponseStore() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (redisContext* ctx : idle_) redisFree(ctx);
}

StatusOr<redisContext*> RedisResponseStore::Acquire() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (Clock::now() < down_until_) return UnavailableError("redis is down (retrying later)");
      if (!idle_.empty()) {
        redisContext* ctx = idle_.back();
        idle_.pop_back();
        return ctx;
      }
      if (open_ < options_.max_connections) {
        ++open_;
        break;  // connect outside the lock
      }
      if (available_.wait_for(lock, options_.timeout) == std::cv_status::timeout) {
        return UnavailableError("no redis connection free within the timeout");
      }
    }
  }
  redisContext* ctx =
      redisConnectWithTimeout(options_.host.c_str(), options_.port, ToTimeval(options_.timeout));
  if (ctx == nullptr || ctx->err != 0 ||
      redisSetTimeout(ctx, ToTimeval(options_.timeout)) != REDIS_OK) {
    const std::string why = ContextError(ctx);
    Release(ctx, /*broken=*/true);
    return UnavailableError("cannot connect to redis at " + options_.host + ":" +
                            std::to_string(options_.port) + ": " + why);
  }
  return ctx;
}

void RedisResponseStore::Release(redisContext* ctx, bool broken) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (broken) {
    if (ctx != nullptr) redisFree(ctx);
    --open_;
    down_until_ = Clock::now() + options_.retry_after;
    // Idle connections to a server that just failed are likely dead too.
    for (redisContext* idle : idle_) redisFree(idle);
    open_ -= static_cast<int>(idle_.size());
    idle_.clear();
  } else {
    idle_.push_back(ctx);
  }
  available_.notify_one();
}

StatusOr<CachedResponse> RedisResponseStore::Get(const std::string& key) {
  STRATA_ASSIGN_OR_RETURN(redisContext * ctx, Acquire());
  const std::string full = options_.key_prefix + key;
  Reply reply(static_cast<redisReply*>(redisCommand(ctx, "GET %b", full.data(), full.size())));
  if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
    const std::string why = reply ? std::string(reply->str, reply->len) : ContextError(ctx);
    Release(ctx, /*broken=*/reply == nullptr);
    return UnavailableError("redis GET failed: " + why);
  }
  if (reply->type == REDIS_REPLY_NIL) {
    Release(ctx, false);
    return NotFoundError("no entry");
  }
  if (reply->type != REDIS_REPLY_STRING) {
    Release(ctx, false);
    return UnavailableError("redis GET returned a reply of type " + std::to_string(reply->type));
  }
  StatusOr<CachedResponse> decoded = DecodeCachedResponse(std::string_view(reply->str, reply->len));
  if (!decoded.ok()) {  // drop it: nobody can use it
    Reply del(static_cast<redisReply*>(redisCommand(ctx, "DEL %b", full.data(), full.size())));
    Release(ctx, del == nullptr);
    return decoded.status();
  }
  Release(ctx, false);
  return decoded;
}

Status RedisResponseStore::Put(const std::string& key, const CachedResponse& value,
                               std::chrono::seconds ttl) {
  if (ttl.count() <= 0) return OkStatus();
  STRATA_ASSIGN_OR_RETURN(redisContext * ctx, Acquire());
  const std::string full = options_.key_prefix + key;
  const std::string bytes = EncodeCachedResponse(value);
  const std::string ms = std::to_string(ttl.count() * 1000);
  Reply reply(static_cast<redisReply*>(redisCommand(
      ctx, "SET %b %b PX %s", full.data(), full.size(), bytes.data(), bytes.size(), ms.c_str())));
  if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
    const std::string why = reply ? std::string(reply->str, reply->len) : ContextError(ctx);
    Release(ctx, /*broken=*/reply == nullptr);
    return UnavailableError("redis SET failed: " + why);
  }
  Release(ctx, false);
  return OkStatus();
}

Status RedisResponseStore::Clear() {
  STRATA_ASSIGN_OR_RETURN(redisContext * ctx, Acquire());
  const std::string pattern = options_.key_prefix + "*";
  std::string cursor = "0";
  do {
    Reply reply(static_cast<redisReply*>(redisCommand(
        ctx, "SCAN %s MATCH %b COUNT 1000", cursor.c_str(), pattern.data(), pattern.size())));
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_ARRAY) {
      const std::string why = ContextError(ctx);
      Release(ctx, reply == nullptr);
      return UnavailableError("redis SCAN failed: " + why);
    }
    cursor.assign(reply->element[0]->str, reply->element[0]->len);
    const redisReply* keys = reply->element[1];
    for (size_t i = 0; i < keys->elements; ++i) {
      const redisReply* k = keys->element[i];
      if (k->type != REDIS_REPLY_STRING) continue;
      Reply del(static_cast<redisReply*>(redisCommand(ctx, "UNLINK %b", k->str, k->len)));
      if (del == nullptr) {
        Release(ctx, true);
        return UnavailableError("redis UNLINK failed");
      }
    }
  } while (cursor != "0");
  Release(ctx, false);
  return OkStatus();
}

StoreStats RedisResponseStore::stats() const { return {}; }

}  // namespace strata::cache
