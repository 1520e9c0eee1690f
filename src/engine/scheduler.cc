#include "strata/engine/scheduler.h"

#include <algorithm>
#include <string>
#include <utility>

#include "strata/common/check.h"
#include "strata/engine/request_limits.h"

namespace strata::engine {

Status SchedulerConfig::Validate() const {
  if (max_batched_tokens < 1) {
    return InvalidArgumentError("max_batched_tokens must be at least 1, got " +
                                std::to_string(max_batched_tokens));
  }
  if (max_batch_size < 1) {
    return InvalidArgumentError("max_batch_size must be at least 1, got " +
                                std::to_string(max_batch_size));
  }
  if (!(watermark >= 0.0 && watermark < 1.0)) {
    return InvalidArgumentError("watermark must be in [0, 1), got " + std::to_string(watermark));
  }
  if (max_model_len < 1) {
    return InvalidArgumentError("max_model_len must be set to the model's context (>= 1), got " +
                                std::to_string(max_model_len));
  }
  if (long_prefill_chunk < 0) {
    return InvalidArgumentError("long_prefill_chunk must be 0 (no cap) or positive, got " +
                                std::to_string(long_prefill_chunk));
  }
  return OkStatus();
}

Scheduler::Scheduler(const SchedulerConfig& config, kv::KvCacheManager* kv)
    : config_(config), kv_(kv), budget_(config.max_batched_tokens) {
  STRATA_CHECK(kv_ != nullptr);
  STRATA_CHECK(config_.Validate().ok());
  // vLLM's rule: int(watermark * num_blocks).
  watermark_blocks_ = static_cast<int32_t>(config_.watermark * kv_->num_blocks());
}

Status Scheduler::Add(std::unique_ptr<Sequence> seq) {
  STRATA_CHECK(seq != nullptr);
  STRATA_CHECK(seq->status == SequenceStatus::kWaiting && seq->num_computed_tokens == 0);
  STRATA_CHECK(seq->prompt_len == seq->num_tokens());
  STRATA_CHECK(!sequences_.contains(seq->id) && !kv_->IsLive(seq->id));

  STRATA_RETURN_IF_ERROR(
      CheckRequestFits(seq->prompt_len, seq->max_tokens,
                       {config_.max_model_len, kv_->num_blocks(), kv_->block_size()}));

  seq->arrival = next_arrival_++;
  if (!seq->background) ++num_foreground_;
  Sequence* raw = seq.get();
  sequences_.emplace(raw->id, std::move(seq));
  waiting_.insert(raw);
  return OkStatus();
}

int64_t Scheduler::Chunk(const Sequence& seq, int64_t remaining, int64_t budget_left,
                         int64_t background_left) const {
  int64_t n = std::min(remaining, budget_left);
  if (config_.long_prefill_chunk > 0) n = std::min(n, config_.long_prefill_chunk);
  // A paused sequence may compute its prompt (or recompute after a preemption) but not the
  // chunk that samples: it stops one token short until it is taken back.
  if (seq.paused && n == remaining) --n;
  if (seq.background && num_foreground_ > 0) {
    n = std::min(n, background_left);
    // A chunk that samples also pays for its row of the output head: over budget, it stops
    // one token short and samples in a later step.
    if (n > 0 && n == remaining && n + background_budget_.sample_cost > background_left) --n;
  }
  return std::max<int64_t>(n, 0);
}

int64_t Scheduler::BackgroundCost(const Sequence& seq, int64_t num_new, int64_t remaining) const {
  if (!seq.background) return 0;
  const bool samples = num_new == remaining;
  return num_new + (samples && num_foreground_ > 0 ? background_budget_.sample_cost : 0);
}

int64_t Scheduler::Pending(const Sequence& seq, int64_t tokens) const {
  if (seq.paused) return 0;  // waits for the engine, not for room in the steps
  return seq.background && num_foreground_ > 0 ? 0 : tokens;
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  int64_t budget_left = budget_;
  int64_t background_left = num_foreground_ > 0 ? background_budget_.tokens : budget_;
  int64_t pending = 0;

  // Iterate over a snapshot: preemption removes sequences from running_, but only ones at or
  // after the current position (the victim is the last in service order).
  running_snapshot_.assign(running_.begin(), running_.end());
  for (Sequence* seq : running_snapshot_) {
    if (seq->status != SequenceStatus::kRunning) continue;  // preempted earlier in this step
    if (seq->paused && seq->num_draft_tokens > 0) TrimDraft(seq, 0);  // no guess to verify
    // After a sampling step the engine must append the token (or finish the sequence), or
    // pause it while it samples later.
    if (seq->num_uncomputed() == 0) {
      STRATA_CHECK(seq->paused);
      continue;
    }
    int64_t num_new = Chunk(*seq, seq->num_uncomputed(), budget_left, background_left);
    if (seq->num_draft_tokens > 0 && num_new < seq->num_uncomputed()) {
      // A draft runs whole with the token before it or shrinks to what the step allows.
      TrimDraft(seq, std::max<int64_t>(num_new - 1, 0));
    }
    if (num_new == 0) {
      pending += Pending(*seq, seq->num_uncomputed());
      continue;
    }
    int64_t total = seq->num_computed_tokens + num_new;
    bool reserved = kv_->Reserve(seq->id, total);
    if (!reserved && seq->num_draft_tokens > 0) {
      // No one is preempted for a guess.
      TrimDraft(seq, 0);
      num_new = seq->num_uncomputed();
      total = seq->num_computed_tokens + num_new;
      reserved = kv_->Reserve(seq->id, total);
    }
    while (!reserved) {
      Sequence* victim = *running_.rbegin();
      Preempt(victim, &out);
      if (victim == seq) break;
      reserved = kv_->Reserve(seq->id, total);
    }
    if (!reserved) continue;  // `seq` itself was the victim: nothing after it still runs
    out.scheduled.push_back({seq, seq->num_computed_tokens, num_new, total == seq->num_tokens(),
                             seq->num_draft_tokens});
    out.num_scheduled_tokens += num_new;
    budget_left -= num_new;
    background_left -= BackgroundCost(*seq, num_new, seq->num_uncomputed());
    pending += Pending(*seq, seq->num_uncomputed() - num_new);
  }

  // A step that had to preempt has no room for newcomers.
  if (out.preempted.empty()) pending += Admit(&budget_left, &background_left, &out);

  STRATA_CHECK(out.num_scheduled_tokens <= budget_);
  last_scheduled_sequences_ = static_cast<int32_t>(out.scheduled.size());
  last_scheduled_tokens_ = out.num_scheduled_tokens;
  last_pending_tokens_ = pending;
  return out;
}

int64_t Scheduler::Admit(int64_t* budget_left, int64_t* background_left, SchedulerOutput* out) {
  int64_t pending = 0;
  auto next = waiting_.begin();
  while (next != waiting_.end() && *budget_left > 0 &&
         static_cast<int32_t>(running_.size()) < config_.max_batch_size) {
    Sequence* seq = *next;
    // The watermark keeps room for the running sequences' next tokens; with none running it
    // would only keep a request that fits the cache from ever starting.
    const int32_t floor = running_.empty() ? 0 : watermark_blocks_;
    // Decide on the probe, so a sequence that is not admitted leaves no trace in the cache
    // (no lookup counted, no hit block moved in the LRU order).
    const kv::KvCacheManager::PrefixProbe probe = kv_->ProbePrefix(seq->tokens);
    const int64_t remaining = seq->num_tokens() - probe.hit_tokens;
    const int64_t num_new = Chunk(*seq, remaining, *budget_left, *background_left);
    if (num_new == 0 && seq->paused) {  // only its sampling chunk is left: the next may start
      ++next;
      continue;
    }
    // Background sequences come last in the order, so none after this one could start either.
    if (num_new == 0) break;
    const int64_t total = probe.hit_tokens + num_new;
    const int64_t block_size = kv_->block_size();
    const int64_t new_blocks =
        (total + block_size - 1) / block_size - probe.hit_tokens / block_size;
    if (kv_->num_free_blocks() - probe.free_hit_blocks - new_blocks < floor) break;  // FCFS
    const int64_t hit = kv_->StartSequence(seq->id, seq->tokens);
    STRATA_CHECK(hit == probe.hit_tokens);
    const bool reserved = kv_->Reserve(seq->id, total);
    STRATA_CHECK(reserved);

    next = waiting_.erase(next);
    seq->status = SequenceStatus::kRunning;
    seq->num_computed_tokens = hit;
    seq->num_cached_tokens = hit;
    running_.insert(seq);
    out->scheduled.push_back({seq, hit, num_new, total == seq->num_tokens()});
    out->num_scheduled_tokens += num_new;
    *budget_left -= num_new;
    *background_left -= BackgroundCost(*seq, num_new, remaining);
    pending += Pending(*seq, remaining - num_new);
  }
  return pending;
}

void Scheduler::TrimDraft(Sequence* seq, int64_t keep) {
  STRATA_CHECK(keep >= 0 && keep <= seq->num_draft_tokens);
  STRATA_CHECK(seq->num_computed_tokens <= seq->num_verified_tokens());
  seq->tokens.resize(static_cast<size_t>(seq->num_verified_tokens() + keep));
  seq->num_draft_tokens = keep;
}

void Scheduler::Preempt(Sequence* seq, SchedulerOutput* out) {
  TrimDraft(seq, 0);  // preempted while scheduling: its draft is not computed
  kv_->FreeSequence(seq->id);
  running_.erase(seq);
  seq->status = SequenceStatus::kWaiting;
  seq->num_computed_tokens = 0;
  ++seq->num_preemptions;
  waiting_.insert(seq);  // at its original arrival position
  out->preempted.push_back(seq->id);
  ++num_preemptions_;
}

void Scheduler::OnStepDone(const SchedulerOutput& out) {
  for (const ScheduledSequence& s : out.scheduled) {
    Sequence* seq = s.seq;
    STRATA_CHECK(seq->status == SequenceStatus::kRunning);
    STRATA_CHECK(seq->num_computed_tokens == s.start_pos);
    seq->num_computed_tokens += s.num_tokens;
    // A draft's KV is not cached before it is verified: ResolveDraft may rewrite it.
    kv_->CommitComputed(seq->id, seq->tokens,
                        std::min(seq->num_computed_tokens, seq->num_verified_tokens()));
  }
}

void Scheduler::AppendToken(kv::SequenceId id, int32_t token) {
  AppendTokens(id, std::span<const int32_t>(&token, 1));
}

void Scheduler::SetDraft(kv::SequenceId id, std::span<const int32_t> draft) {
  Sequence* seq = Held(id);
  STRATA_CHECK(seq->status == SequenceStatus::kRunning);
  STRATA_CHECK(seq->num_draft_tokens == 0 && seq->num_uncomputed() == 1);
  STRATA_CHECK(static_cast<int64_t>(draft.size()) <= DraftRoom(id));
  seq->tokens.insert(seq->tokens.end(), draft.begin(), draft.end());
  seq->num_draft_tokens = static_cast<int64_t>(draft.size());
}

int64_t Scheduler::DraftRoom(kv::SequenceId id) const {
  const Sequence* seq = Held(id);
  if (seq->status != SequenceStatus::kRunning || seq->num_draft_tokens != 0 ||
      seq->num_uncomputed() != 1 || seq->num_generated() < 1) {
    return 0;
  }
  return std::max<int64_t>(seq->max_tokens - seq->num_generated() - 1, 0);
}

void Scheduler::ResolveDraft(kv::SequenceId id, int64_t num_accepted) {
  Sequence* seq = Held(id);
  STRATA_CHECK(seq->status == SequenceStatus::kRunning);
  STRATA_CHECK(seq->num_uncomputed() == 0);  // after the drafted chunk's OnStepDone
  STRATA_CHECK(num_accepted >= 0 && num_accepted <= seq->num_draft_tokens);
  const int64_t keep = seq->num_verified_tokens() + num_accepted;
  seq->num_draft_tokens = 0;
  // The cut lies past every cached block (drafts are never committed) and in a block only this
  // sequence holds, so it cannot fail.
  const bool truncated = kv_->Truncate(id, keep);
  STRATA_CHECK(truncated);
  seq->tokens.resize(static_cast<size_t>(keep));
  seq->num_computed_tokens = keep;
  kv_->CommitComputed(id, seq->tokens, keep);
}

void Scheduler::AppendTokens(kv::SequenceId id, std::span<const int32_t> tokens) {
  Sequence* seq = Held(id);
  // Only after a sampling chunk's OnStepDone, or later while paused (preempted meanwhile, it
  // recomputes its tokens with the new ones).
  STRATA_CHECK(seq->paused ||
               (seq->status == SequenceStatus::kRunning && seq->num_uncomputed() == 0));
  STRATA_CHECK(seq->num_draft_tokens == 0);  // a draft is resolved first
  STRATA_CHECK(!tokens.empty());
  STRATA_CHECK(static_cast<int64_t>(tokens.size()) <= seq->max_tokens - seq->num_generated());
  seq->tokens.insert(seq->tokens.end(), tokens.begin(), tokens.end());
}

bool Scheduler::Rollback(kv::SequenceId id, int64_t num_tokens) {
  Sequence* seq = Held(id);
  STRATA_CHECK(seq->status == SequenceStatus::kRunning);
  STRATA_CHECK(seq->num_uncomputed() == 0 && seq->num_draft_tokens == 0);
  STRATA_CHECK(num_tokens >= seq->prompt_len && num_tokens <= seq->num_tokens());
  if (!kv_->Truncate(id, num_tokens)) return false;
  seq->tokens.resize(static_cast<size_t>(num_tokens));
  seq->num_computed_tokens = num_tokens;
  return true;
}

std::unique_ptr<Sequence> Scheduler::Finish(kv::SequenceId id) {
  const auto it = sequences_.find(id);
  STRATA_CHECK(it != sequences_.end());
  std::unique_ptr<Sequence> seq = std::move(it->second);
  STRATA_CHECK(seq->status == SequenceStatus::kRunning || seq->paused);
  sequences_.erase(it);
  if (seq->status == SequenceStatus::kRunning) {
    running_.erase(seq.get());
    kv_->FreeSequence(id);
  } else {
    waiting_.erase(seq.get());  // waiting sequences hold no blocks
  }
  seq->status = SequenceStatus::kFinished;
  if (!seq->background) --num_foreground_;
  return seq;
}

bool Scheduler::Cancel(kv::SequenceId id) {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) return false;
  Sequence* seq = it->second.get();
  if (seq->status == SequenceStatus::kRunning) {
    running_.erase(seq);
    kv_->FreeSequence(id);
  } else {
    waiting_.erase(seq);  // waiting sequences hold no blocks
  }
  if (!seq->background) --num_foreground_;
  sequences_.erase(it);
  return true;
}

