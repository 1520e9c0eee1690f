#include "strata/cache/redis_invalidation_bus.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <optional>
#include <utility>
#include <vector>

#include "hiredis_util.h"
#include "strata/cache/redis_response_store.h"  // kRedisEpochKey: the store keeps it
#include "strata/common/logging.h"

namespace strata::cache {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int64_t kMaxPollMs = int64_t{1} << 30;  // poll() takes an int

redisReply* AsReply(void* reply) { return static_cast<redisReply*>(reply); }

std::string_view Text(const redisReply* r) {
  return (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
          r->type == REDIS_REPLY_ERROR)
             ? std::string_view(r->str, r->len)
             : std::string_view();
}

// A connected context with `timeout` on connect, reads and writes; null with `error` otherwise.
redisContext* Connect(const RedisInvalidationBusOptions& options, std::string* error) {
  redisContext* ctx =
      redisConnectWithTimeout(options.host.c_str(), options.port, ToTimeval(options.timeout));
  if (ctx == nullptr || ctx->err != 0 ||
      redisSetTimeout(ctx, ToTimeval(options.timeout)) != REDIS_OK) {
    *error = "cannot connect to redis at " + options.host + ":" + std::to_string(options.port) +
             ": " + ContextError(ctx);
    if (ctx != nullptr) redisFree(ctx);
    return nullptr;
  }
  return ctx;
}

// Writes what hiredis holds for `ctx` (each write bounded by the socket's timeout).
bool Flush(redisContext* ctx) {
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(ctx, &done) != REDIS_OK) return false;
  }
  return true;
}

// A decimal uint64: digits only (from_chars takes no sign for an unsigned type), no overflow.
std::optional<uint64_t> ParseDecimal(std::string_view text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

void RedisInvalidationBus::ReplyDeleter::operator()(void* reply) const { freeReplyObject(reply); }

RedisInvalidationBus::RedisInvalidationBus(RedisInvalidationBusOptions options)
    : options_(std::move(options)),
      channel_(options_.channel.empty() ? options_.key_prefix + "invalidate" : options_.channel),
      epoch_key_(options_.key_prefix + std::string(kRedisEpochKey)) {}

RedisInvalidationBus::~RedisInvalidationBus() {
  stop_.store(true);
  if (wake_write_ >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_write_, &byte, 1);
  }
  if (thread_.joinable()) thread_.join();
  if (wake_read_ >= 0) ::close(wake_read_);
  if (wake_write_ >= 0) ::close(wake_write_);
  if (command_ != nullptr) redisFree(command_);
}

RedisInvalidationBus::ReplyPtr RedisInvalidationBus::Command(
    std::initializer_list<std::string_view> args, std::string* error) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  std::lock_guard<std::mutex> lock(command_mutex_);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool kept = command_ != nullptr;
    if (!kept) {
      command_ = Connect(options_, error);
      if (command_ == nullptr) return nullptr;
    }
    void* reply =
        redisCommandArgv(command_, static_cast<int>(argv.size()), argv.data(), lengths.data());
    if (reply != nullptr) return ReplyPtr(reply);
    *error = "redis " + std::string(*args.begin()) + " failed: " + ContextError(command_);
    redisFree(command_);
    command_ = nullptr;
    // A kept connection may have died with an earlier server (a restart): one fresh try.
    if (!kept) break;
  }
  return nullptr;
}

Status RedisInvalidationBus::Publish(const InvalidationEvent& event) {
  const std::string text = EncodeInvalidationEvent(event);
  std::string error;
  ReplyPtr reply = Command({"PUBLISH", channel_, text}, &error);
  if (reply == nullptr) return UnavailableError(error);
  const redisReply* r = AsReply(reply.get());
  if (r->type != REDIS_REPLY_INTEGER) {
    return UnavailableError("redis PUBLISH failed: " +
                            (r->type == REDIS_REPLY_ERROR
                                 ? std::string(Text(r))
                                 : "reply of type " + std::to_string(r->type)));
  }
  return OkStatus();
}

