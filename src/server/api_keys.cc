#include "strata/server/api_keys.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <span>
#include <sstream>
#include <utility>

#include "strata/cache/response_key.h"
#include "strata/common/constant_time.h"

namespace strata::server {
namespace {

constexpr size_t kMaxNameBytes = 64;
constexpr int64_t kMaxLimit = int64_t{1} << 40;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

bool IsHex64(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const Status& Unauthenticated() {
  static const Status status(StatusCode::kUnauthenticated,
                             "a valid API key is required: 'authorization: Bearer <key>'");
  return status;
}

}  // namespace

StatusOr<std::vector<ApiKeyEntry>> ParseApiKeys(std::string_view text) {
  std::vector<ApiKeyEntry> entries;
  std::set<std::string> names;
  std::set<std::string> hashes;
  size_t line_number = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++line_number;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::vector<std::string_view> words = Words(line);
    if (words.empty()) continue;
    const std::string where = "API keys line " + std::to_string(line_number) + ": ";
    if (words.size() < 2) {
      return InvalidArgumentError(where + "expected 'NAME SHA256HEX [rpm=N] [tpm=N] [streams=N]'");
    }
    ApiKeyEntry entry;
    if (words[0].size() > kMaxNameBytes ||
        !std::all_of(words[0].begin(), words[0].end(), IsNameChar)) {
      return InvalidArgumentError(where +
                                  "the name must be 1 to 64 letters, digits, '.', '_' or "
                                  "'-'");
    }
    entry.name = std::string(words[0]);
    if (!IsHex64(words[1])) {
      return InvalidArgumentError(where +
                                  "the key's SHA-256 must be 64 hex digits (the file "
                                  "holds hashes, never keys)");
    }
    entry.sha256_hex = std::string(words[1]);
    std::transform(
        entry.sha256_hex.begin(), entry.sha256_hex.end(), entry.sha256_hex.begin(),
        [](char c) { return static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c); });
    for (size_t i = 2; i < words.size(); ++i) {
      const size_t eq = words[i].find('=');
      const std::string_view key = words[i].substr(0, eq);
      const std::string_view value =
          eq == std::string_view::npos ? std::string_view() : words[i].substr(eq + 1);
      int64_t* field = key == "rpm"       ? &entry.limits.requests_per_minute
                       : key == "tpm"     ? &entry.limits.tokens_per_minute
                       : key == "streams" ? &entry.limits.max_streams
                                          : nullptr;
      int64_t n = 0;
      bool ok = field != nullptr && !value.empty() && value.size() <= 13;
      for (const char c : value) {
        ok = ok && c >= '0' && c <= '9';
        if (ok) n = n * 10 + (c - '0');
      }
      if (!ok || n > kMaxLimit) {
        return InvalidArgumentError(where + "'" + std::string(words[i].substr(0, 32)) +
                                    "' is not rpm=N, tpm=N or streams=N with N a whole number");
      }
      *field = n;
    }
    if (!names.insert(entry.name).second) {
      return InvalidArgumentError(where + "the name '" + entry.name + "' is given twice");
    }
    if (!hashes.insert(entry.sha256_hex).second) {
      return InvalidArgumentError(where + "this key's hash is given twice");
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

StatusOr<std::vector<ApiKeyEntry>> ReadApiKeysFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read the API keys file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  StatusOr<std::vector<ApiKeyEntry>> entries = ParseApiKeys(text.str());
  if (!entries.ok()) return InvalidArgumentError(path + ": " + entries.status().message());
  return entries;
}

struct ApiKeys::Key {
  ApiKeyEntry entry;
  std::mutex mutex;     // guards the rest
  double requests = 0;  // request bucket (rpm)
  double tokens = 0;    // token bucket (tpm); may go negative after a charge
  double refilled_at = 0;
  int64_t streams = 0;
  bool revoked = false;  // removed by a Reload: admits nothing (guarded by table_mutex_)

