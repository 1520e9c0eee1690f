// How many client connections one port holds at once.
//
// A port's acceptor takes a place (Acquire) before it serves a new connection, and the place is
// given back (Release) when that connection closes. While the port is full, Acquire waits, so
// the acceptor stops accepting: connections past the limit wait in the kernel's listen backlog
// (and past that the kernel refuses them) instead of each holding a descriptor, a queue entry
// and memory in the process. This is what a silent or trickling client flood meets. (Go's
// netutil.LimitListener and civetweb's connection queue behave the same way.)
//
// Thread rules: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace strata::server {

class ConnectionGate {
 public:
  struct Hooks {
    std::function<void(int64_t open)> on_change;  // the count after every change
    std::function<void()> on_full;                // a new connection found the port full
  };

  // limit <= 0: no limit (Acquire never waits).
  explicit ConnectionGate(int64_t limit, Hooks hooks = {});

  // Takes a place for a new connection, waiting while the port holds `limit`. Where nobody
  // signals a close (a connection handed to a library), `poll` runs first and then every
  // `poll_interval` while the port is full, and Releases the places of the connections it finds
  // closed. Does not wait after Shut().
  void Acquire(const std::function<void()>& poll = nullptr,
               std::chrono::milliseconds poll_interval = std::chrono::milliseconds(20));
  void Release();

  // The port is closing: Acquire stops waiting (what is accepted now is closed at once).
  void Shut();

  int64_t open() const;
  int64_t limit() const { return limit_; }
  int64_t times_full() const;

 private:
  bool FullLocked() const { return limit_ > 0 && open_ >= limit_ && !shut_; }

  const int64_t limit_;
  const Hooks hooks_;
  mutable std::mutex mutex_;  // guards the rest
  std::condition_variable released_;
  int64_t open_ = 0;
  int64_t times_full_ = 0;
  bool shut_ = false;
};

}  // namespace strata::server
