#include "strata/cache/caching_submitter.h"

#include <algorithm>
#include <utility>

#include "strata/cache/response_key.h"
#include "strata/common/check.h"

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
      if (!leader) {  // timing from its own submit; no engine stage of its own
        engine::RequestTiming own;
        own.time_to_first_token_seconds = ttft_s;
        own.total_seconds = SecondsSince(submitted);
        chunk.timing = std::move(own);
      }
    }
    out->Push(std::move(chunk));
  }
};

// What a request's semantic lookup computed, kept to index its own answer.
struct CachingSubmitter::SemanticLookup {
  std::string text;              // the request's compared text
  std::string context;           // SemanticContextKey
  std::vector<float> embedding;  // empty: no semantic lookup (or it failed)
};

// Identical requests sharing one computation of the wrapped submitter.
struct CachingSubmitter::Flight {
  std::string key;
  std::chrono::seconds ttl{0};
  uint64_t generation = 0;  // generation_ when it started: stored only if still current
  SemanticLookup semantic;
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
  STRATA_CHECK(options_.semantic.embedder == nullptr ||
               (options_.semantic.index != nullptr &&
                options_.semantic.index->dimension() == options_.semantic.embedder->dimension()));
  if (options_.semantic.embedder != nullptr ||
      std::any_of(tiers_.begin(), tiers_.end(), [](ResponseStore* t) { return t->blocking(); })) {
    writer_ = std::thread([this] { WriterLoop(); });
  }
  if (options_.bus != nullptr) {
    // The shared epoch now (bounded by the bus's timeout; the bus delivers it again whenever it
    // (re)connects), then every replica's invalidations.
    if (StatusOr<uint64_t> e = options_.bus->Epoch(); e.ok()) epoch_.store(*e);
    options_.bus->Subscribe([this](const InvalidationEvent& event) { OnInvalidationEvent(event); });
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
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(writer_mutex_);
      writer_wake_.wait(lock, [this] { return stopping_ || !writes_.empty(); });
      if (stopping_) return;
      task = std::move(writes_.front());
      writes_.pop_front();
    }
    task();
  }
}

bool CachingSubmitter::Defer(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(writer_mutex_);
    if (writes_.size() >= kMaxPendingWrites) return false;
    writes_.push_back(std::move(task));
  }
  writer_wake_.notify_one();
  return true;
}

std::optional<CachedResponse> CachingSubmitter::Lookup(const std::string& key,
                                                       std::string_view cache,
                                                       std::chrono::seconds ttl, bool* all_missed,
                                                       std::string_view* hit_tier) {
  *all_missed = true;
  for (size_t i = 0; i < tiers_.size(); ++i) {
    const Clock::time_point t = Clock::now();
    StatusOr<CachedResponse> got = tiers_[i]->Get(key);
    const double took = SecondsSince(t);
    if (got.ok()) {
      *all_missed = false;
      if (hit_tier != nullptr) *hit_tier = tiers_[i]->tier();
      if (!cache.empty()) observer_->OnLookup(cache, tiers_[i]->tier(), LookupResult::kHit, took);
      for (size_t j = 0; j < i; ++j) {  // copy into the faster tiers
        Status put = tiers_[j]->Put(key, *got, ttl, got->labels);
        if (!put.ok()) observer_->OnTierError(tiers_[j]->tier(), put.message());
      }
      return std::move(*got);
    }
    if (got.status().code() == StatusCode::kNotFound) {
      if (!cache.empty()) observer_->OnLookup(cache, tiers_[i]->tier(), LookupResult::kMiss, took);
    } else {
      *all_missed = false;
      if (!cache.empty()) observer_->OnLookup(cache, tiers_[i]->tier(), LookupResult::kError, took);
      observer_->OnTierError(tiers_[i]->tier(), got.status().message());
    }
  }
  return std::nullopt;
}

