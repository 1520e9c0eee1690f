// API keys: who may call the server, and how much (--api-keys-file).
//
// The keys file holds one key per line, hashed: `NAME SHA256HEX [rpm=N] [tpm=N] [streams=N]`
// ('#' starts a comment). NAME (letters, digits, '.', '_', '-'; at most 64) is what logs and
// metrics show; SHA256HEX is the SHA-256 of the key in hex (`printf %s "$KEY" | sha256sum`), so
// the file never holds a key. The limits, each optional (absent or 0: none): rpm, calls per
// minute; tpm, prompt + completion tokens of generation calls per minute; streams, generation
// calls in flight at once.
//
// A call presents its key as `authorization: Bearer KEY` (gRPC metadata or HTTP header). Admit
// hashes what was presented and compares it with every stored hash in constant time; a missing,
// malformed or unknown key is UNAUTHENTICATED with one message that reveals nothing else. A key
// over a limit is RESOURCE_EXHAUSTED with the seconds to wait (rpm and tpm are token buckets
// that refill evenly over the minute and start full; a generation call is charged its tokens
// when it ends, and the next call of a key in debt waits until the bucket is positive again).
// The key itself is never logged nor kept: only its name and hash.
//
// Reload replaces the entries without a restart (the server calls it on SIGHUP and when the
// file changes): keys are matched by name, so a key that stays keeps its buckets and calls in
// flight (its hash and limits may change); a key that is gone is refused from then on, its
// calls in flight finishing normally; a new key starts with full buckets.
//
// Thread rules: every method may be called from any thread; `metrics` must outlive the keys.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"
#include "strata/metrics/server_metrics.h"

namespace strata::server {

struct ApiKeyLimits {
  int64_t requests_per_minute = 0;  // 0: no limit
  int64_t tokens_per_minute = 0;
  int64_t max_streams = 0;
};

struct ApiKeyEntry {
  std::string name;
  std::string sha256_hex;  // lowercase
  ApiKeyLimits limits;
};

// The entries of a keys file; INVALID_ARGUMENT naming the line for anything malformed or a name
// or hash given twice.
StatusOr<std::vector<ApiKeyEntry>> ParseApiKeys(std::string_view text);

// ParseApiKeys of the file at `path`; NOT_FOUND when it cannot be read.
StatusOr<std::vector<ApiKeyEntry>> ReadApiKeysFile(const std::string& path);

class ApiKeys;

// An admitted call's hold on its key: the stream slot and the tokens to charge when the call
// ends. End releases the slot before the client hears the call's end (so a client's next call
// finds it free); the destructor releases it for a call that never got that far.
class ApiKeyLease {
 public:
  ~ApiKeyLease();
  ApiKeyLease(const ApiKeyLease&) = delete;
  ApiKeyLease& operator=(const ApiKeyLease&) = delete;

  const std::string& key_name() const;
  // The call ended: charges its tokens to the key and releases its stream slot (once).
  void End(int64_t prompt_tokens, int64_t completion_tokens);

 private:
  friend class ApiKeys;
  ApiKeyLease(ApiKeys* keys, size_t index, bool holds_stream)
      : keys_(keys), index_(index), holds_stream_(holds_stream) {}
  void ReleaseStream();
  ApiKeys* keys_;
  size_t index_;
  std::atomic<bool> holds_stream_;
};

struct KeyAdmission {
  Status status;                       // OK, UNAUTHENTICATED or RESOURCE_EXHAUSTED
  int retry_after_seconds = 0;         // RESOURCE_EXHAUSTED: when a retry may pass
  std::shared_ptr<ApiKeyLease> lease;  // OK: hold it for the call's life
};

class ApiKeys {
 public:
  // Seconds on a monotonic clock (tests pass their own).
  using Clock = std::function<double()>;

  ApiKeys(std::vector<ApiKeyEntry> entries, metrics::ServerMetrics* metrics, Clock clock = {});
  ~ApiKeys();

  // Admits one call presenting `authorization` (the header's whole value). A `generation` call
  // also needs a stream slot and a positive token bucket.
  KeyAdmission Admit(std::string_view authorization, bool generation);

  // What a Reload changed, by key name.
  struct ReloadResult {
    size_t added = 0;
    size_t changed = 0;  // hash or limits
    size_t removed = 0;
  };
  ReloadResult Reload(std::vector<ApiKeyEntry> entries);

  // Keys that admit calls.
  size_t size() const;

 private:
  friend class ApiKeyLease;
  struct Key;
  void Release(size_t index);
  void Charge(size_t index, int64_t prompt_tokens, int64_t completion_tokens);
  void RefillLocked(Key& key, double now);

  // Guards the list (shared: Admit, leases; exclusive: Reload). A key is never erased, so a
  // lease's index stays valid; a removed one is marked revoked.
  mutable std::shared_mutex table_mutex_;
  std::vector<std::unique_ptr<Key>> keys_;
  metrics::ServerMetrics* metrics_;
  Clock clock_;
};

}  // namespace strata::server
