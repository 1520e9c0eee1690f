#include "strata/cache/caching_submitter.h"

#include <algorithm>
#include <utility>

#include "strata/cache/response_key.h"

namespace strata::cache {

using engine::RequestId;
using engine::RequestStream;
using engine::StreamChunk;
using Clock = std::chrono::steady_clock;

namespace {

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void Append(const StreamChunk& c, CachedResponse* so_far) {
  so_far->token_ids.insert(so_far->token_ids.end(), c.token_ids.begin(), c.token_ids.end());
  so_far->text += c.text;
  so_far->logprobs.insert(so_far->logprobs.end(), c.logprobs.begin(), c.logprobs.end());
}

}  // namespace

// One client of a flight: its own stream, fed in order. The push lock is recursive because a
// push runs the consumer's listener, which may cancel (and so push the final chunk) at once.
struct CachingSubmitter::Member {
  std::shared_ptr<RequestStream> out;
  bool leader = false;
  Clock::time_point submitted;
  std::recursive_mutex push_mutex;
  bool closed = false;  // its last chunk was pushed
  bool got_token = false;
  double ttft_s = 0;

  void Push(StreamChunk chunk) {
    std::lock_guard<std::recursive_mutex> lock(push_mutex);
    if (closed) return;
    if (!got_token && !chunk.token_ids.empty()) {
      got_token = true;
      ttft_s = SecondsSince(submitted);
    }
    chunk.from_cache = !leader;  // it computed nothing itself
    if (chunk.finish_reason.has_value()) {
      closed = true;
      if (!leader) {  // timing from its own submit
        chunk.timing.queue_seconds = 0;
        chunk.timing.time_to_first_token_seconds = ttft_s;
        chunk.timing.total_seconds = SecondsSince(submitted);
      }
    }
    out->Push(std::move(chunk));
  }
};

// Identical requests sharing one computation of the wrapped submitter.
struct CachingSubmitter::Flight {
  std::string key;
  std::chrono::seconds ttl{0};
  std::shared_ptr<RequestStream> inner;  // null until the wrapped Submit returned
  RequestId inner_id = 0;
  bool abandoned = false;  // every member left: cancelled, nothing stored
  bool done = false;       // the last chunk arrived
  std::vector<std::shared_ptr<Member>> members;
  CachedResponse so_far;
  std::mutex deliver_mutex;  // one fan-out at a time, so members see chunks in order
};

CachingSubmitter::CachingSubmitter(engine::RequestSubmitter* inner,
                                   std::vector<ResponseStore*> tiers, CachingOptions options,
                                   CacheObserver* observer)
    : inner_(inner), tiers_(std::move(tiers)), options_(std::move(options)), observer_(observer) {
  if (std::any_of(tiers_.begin(), tiers_.end(), [](ResponseStore* t) { return t->blocking(); })) {
    writer_ = std::thread([this] { WriterLoop(); });
  }
}

CachingSubmitter::~CachingSubmitter() {
  {
    std::lock_guard<std::mutex> lock(writer_mutex_);
    stopping_ = true;  // stores still queued are dropped: a cache may lose entries
  }
  writer_wake_.notify_all();
  if (writer_.joinable()) writer_.join();
}

void CachingSubmitter::WriterLoop() {
  for (;;) {
    PendingWrite w;
    {
      std::unique_lock<std::mutex> lock(writer_mutex_);
      writer_wake_.wait(lock, [this] { return stopping_ || !writes_.empty(); });
      if (stopping_) return;
      w = std::move(writes_.front());
      writes_.pop_front();
    }
    Status put = w.tier->Put(w.key, w.value, w.ttl);
    if (!put.ok()) observer_->OnTierError(w.tier->tier(), put.message());
  }
}

StatusOr<std::shared_ptr<RequestStream>> CachingSubmitter::Submit(engine::Request request) {
  if (!request.cache.cacheable) return inner_->Submit(std::move(request));
  const Clock::time_point start = Clock::now();
  const std::string key =
      ResponseKey({options_.model_digest, epoch_.load(), request.cache.cache_namespace,
                   request.prompt, &request.params});
  std::chrono::seconds ttl = options_.default_ttl;
  if (request.cache.ttl_seconds > 0 && request.cache.ttl_seconds < ttl.count()) {
    ttl = std::chrono::seconds(request.cache.ttl_seconds);
  }

  // Joins the flight for `key` under mutex_: the new member first gets what was produced.
  auto join = [&](const std::shared_ptr<Flight>& flight) {
    auto member = std::make_shared<Member>();
    member->out = std::make_shared<RequestStream>(NextId());
    member->submitted = start;
    if (!flight->so_far.token_ids.empty() || !flight->so_far.text.empty()) {
      StreamChunk chunk;
      chunk.token_ids = flight->so_far.token_ids;
      chunk.text = flight->so_far.text;
      chunk.logprobs = flight->so_far.logprobs;
      chunk.time = Clock::now();
      member->Push(std::move(chunk));
    }
    flight->members.push_back(member);
    members_[member->out->id()] = flight;
    observer_->OnLookup("inflight", LookupResult::kHit, SecondsSince(start));
    return member->out;
  };

  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = flights_.find(key); it != flights_.end()) return join(it->second);
  }

  for (size_t i = 0; i < tiers_.size(); ++i) {
    const Clock::time_point t = Clock::now();
    StatusOr<CachedResponse> got = tiers_[i]->Get(key);
    const double took = SecondsSince(t);
    if (got.ok()) {
      observer_->OnLookup(tiers_[i]->tier(), LookupResult::kHit, took);
      for (size_t j = 0; j < i; ++j) {  // copy into the faster tiers
        Status put = tiers_[j]->Put(key, *got, ttl);
        if (!put.ok()) observer_->OnTierError(tiers_[j]->tier(), put.message());
      }
      observer_->OnTokensServed(static_cast<int64_t>(got->token_ids.size()));
      return Replay(request, *got, SecondsSince(start));
    }
    if (got.status().code() == StatusCode::kNotFound) {
      observer_->OnLookup(tiers_[i]->tier(), LookupResult::kMiss, took);
    } else {
      observer_->OnLookup(tiers_[i]->tier(), LookupResult::kError, took);
      observer_->OnTierError(tiers_[i]->tier(), got.status().message());
    }
  }

  auto flight = std::make_shared<Flight>();
  std::shared_ptr<Member> leader;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = flights_.find(key); it != flights_.end()) return join(it->second);
    flight->key = key;
    flight->ttl = ttl;
    leader = std::make_shared<Member>();
    leader->out = std::make_shared<RequestStream>(NextId());
    leader->leader = true;
    leader->submitted = start;
    flight->members.push_back(leader);
    flights_[key] = flight;
    members_[leader->out->id()] = flight;
  }

  // Outside the lock: the wrapped submitter may push (and so call OnChunks) at once.
  StatusOr<std::shared_ptr<RequestStream>> inner = inner_->Submit(std::move(request));
  std::vector<std::shared_ptr<Member>> orphans;
  bool cancel = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!inner.ok()) {
      if (auto it = flights_.find(key); it != flights_.end() && it->second == flight) {
        flights_.erase(it);
      }
      for (const std::shared_ptr<Member>& m : flight->members) {
        members_.erase(m->out->id());
        if (m != leader) orphans.push_back(m);
      }
      flight->members.clear();
      flight->abandoned = true;
    } else {
      flight->inner = *inner;
      flight->inner_id = (*inner)->id();
      cancel = flight->abandoned;  // every member cancelled while it was being submitted
    }
  }
  if (!inner.ok()) {
    for (const std::shared_ptr<Member>& m : orphans) {  // requests that joined meanwhile
      StreamChunk last;
      last.finish_reason = sampling::FinishReason::kError;
      last.error = inner.status();
      last.time = Clock::now();
      m->Push(std::move(last));
    }
    return inner.status();
  }
  if (cancel) inner_->Cancel(flight->inner_id);
  // A weak reference: the inner stream must not keep its flight alive (the flight holds the
  // stream, so a strong one would be a cycle); the maps own the flight while it runs.
  (*inner)->SetListener([this, weak = std::weak_ptr<Flight>(flight)] {
    if (std::shared_ptr<Flight> f = weak.lock()) OnChunks(f);
  });
  return leader->out;
}