StatusOr<uint64_t> RedisInvalidationBus::Epoch() {
  std::string error;
  ReplyPtr reply = Command({"GET", epoch_key_}, &error);
  if (reply == nullptr) return UnavailableError(error);
  const redisReply* r = AsReply(reply.get());
  if (r->type == REDIS_REPLY_NIL) return uint64_t{0};
  if (r->type == REDIS_REPLY_ERROR && !Text(r).starts_with("WRONGTYPE")) {
    return UnavailableError("redis GET " + epoch_key_ + " failed: " + std::string(Text(r)));
  }
  if (r->type == REDIS_REPLY_STRING) {
    if (std::optional<uint64_t> epoch = ParseDecimal(Text(r))) return *epoch;
  }
  // Someone else's value (or a key of another type): the cache still works, at epoch 0.
  LogWarn("the cache epoch key does not hold a number; using epoch 0 (delete the key to reset it)",
          {{"key", epoch_key_}});
  return uint64_t{0};
}

StatusOr<uint64_t> RedisInvalidationBus::IncrementEpoch() {
  std::string error;
  ReplyPtr reply = Command({"INCR", epoch_key_}, &error);
  if (reply == nullptr) return UnavailableError(error);
  const redisReply* r = AsReply(reply.get());
  if (r->type == REDIS_REPLY_ERROR) {
    return UnavailableError("redis INCR " + epoch_key_ + " failed: " + std::string(Text(r)) +
                            " (a key that does not hold a number must be deleted)");
  }
  if (r->type != REDIS_REPLY_INTEGER || r->integer < 0) {
    return UnavailableError("redis INCR " + epoch_key_ + " did not return an epoch (" +
                            std::to_string(r->type == REDIS_REPLY_INTEGER ? r->integer : -1) +
                            "); delete the key to reset it");
  }
  return static_cast<uint64_t>(r->integer);
}

void RedisInvalidationBus::Subscribe(Handler handler) {
  STRATA_CHECK(!thread_.joinable());  // once
  int fds[2] = {-1, -1};
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    LogError(
        "cannot create the invalidation bus's wake-up pipe; invalidations from other "
        "replicas will not reach this one",
        {{"errno", std::to_string(errno)}});
    return;
  }
  wake_read_ = fds[0];
  wake_write_ = fds[1];
  handler_ = std::move(handler);
  thread_ = std::thread([this] { Run(); });
}

bool RedisInvalidationBus::WaitForStop(milliseconds wait) {
  if (stop_.load()) return true;
  pollfd fd{wake_read_, POLLIN, 0};
  const int n = ::poll(&fd, 1, static_cast<int>(std::clamp<int64_t>(wait.count(), 0, kMaxPollMs)));
  return stop_.load() || (n > 0 && fd.revents != 0);
}

void RedisInvalidationBus::Run() {
  bool outage_logged = false;  // one line per outage, not one per retry
  while (!stop_.load()) {
    bool subscribed = false;
    const std::string why = Listen(&subscribed);
    if (stop_.load()) break;
    if (subscribed || !outage_logged) {
      LogWarn("invalidation bus has no redis connection; retrying",
              {{"channel", channel_}, {"reason", why}});
    }
    outage_logged = true;
    if (WaitForStop(options_.reconnect_backoff)) break;
  }
}