  // A key as it starts: full buckets.
  static std::unique_ptr<Key> New(ApiKeyEntry entry, double now) {
    auto key = std::make_unique<Key>();
    key->requests = static_cast<double>(entry.limits.requests_per_minute);
    key->tokens = static_cast<double>(entry.limits.tokens_per_minute);
    key->refilled_at = now;
    key->entry = std::move(entry);
    return key;
  }
};

ApiKeys::ApiKeys(std::vector<ApiKeyEntry> entries, metrics::ServerMetrics* metrics, Clock clock)
    : metrics_(metrics), clock_(clock ? std::move(clock) : Clock(SteadySeconds)) {
  const double now = clock_();
  for (ApiKeyEntry& entry : entries) keys_.push_back(Key::New(std::move(entry), now));
}

ApiKeys::~ApiKeys() = default;

size_t ApiKeys::size() const {
  std::shared_lock<std::shared_mutex> table(table_mutex_);
  return static_cast<size_t>(
      std::count_if(keys_.begin(), keys_.end(), [](const auto& key) { return !key->revoked; }));
}

ApiKeys::ReloadResult ApiKeys::Reload(std::vector<ApiKeyEntry> entries) {
  std::unique_lock<std::shared_mutex> table(table_mutex_);
  const double now = clock_();
  ReloadResult result;
  std::vector<bool> kept(keys_.size(), false);
  for (ApiKeyEntry& entry : entries) {
    auto it = std::find_if(keys_.begin(), keys_.end(),
                           [&](const auto& key) { return key->entry.name == entry.name; });
    if (it == keys_.end()) {
      keys_.push_back(Key::New(std::move(entry), now));
      kept.push_back(true);
      ++result.added;
      continue;
    }
    Key& key = **it;
    kept[static_cast<size_t>(it - keys_.begin())] = true;
    const ApiKeyLimits& old = key.entry.limits;
    const ApiKeyLimits& now_limits = entry.limits;
    const bool changed = key.revoked || key.entry.sha256_hex != entry.sha256_hex ||
                         old.requests_per_minute != now_limits.requests_per_minute ||
                         old.tokens_per_minute != now_limits.tokens_per_minute ||
                         old.max_streams != now_limits.max_streams;
    if (!changed) continue;
    std::lock_guard<std::mutex> lock(key.mutex);
    RefillLocked(key, now);
    // A bucket that had no limit starts full; one that had keeps what is left, within the new.
    const auto rebase = [](double level, int64_t before, int64_t after) {
      return before <= 0 ? static_cast<double>(after) : std::min(level, static_cast<double>(after));
    };
    key.requests = rebase(key.requests, old.requests_per_minute, now_limits.requests_per_minute);
    key.tokens = rebase(key.tokens, old.tokens_per_minute, now_limits.tokens_per_minute);
    key.entry = std::move(entry);
    key.revoked = false;
    ++result.changed;
  }
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (!kept[i] && !keys_[i]->revoked) {
      keys_[i]->revoked = true;
      ++result.removed;
    }
  }
  return result;
}

void ApiKeys::RefillLocked(Key& key, double now) {
  const double elapsed = std::max(0.0, now - key.refilled_at);
  key.refilled_at = now;
  const ApiKeyLimits& l = key.entry.limits;
  key.requests = std::min<double>(static_cast<double>(l.requests_per_minute),
                                  key.requests + elapsed * l.requests_per_minute / 60.0);
  key.tokens = std::min<double>(static_cast<double>(l.tokens_per_minute),
                                key.tokens + elapsed * l.tokens_per_minute / 60.0);
}

KeyAdmission ApiKeys::Admit(std::string_view authorization, bool generation) {
  KeyAdmission out;
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) {
    out.status = Unauthenticated();
    return out;
  }
  const std::string_view presented = authorization.substr(kBearer.size());
  const std::string hash = cache::Sha256Hex(
      std::span(reinterpret_cast<const uint8_t*>(presented.data()), presented.size()));
  std::shared_lock<std::shared_mutex> table(table_mutex_);
  // Every stored hash is compared, whichever matches.
  size_t found = keys_.size();
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (ConstantTimeEquals(hash, keys_[i]->entry.sha256_hex) && !keys_[i]->revoked) found = i;
  }
  if (presented.empty() || found == keys_.size()) {
    out.status = Unauthenticated();
    return out;
  }
  Key& key = *keys_[found];
  const ApiKeyLimits& limits = key.entry.limits;
  std::string_view refused;  // the limit that refused the call
  double wait_seconds = 0;
  {
    std::lock_guard<std::mutex> lock(key.mutex);
    RefillLocked(key, clock_());
    if (limits.requests_per_minute > 0 && key.requests < 1.0) {
      refused = "requests";
      wait_seconds = (1.0 - key.requests) * 60.0 / static_cast<double>(limits.requests_per_minute);
    } else if (generation && limits.tokens_per_minute > 0 && key.tokens <= 0.0) {
      refused = "tokens";
      wait_seconds = (1.0 - key.tokens) * 60.0 / static_cast<double>(limits.tokens_per_minute);
    } else if (generation && limits.max_streams > 0 && key.streams >= limits.max_streams) {
      refused = "streams";
      wait_seconds = 1.0;  // when one ends is unknown
    } else {
      if (limits.requests_per_minute > 0) key.requests -= 1.0;
      if (generation) ++key.streams;
    }
  }
  if (!refused.empty()) {
    metrics_->CountKeyRefusal(key.entry.name, refused);
    out.retry_after_seconds = static_cast<int>(std::min(3600.0, std::ceil(wait_seconds)));
    out.retry_after_seconds = std::max(out.retry_after_seconds, 1);
    const std::string what =
        refused == "requests" ? std::to_string(limits.requests_per_minute) + " calls per minute"
        : refused == "tokens" ? std::to_string(limits.tokens_per_minute) + " tokens per minute"
                              : std::to_string(limits.max_streams) + " calls at once";
    out.status =
        ResourceExhaustedError("this API key's limit of " + what + " is reached; retry in " +
                               std::to_string(out.retry_after_seconds) + " s");
    return out;
  }
  metrics_->CountKeyRequest(key.entry.name);
  out.lease = std::shared_ptr<ApiKeyLease>(new ApiKeyLease(this, found, generation));
  return out;
}