void Scheduler::SetTokenBudget(int64_t budget) {
  STRATA_CHECK(budget >= 1);
  budget_ = budget;
}

void Scheduler::SetBackgroundBudget(const BackgroundBudget& budget) {
  STRATA_CHECK(budget.sample_cost >= 0 && budget.tokens >= 1 + budget.sample_cost);
  background_budget_ = budget;
}

bool Scheduler::SetPaused(kv::SequenceId id, bool paused) {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) return false;
  it->second->paused = paused;
  return true;
}

const Sequence* Scheduler::Find(kv::SequenceId id) const {
  const auto it = sequences_.find(id);
  return it == sequences_.end() ? nullptr : it->second.get();
}

Sequence* Scheduler::Held(kv::SequenceId id) const {
  const auto it = sequences_.find(id);
  STRATA_CHECK(it != sequences_.end());  // not held: finished, cancelled or never added
  return it->second.get();
}

SchedulerStats Scheduler::Stats() const {
  SchedulerStats stats;
  stats.num_running = num_running();
  stats.num_waiting = num_waiting();
  stats.num_scheduled_sequences = last_scheduled_sequences_;
  stats.num_scheduled_tokens = last_scheduled_tokens_;
  stats.num_pending_tokens = last_pending_tokens_;
  stats.token_budget = budget_;
  stats.num_preemptions = num_preemptions_;
  stats.kv = kv_->Stats();
  return stats;
}

backend::Batch MakeBatch(const SchedulerOutput& out, const kv::KvCacheManager& kv) {
  backend::Batch batch;
  batch.sequences.reserve(out.scheduled.size());
  for (const ScheduledSequence& s : out.scheduled) {
    const std::span<const int32_t> tokens(s.seq->tokens);
    backend::SequenceSlice slice;
    slice.tokens =
        tokens.subspan(static_cast<size_t>(s.start_pos), static_cast<size_t>(s.num_tokens));
    slice.start_pos = s.start_pos;
    slice.block_ids = kv.Blocks(s.seq->id);
    slice.logits = !s.samples        ? backend::LogitsWanted::kNone
                   : s.num_draft > 0 ? backend::LogitsWanted::kAll
                                     : backend::LogitsWanted::kLast;
    batch.sequences.push_back(slice);
  }
  return batch;
}

}  // namespace strata::engine