std::optional<CachedResponse> CachingSubmitter::SemanticHit(const engine::Request& request,
                                                            SemanticLookup* lookup) {
  const SemanticOptions& sem = options_.semantic;
  if (sem.embedder == nullptr || !request.cache.semantic || request.cache.semantic_text.empty()) {
    return std::nullopt;
  }
  const Clock::time_point start = Clock::now();
  lookup->context = SemanticContextKey(
      {options_.model_digest, epoch_.load(), request.cache.cache_namespace, {}, &request.params},
      request.cache.semantic_context);
  StatusOr<embedding::Embeddings> embedded =
      sem.embedder->Embed(std::span(&request.cache.semantic_text, 1));
  if (!embedded.ok() || embedded->vectors.size() != 1) {
    observer_->OnLookup("semantic", "l1", LookupResult::kError, SecondsSince(start));
    observer_->OnTierError("embedding",
                           embedded.ok() ? "no embedding" : embedded.status().message());
    return std::nullopt;
  }
  if (embedded->token_counts.size() != 1 ||
      embedded->token_counts[0] >= sem.embedder->max_tokens()) {
    // Cut to the encoder's length (or not known not to be): texts differing only past the cut
    // would look the same.
    observer_->OnLookup("semantic", "l1", LookupResult::kMiss, SecondsSince(start));
    return std::nullopt;
  }
  lookup->embedding = std::move(embedded->vectors[0]);
  const std::vector<SemanticMatch> matches =
      sem.index->Search(lookup->context, lookup->embedding, sem.candidates, sem.min_similarity);
  for (const SemanticMatch& m : matches) {
    if (sem.guard && !sem.guard(request.cache.semantic_text, m.text)) continue;
    bool all_missed = false;
    std::string_view tier;
    if (std::optional<CachedResponse> hit =
            Lookup(m.key, /*cache=*/"", options_.default_ttl, &all_missed, &tier)) {
      observer_->OnLookup("semantic", tier, LookupResult::kHit, SecondsSince(start));
      return hit;
    }
    // Its answer expired or was invalidated (here or on another replica): forget the text.
    if (all_missed) sem.index->Remove(lookup->context, m.key);
  }
  observer_->OnLookup("semantic", "l1", LookupResult::kMiss, SecondsSince(start));
  return std::nullopt;
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
    observer_->OnLookup("response", "inflight", LookupResult::kHit, SecondsSince(start));
    return member->out;
  };

  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = flights_.find(key); it != flights_.end()) return join(it->second);
  }

  bool all_missed = false;
  if (std::optional<CachedResponse> hit = Lookup(key, "response", ttl, &all_missed)) {
    observer_->OnTokensServed("response", static_cast<int64_t>(hit->token_ids.size()));
    return Replay(request, *hit, SecondsSince(start));
  }
  SemanticLookup semantic;
  semantic.text = request.cache.semantic_text;
  if (std::optional<CachedResponse> hit = SemanticHit(request, &semantic)) {
    observer_->OnTokensServed("semantic", static_cast<int64_t>(hit->token_ids.size()));
    return Replay(request, *hit, SecondsSince(start));
  }

  auto flight = std::make_shared<Flight>();
  flight->so_far.labels.cache_namespace = request.cache.cache_namespace;
  flight->so_far.labels.tags = request.cache.tags;
  flight->semantic = std::move(semantic);
  std::shared_ptr<Member> leader;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = flights_.find(key); it != flights_.end()) return join(it->second);
    flight->key = key;
    flight->ttl = ttl;
    flight->generation = generation_.load();
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
      observer_->OnTokensServed("response",
                                joined * static_cast<int64_t>(flight->so_far.token_ids.size()));
    }
  }
}