std::string RedisInvalidationBus::Listen(bool* subscribed) {
  std::string error;
  redisContext* ctx = Connect(options_, &error);
  if (ctx == nullptr) return error;
  // Frees the context on every way out.
  std::unique_ptr<redisContext, void (*)(redisContext*)> owner(ctx, redisFree);
  const char* argv[] = {"SUBSCRIBE", channel_.data()};
  const size_t lengths[] = {9, channel_.size()};
  if (redisAppendCommandArgv(ctx, 2, argv, lengths) != REDIS_OK || !Flush(ctx)) {
    return "SUBSCRIBE failed: " + ContextError(ctx);
  }
  // Waiting for a reply (SUBSCRIBE's, then a health-check PING's) until `deadline`.
  // SUBSCRIBE is a command like any other (`timeout`); a PING gets a whole interval, as a
  // connection given up for a slow moment would lose what is published until the next one.
  bool awaiting = true;
  Clock::time_point deadline = Clock::now() + options_.timeout;
  Clock::time_point last_traffic = Clock::now();
  while (!stop_.load()) {
    void* raw = nullptr;
    if (redisReaderGetReply(ctx->reader, &raw) != REDIS_OK) return "garbled reply from redis";
    if (raw != nullptr) {  // a whole reply was buffered: handle it before waiting again
      ReplyPtr owned(raw);
      const redisReply* r = AsReply(raw);
      if (r->type == REDIS_REPLY_ERROR) return "redis refused: " + std::string(Text(r));
      if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
          r->element[0]->type != REDIS_REPLY_STRING) {
        continue;  // nothing a subscribed connection should get; harmless
      }
      const std::string_view kind = Text(r->element[0]);
      if (kind == "subscribe" && !*subscribed) {
        awaiting = false;
        // Subscribed first, epoch read second: a bump in between arrives as a message too.
        StatusOr<uint64_t> epoch = Epoch();
        if (!epoch.ok()) return "reading the epoch failed: " + epoch.status().message();
        InvalidationEvent event;
        event.kind = InvalidationEvent::Kind::kEpoch;
        event.epoch = *epoch;
        *subscribed = true;
        if (subscriptions_.fetch_add(1) > 0) {
          LogInfo("invalidation bus reconnected", {{"channel", channel_}});
        }
        handler_(event);
      } else if (kind == "pong") {
        awaiting = false;
      } else if (kind == "message" && r->elements == 3 &&
                 r->element[2]->type == REDIS_REPLY_STRING) {
        StatusOr<InvalidationEvent> event = DecodeInvalidationEvent(Text(r->element[2]));
        if (event.ok()) {
          handler_(*event);
        } else {
          if (ignored_.fetch_add(1) == 0) {  // once: a stray publisher could flood the log
            LogWarn("ignoring a message on the invalidation channel that is not an event",
                    {{"channel", channel_}, {"error", event.status().message()}});
          }
        }
      }
      continue;
    }
    const Clock::time_point now = Clock::now();
    const Clock::time_point until =
        awaiting ? deadline : last_traffic + options_.health_check_interval;
    const auto wait = std::chrono::ceil<milliseconds>(until - now);
    pollfd fds[2] = {{ctx->fd, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    const int n =
        ::poll(fds, 2, static_cast<int>(std::clamp<int64_t>(wait.count(), 0, kMaxPollMs)));
    if (n < 0) {
      if (errno == EINTR) continue;
      return "poll failed: errno " + std::to_string(errno);
    }
    if (fds[1].revents != 0) break;  // stop
    if (n == 0) {
      if (awaiting) return "no reply from redis within the timeout";
      // Quiet for a while: make sure the server is still there (a peer that vanished without
      // closing the connection would otherwise never be noticed).
      const char* ping[] = {"PING"};
      const size_t ping_length[] = {4};
      if (redisAppendCommandArgv(ctx, 1, ping, ping_length) != REDIS_OK || !Flush(ctx)) {
        return "PING failed: " + ContextError(ctx);
      }
      awaiting = true;
      deadline = Clock::now() + options_.health_check_interval;
      continue;
    }
    // Readable (or closed: then the read reports it). poll said so, so read() will not block.
    if (redisBufferRead(ctx) != REDIS_OK) return ContextError(ctx);
    last_traffic = Clock::now();
  }
  return "stopped";
}

}  // namespace strata::cache