void CachingSubmitter::OnChunks(const std::shared_ptr<Flight>& flight) {
  std::lock_guard<std::mutex> deliver(flight->deliver_mutex);
  std::vector<StreamChunk> chunks;
  std::vector<std::shared_ptr<Member>> members;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    StreamChunk chunk;
    while (!flight->done && flight->inner->Next(&chunk, Clock::duration::zero())) {
      Append(chunk, &flight->so_far);
      if (chunk.finish_reason.has_value()) {
        flight->done = true;
        const sampling::FinishReason reason = *chunk.finish_reason;
        const bool store =
            !flight->abandoned && chunk.error.ok() &&
            (reason == sampling::FinishReason::kStop || reason == sampling::FinishReason::kLength);
        flight->so_far.finish_reason = reason;
        flight->so_far.prompt_tokens = chunk.usage.prompt_tokens;
        // Stored before anyone sees the last chunk, and before the flight is gone: a client
        // that repeats its request at once finds the entry.
        if (store) Store(*flight);
        if (auto it = flights_.find(flight->key); it != flights_.end() && it->second == flight) {
          flights_.erase(it);
        }
        for (const std::shared_ptr<Member>& m : flight->members) members_.erase(m->out->id());
      }
      chunks.push_back(std::move(chunk));
      chunk = StreamChunk();
    }
    members = flight->members;
    if (flight->done) flight->members.clear();
  }
  if (chunks.empty()) return;
  const int64_t joined =
      static_cast<int64_t>(members.size()) -
      std::count_if(members.begin(), members.end(), [](const auto& m) { return m->leader; });
  for (const StreamChunk& c : chunks) {
    for (const std::shared_ptr<Member>& m : members) m->Push(c);
    if (c.finish_reason.has_value() && joined > 0) {
      observer_->OnTokensServed(joined * static_cast<int64_t>(flight->so_far.token_ids.size()));
    }
  }
}