void ApiKeys::Release(size_t index) {
  std::shared_lock<std::shared_mutex> table(table_mutex_);
  Key& key = *keys_[index];
  std::lock_guard<std::mutex> lock(key.mutex);
  --key.streams;
}

void ApiKeys::Charge(size_t index, int64_t prompt_tokens, int64_t completion_tokens) {
  std::shared_lock<std::shared_mutex> table(table_mutex_);
  Key& key = *keys_[index];
  metrics_->CountKeyTokens(key.entry.name, prompt_tokens, completion_tokens);
  if (key.entry.limits.tokens_per_minute <= 0) return;
  std::lock_guard<std::mutex> lock(key.mutex);
  RefillLocked(key, clock_());
  key.tokens -= static_cast<double>(prompt_tokens + completion_tokens);
}

ApiKeyLease::~ApiKeyLease() { ReleaseStream(); }

void ApiKeyLease::ReleaseStream() {
  if (holds_stream_.exchange(false)) keys_->Release(index_);
}

const std::string& ApiKeyLease::key_name() const {
  // A key keeps its name through reloads, and its Key never moves.
  std::shared_lock<std::shared_mutex> table(keys_->table_mutex_);
  return keys_->keys_[index_]->entry.name;
}

void ApiKeyLease::End(int64_t prompt_tokens, int64_t completion_tokens) {
  keys_->Charge(index_, prompt_tokens, completion_tokens);
  ReleaseStream();
}

}  // namespace strata::server
