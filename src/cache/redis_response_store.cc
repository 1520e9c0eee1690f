#include "strata/cache/redis_response_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "hiredis_util.h"

namespace strata::cache {
namespace {

using Clock = std::chrono::steady_clock;

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

using Args = std::vector<std::string_view>;

// Queues one command with binary-safe arguments (sent by the next redisGetReply).
bool Append(redisContext* ctx, const Args& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  return redisAppendCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lengths.data()) ==
         REDIS_OK;
}

// The next reply; null when the connection failed (it is then unusable).
Reply NextReply(redisContext* ctx) {
  void* raw = nullptr;
  if (redisGetReply(ctx, &raw) != REDIS_OK) return nullptr;
  return Reply(static_cast<redisReply*>(raw));
}

// One command; null when the connection failed.
Reply Command(redisContext* ctx, const Args& args) {
  return Append(ctx, args) ? NextReply(ctx) : nullptr;
}

// Sends `commands` in one write and reads a reply for each; nothing when the connection failed.
// Every reply is read before returning, so the connection stays in step whatever they hold.
std::optional<std::vector<Reply>> Pipeline(redisContext* ctx, const std::vector<Args>& commands) {
  for (const Args& args : commands) {
    if (!Append(ctx, args)) return std::nullopt;
  }
  std::vector<Reply> replies;
  for (size_t i = 0; i < commands.size(); ++i) {
    replies.push_back(NextReply(ctx));
    if (replies.back() == nullptr) return std::nullopt;
  }
  return replies;
}

bool IsString(const redisReply* r) { return r != nullptr && r->type == REDIS_REPLY_STRING; }

std::string_view Text(const redisReply* r) {
  return (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
          r->type == REDIS_REPLY_ERROR)
             ? std::string_view(r->str, r->len)
             : std::string_view();
}

// What went wrong with `reply` (null: the connection), for an UNAVAILABLE message.
std::string Why(redisContext* ctx, const redisReply* reply) {
  if (reply == nullptr) return ContextError(ctx);
  if (reply->type == REDIS_REPLY_ERROR) return std::string(Text(reply));
  return "unexpected reply of type " + std::to_string(reply->type);
}

// A SCAN / SSCAN page: [cursor, [string...]].
bool IsScanPage(const redisReply* r) {
  return r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
         IsString(r->element[0]) && r->element[1]->type == REDIS_REPLY_ARRAY;
}

// `pattern` matched literally by SCAN's MATCH (a prefix may hold glob characters).
std::string EscapeGlob(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// True for a key (after the prefix) that is an entry, not an index set or the epoch.
bool IsEntryKey(std::string_view rest) {
  return !rest.starts_with(kRedisTagIndex) && !rest.starts_with(kRedisNamespaceIndex) &&
         !rest.starts_with(kRedisPurgeIndex) && rest != kRedisEpochKey;
}

std::string RandomHex() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  uint64_t bits = rng();
  std::string out(16, '0');
  for (char& c : out) {
    c = kHex[bits & 15];
    bits >>= 4;
  }
  return out;
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
                               std::chrono::seconds ttl, const EntryLabels& labels) {
  if (ttl.count() <= 0) return OkStatus();
  STRATA_ASSIGN_OR_RETURN(redisContext * ctx, Acquire());
  const std::string full = options_.key_prefix + key;
  const std::string bytes = EncodeCachedResponse(value);
  const std::string ms = std::to_string(ttl.count() * 1000);
  const std::string secs = std::to_string(ttl.count());
  std::vector<std::string> indexes;
  indexes.push_back(options_.key_prefix + std::string(kRedisNamespaceIndex) +
                    labels.cache_namespace);
  for (const std::string& tag : labels.tags) {
    indexes.push_back(options_.key_prefix + std::string(kRedisTagIndex) + tag);
  }
  // One transaction, one round trip: the entry never exists unindexed, and every index set has
  // an expiry at least the entry's (NX sets one on a new set, GT only ever raises it).
  std::vector<Args> commands;
  commands.push_back({"MULTI"});
  commands.push_back({"SET", full, bytes, "PX", ms});
  for (const std::string& index : indexes) {
    commands.push_back({"SADD", index, full});
    commands.push_back({"EXPIRE", index, secs, "NX"});
    commands.push_back({"EXPIRE", index, secs, "GT"});
  }
  commands.push_back({"EXEC"});
  std::optional<std::vector<Reply>> replies = Pipeline(ctx, commands);
  if (!replies.has_value()) {
    const std::string why = ContextError(ctx);
    Release(ctx, /*broken=*/true);
    return UnavailableError("redis SET failed: " + why);
  }
  Release(ctx, false);  // every reply was read: the connection is in step whatever they say
  const redisReply* exec = replies->back().get();
  if (exec->type != REDIS_REPLY_ARRAY || exec->elements != commands.size() - 2) {
    // EXECABORT (a command was refused when queued: e.g. a Redis older than 7.0) or garbage.
    return UnavailableError("redis SET failed: " + Why(nullptr, exec));
  }
  for (size_t i = 0; i < exec->elements; ++i) {
    if (exec->element[i]->type == REDIS_REPLY_ERROR) {
      return UnavailableError("redis SET failed: " + Why(nullptr, exec->element[i]));
    }
  }
  return OkStatus();
}

Status RedisResponseStore::Fail(redisContext* ctx, std::string_view command,
                                const redisReply* reply) {
  const std::string why = Why(ctx, reply);
  // A reply, even an unexpected one, was read whole: the connection is still in step.
  Release(ctx, /*broken=*/reply == nullptr);
  return UnavailableError("redis " + std::string(command) + " failed: " + why);
}

StatusOr<int64_t> RedisResponseStore::Invalidate(const CacheSelector& selector) {
  switch (selector.kind) {
    case CacheSelector::Kind::kTag:
      return DropIndexed(options_.key_prefix + std::string(kRedisTagIndex) + selector.value);
    case CacheSelector::Kind::kNamespace:
      return DropIndexed(options_.key_prefix + std::string(kRedisNamespaceIndex) + selector.value);
    case CacheSelector::Kind::kAll:
      break;
  }
  return DropAll();
}

StatusOr<int64_t> RedisResponseStore::DropIndexed(const std::string& index) {
  STRATA_ASSIGN_OR_RETURN(redisContext * ctx, Acquire());
  // Moved aside first: an entry stored while this runs lands in a fresh set (and survives, as
  // it was stored after the invalidation began) instead of being dropped from the index here.
  const std::string purge = options_.key_prefix + std::string(kRedisPurgeIndex) + RandomHex();
  Reply renamed = Command(ctx, {"RENAME", index, purge});
  if (renamed != nullptr && renamed->type == REDIS_REPLY_ERROR &&
      Text(renamed.get()).find("no such key") != std::string_view::npos) {
    Release(ctx, false);
    return int64_t{0};  // nothing stored under it (or all of it expired)
  }
  if (renamed == nullptr || renamed->type != REDIS_REPLY_STATUS) {
    return Fail(ctx, "RENAME", renamed.get());
  }
  Reply size = Command(ctx, {"SCARD", purge});
  if (size != nullptr && size->type == REDIS_REPLY_ERROR &&
      Text(size.get()).starts_with("WRONGTYPE")) {  // not ours: nothing can use it
    Reply del = Command(ctx, {"UNLINK", purge});
    Release(ctx, /*broken=*/del == nullptr);
    return DataLossError("the index key " + index + " did not hold a set; it was deleted");
  }
  if (size == nullptr || size->type != REDIS_REPLY_INTEGER) return Fail(ctx, "SCARD", size.get());
  const int64_t found = static_cast<int64_t>(size->integer);
  std::string cursor = "0";
  do {
    Reply page = Command(ctx, {"SSCAN", purge, cursor, "COUNT", "500"});
    if (!IsScanPage(page.get())) return Fail(ctx, "SSCAN", page.get());
    cursor = std::string(Text(page->element[0]));
    const redisReply* members = page->element[1];
    Args unlink = {"UNLINK"};
    for (size_t i = 0; i < members->elements; ++i) {
      const redisReply* m = members->element[i];
      // Only keys under our prefix: a set someone else planted must not delete their keys.
      if (IsString(m) && Text(m).starts_with(options_.key_prefix)) unlink.push_back(Text(m));
    }
    if (unlink.size() > 1) {
      Reply del = Command(ctx, unlink);
      if (del == nullptr || del->type != REDIS_REPLY_INTEGER) return Fail(ctx, "UNLINK", del.get());
    }
  } while (cursor != "0");
  Reply del = Command(ctx, {"UNLINK", purge});
  if (del == nullptr || del->type != REDIS_REPLY_INTEGER) return Fail(ctx, "UNLINK", del.get());
  Release(ctx, false);
  return found;
}

StatusOr<int64_t> RedisResponseStore::DropAll() {
  STRATA_ASSIGN_OR_RETURN(redisContext * ctx, Acquire());
  const std::string pattern = EscapeGlob(options_.key_prefix) + "*";
  const std::string_view prefix = options_.key_prefix;
  int64_t entries = 0;
  std::string cursor = "0";
  do {
    Reply page = Command(ctx, {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!IsScanPage(page.get())) return Fail(ctx, "SCAN", page.get());
    cursor = std::string(Text(page->element[0]));
    const redisReply* keys = page->element[1];
    Args unlink = {"UNLINK"};
    for (size_t i = 0; i < keys->elements; ++i) {
      const redisReply* k = keys->element[i];
      if (!IsString(k) || !Text(k).starts_with(prefix)) continue;
      const std::string_view rest = Text(k).substr(prefix.size());
      if (rest == kRedisEpochKey) continue;  // the epoch outlives a clear (see the header)
      if (IsEntryKey(rest)) ++entries;
      unlink.push_back(Text(k));
    }
    if (unlink.size() > 1) {
      Reply del = Command(ctx, unlink);
      if (del == nullptr || del->type != REDIS_REPLY_INTEGER) return Fail(ctx, "UNLINK", del.get());
    }
  } while (cursor != "0");
  Release(ctx, false);
  return entries;
}

Status RedisResponseStore::Clear() { return DropAll().status(); }

StoreStats RedisResponseStore::stats() const { return {}; }

}  // namespace strata::cache