void CachingSubmitter::Store(const Flight& flight) {
  for (ResponseStore* tier : tiers_) {
    if (tier->blocking()) {
      bool queued = false;
      {
        std::lock_guard<std::mutex> lock(writer_mutex_);
        if (writes_.size() < kMaxPendingWrites) {
          writes_.push_back({tier, flight.key, flight.so_far, flight.ttl});
          queued = true;
        }
      }
      if (queued) {
        writer_wake_.notify_one();
      } else {
        observer_->OnTierError(tier->tier(), "store queue full: entry dropped");
      }
      continue;
    }
    Status put = tier->Put(flight.key, flight.so_far, flight.ttl);
    if (!put.ok()) observer_->OnTierError(tier->tier(), put.message());
  }
}

std::shared_ptr<RequestStream> CachingSubmitter::Replay(const engine::Request& request,
                                                        const CachedResponse& hit,
                                                        double lookup_s) {
  auto out = std::make_shared<RequestStream>(NextId());
  StreamChunk chunk;
  chunk.token_ids = hit.token_ids;
  chunk.text = hit.text;
  chunk.logprobs = hit.logprobs;
  chunk.finish_reason = hit.finish_reason;
  chunk.usage.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  chunk.usage.completion_tokens = static_cast<int64_t>(hit.token_ids.size());
  chunk.usage.cached_prompt_tokens = chunk.usage.prompt_tokens;
  chunk.timing.time_to_first_token_seconds = lookup_s;
  chunk.timing.total_seconds = lookup_s;
  chunk.from_cache = true;
  chunk.time = Clock::now();
  out->Push(std::move(chunk));
  return out;
}

void CachingSubmitter::Cancel(RequestId id) {
  if (id < kFirstId) {
    inner_->Cancel(id);
    return;
  }
  std::shared_ptr<Member> member;
  RequestId cancel_inner = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = members_.find(id);
    if (it == members_.end()) return;  // a replayed hit, or already finished
    std::shared_ptr<Flight> flight = it->second;
    members_.erase(it);
    auto& ms = flight->members;
    auto m = std::find_if(ms.begin(), ms.end(), [&](const auto& x) { return x->out->id() == id; });
    if (m == ms.end()) return;
    member = *m;
    ms.erase(m);
    if (ms.empty() && !flight->done) {
      flight->abandoned = true;
      if (auto f = flights_.find(flight->key); f != flights_.end() && f->second == flight) {
        flights_.erase(f);
      }
      if (flight->inner != nullptr) cancel_inner = flight->inner_id;
    }
  }
  StreamChunk last;
  last.finish_reason = sampling::FinishReason::kCancelled;
  last.time = Clock::now();
  member->Push(std::move(last));
  if (cancel_inner != 0) inner_->Cancel(cancel_inner);
}

uint64_t CachingSubmitter::BumpEpoch() { return epoch_.fetch_add(1) + 1; }

Status CachingSubmitter::Clear() {
  Status first;
  for (ResponseStore* tier : tiers_) {
    Status st = tier->Clear();
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

size_t CachingSubmitter::flights_in_progress() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return flights_.size();
}

}  // namespace strata::cache
