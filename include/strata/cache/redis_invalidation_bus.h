// RedisInvalidationBus: the InvalidationBus of replicas that share a Redis (the one their
// RedisResponseStore uses). Events travel on a pub/sub channel ("<key_prefix>invalidate" by
// default) as EncodeInvalidationEvent text; the epoch is the integer at "<key_prefix>epoch"
// (GET, INCR), which RedisResponseStore::Clear leaves in place.
//
// Commands (Publish, Epoch, IncrementEpoch) run on one connection kept between calls, each
// bounded by `timeout`; a call whose kept connection turns out dead (Redis restarted) retries
// once on a fresh one, so a publish or an increment may reach Redis twice (harmless: a second
// invalidation drops nothing more, a second increment only moves the epoch on further).
// A failure is UNAVAILABLE.
//
// Subscribe starts the bus's thread, which holds its own SUBSCRIBEd connection. It waits with
// poll() on that socket and on a wake-up pipe (hiredis cannot time out a read on a subscribed
// connection without making it unusable), so the destructor stops it at once, wherever it is
// waiting; the longest it can be busy is a connect or an Epoch() call, one or two `timeout`s,
// or the handler. After `health_check_interval` without traffic it sends PING, and counts the
// connection lost when no reply comes within another interval (a peer that vanished without
// closing the connection; generous, as events published while it reconnects are lost).
// After a lost connection it reconnects every `reconnect_backoff`. Once (re)subscribed it reads
// the epoch and calls the handler with a kEpoch event carrying it, before any event received
// on that connection, so a replica catches up on what it missed; the handler should keep the
// largest epoch it has seen (two replicas that bump at once may publish out of order).
// A message that does not decode is ignored (counted, and logged the first time).
//
// Thread rules: every method from any thread; the handler runs on the bus's thread only, one
// event at a time, and must not call back into the bus. Destroy the bus before what the
// handler uses.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "strata/cache/invalidation_bus.h"

struct redisContext;

namespace strata::cache {

struct RedisInvalidationBusOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::chrono::milliseconds timeout{200};  // connect, and each command's round trip
  std::string key_prefix = "strata:";      // the same as the RedisResponseStore's
  std::string channel;                     // "" means "<key_prefix>invalidate"
  std::chrono::milliseconds reconnect_backoff{1000};
  std::chrono::milliseconds health_check_interval{5000};
};

class RedisInvalidationBus final : public InvalidationBus {
 public:
  explicit RedisInvalidationBus(RedisInvalidationBusOptions options);
  ~RedisInvalidationBus() override;  // stops and joins the bus's thread
  RedisInvalidationBus(const RedisInvalidationBus&) = delete;
  RedisInvalidationBus& operator=(const RedisInvalidationBus&) = delete;

  void Subscribe(Handler handler) override;  // once; the handler is called from then on
  Status Publish(const InvalidationEvent& event) override;
  StatusOr<uint64_t> Epoch() override;  // a missing key is 0, and so is garbage (logged)
  StatusOr<uint64_t> IncrementEpoch() override;

  // Messages on the channel that did not decode, since construction.
  int64_t ignored_messages() const { return ignored_.load(); }
  // Times the thread subscribed and delivered the epoch (1 + reconnections).
  int64_t subscriptions() const { return subscriptions_.load(); }

 private:
  struct ReplyDeleter {
    void operator()(void* reply) const;
  };
  using ReplyPtr = std::unique_ptr<void, ReplyDeleter>;
  // Runs `args` on the kept command connection (see above); null after a failure, with `error`.
  ReplyPtr Command(std::initializer_list<std::string_view> args, std::string* error);

  void Run();  // the bus's thread
  // One subscribed connection, until it is lost or stop is asked; returns why it ended, and
  // sets `subscribed` once the epoch was delivered on it.
  std::string Listen(bool* subscribed);
  // Waits up to `wait` for stop; true when it was asked.
  bool WaitForStop(std::chrono::milliseconds wait);

  const RedisInvalidationBusOptions options_;
  const std::string channel_;
  const std::string epoch_key_;

  std::mutex command_mutex_;
  redisContext* command_ = nullptr;  // guarded by command_mutex_

  Handler handler_;  // set by Subscribe before the thread starts; then the thread's
  std::thread thread_;
  int wake_read_ = -1;  // the wake-up pipe: the destructor writes, the thread polls
  int wake_write_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> ignored_{0};
  std::atomic<int64_t> subscriptions_{0};
};

}  // namespace strata::cache