void CachingSubmitter::Store(const Flight& flight) {
  const uint64_t generation = flight.generation;
  if (generation != generation_.load()) return;  // an invalidation came while it ran
  for (ResponseStore* tier : tiers_) {
    if (tier->blocking()) {
      auto put = [this, tier, generation, key = flight.key, value = flight.so_far,
                  ttl = flight.ttl] {
        if (generation != generation_.load()) return;
        Status st = tier->Put(key, value, ttl, value.labels);
        if (!st.ok()) observer_->OnTierError(tier->tier(), st.message());
      };
      if (!Defer(std::move(put))) {
        observer_->OnTierError(tier->tier(), "store queue full: entry dropped");
      }
      continue;
    }
    Status put = tier->Put(flight.key, flight.so_far, flight.ttl, flight.so_far.labels);
    if (!put.ok()) observer_->OnTierError(tier->tier(), put.message());
  }
  if (!flight.semantic.embedding.empty()) {
    auto add = [this, generation, context = flight.semantic.context,
                embedding = flight.semantic.embedding, key = flight.key,
                text = flight.semantic.text, labels = flight.so_far.labels] {
      if (generation != generation_.load()) return;
      options_.semantic.index->Add(context, embedding, key, text, labels);
    };
    if (!Defer(std::move(add))) observer_->OnTierError("semantic", "queue full: text not indexed");
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

namespace {

// Sets `value` to `to` when that is larger.
void RaiseTo(std::atomic<uint64_t>& value, uint64_t to) {
  uint64_t now = value.load();
  while (now < to && !value.compare_exchange_weak(now, to)) {
  }
}

}  // namespace

StatusOr<uint64_t> CachingSubmitter::BumpEpoch() {
  if (options_.bus == nullptr) return epoch_.fetch_add(1) + 1;
  STRATA_ASSIGN_OR_RETURN(uint64_t shared, options_.bus->IncrementEpoch());
  RaiseTo(epoch_, shared);
  InvalidationEvent event;
  event.kind = InvalidationEvent::Kind::kEpoch;
  event.epoch = shared;
  if (Status published = options_.bus->Publish(event); !published.ok()) {
    // The other replicas adopt it when their bus next (re)connects.
    observer_->OnTierError("bus", published.message());
  }
  return epoch_.load();
}

StatusOr<int64_t> CachingSubmitter::Invalidate(const CacheSelector& selector) {
  generation_.fetch_add(1);
  int64_t removed = 0;
  std::string failed;
  for (ResponseStore* tier : tiers_) {
    StatusOr<int64_t> n = tier->Invalidate(selector);
    if (n.ok()) {
      removed = std::max(removed, *n);  // an entry held in two tiers is counted once
    } else if (failed.empty()) {
      failed = "tier " + std::string(tier->tier()) + ": " + n.status().message();
    }
  }
  if (options_.semantic.index != nullptr) options_.semantic.index->Invalidate(selector);
  if (options_.bus != nullptr) {
    InvalidationEvent event;
    event.selector = selector;
    if (Status published = options_.bus->Publish(event); !published.ok() && failed.empty()) {
      failed = "the invalidation bus: " + published.message();
    }
  }
  if (!failed.empty()) {
    return UnavailableError("the invalidation did not reach " + failed +
                            " (what the other tiers held was dropped)");
  }
  return removed;
}

void CachingSubmitter::OnInvalidationEvent(const InvalidationEvent& event) {
  if (event.kind == InvalidationEvent::Kind::kEpoch) {
    RaiseTo(epoch_, event.epoch);
    return;
  }
  generation_.fetch_add(1);
  for (ResponseStore* tier : tiers_) {
    if (tier->blocking()) continue;  // the shared tier was invalidated by the publisher
    if (StatusOr<int64_t> n = tier->Invalidate(event.selector); !n.ok()) {
      observer_->OnTierError(tier->tier(), n.status().message());
    }
  }
  if (options_.semantic.index != nullptr) options_.semantic.index->Invalidate(event.selector);
}

Status CachingSubmitter::Clear() {
  generation_.fetch_add(1);
  if (options_.semantic.index != nullptr) options_.semantic.index->Invalidate(CacheSelector::All());
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
