// Scheduler: continuous batching over a paged KV cache (nano-vllm's shape, vLLM v1's rule).
//
// There are no prefill and decode phases. Each step every sequence gets
//   num_new = min(tokens.size() - num_computed_tokens, tokens left in the step's budget,
//                 long_prefill_chunk (if set))
// tokens, in this order:
//   1. Running sequences, highest priority first, then earliest arrival. Each reserves KV blocks
//      for num_computed + num_new tokens. When the cache cannot give them, the running sequence
//      with the lowest priority and the latest arrival (possibly the one asking) is preempted by
//      recompute: its blocks are freed, num_computed_tokens goes back to 0, and it rejoins the
//      waiting queue at its original arrival position. Then the reservation is retried. The
//      victim is always the last in this order, so a sequence already scheduled this step is
//      never preempted.
//   2. Waiting sequences, highest priority first, FCFS within a priority, unless this step
//      preempted (there was no room, so none is admitted). A waiting sequence starts in the
//      KvCacheManager (a prefix-cache hit sets num_computed_tokens and num_cached_tokens) and is
//      admitted only when, after reserving its chunk, the free blocks stay at or above the
//      watermark (floor(watermark * num_blocks)) and fewer than max_batch_size sequences run.
//      Admission stops at the first sequence that does not fit (no overtaking). The watermark
//      keeps room for the running sequences' next tokens; it does not apply while nothing runs,
//      so a request that fits the whole cache always starts eventually.
// Background sequences (Sequence::background, batch job lines) come after all others in both
// orders, so they are served last and preempted first. While any other sequence is held
// (running or waiting), the chunks of all background sequences together cost at most the
// background budget per step (SetBackgroundBudget: n tokens cost n, plus sample_cost for a
// chunk that samples; a chunk that would sample over budget is cut one token short, so it does
// not); with no other sequence held they share the whole token budget like any sequence.
// Background sequences carry no drafts (the engine proposes none for them).
// A chunk that reaches the end of `tokens` samples: the engine takes the last logits row,
// samples and calls AppendToken (or Finish).
// Speculative drafts (SetDraft) ride along as uncomputed tokens. A running sequence's draft is
// scheduled whole or trimmed to what the step allows (budget, chunk cap); when its blocks
// cannot be reserved the draft is dropped before anyone is preempted for it, and a preempted
// sequence loses its draft. A drafted chunk keeps every logits row (the engine verifies the
// draft, then calls ResolveDraft and AppendToken or Finish).
//
// Guarantees: a step schedules at most the token budget and at most max_batch_size sequences;
// the first running sequence always progresses (it is only preempted when it runs alone, and a
// request admitted by Add fits the whole cache), so every request finishes.
//
// The engine's step, with the scheduler:
//   SchedulerOutput out = scheduler.Schedule();
//   backend::Batch batch = MakeBatch(out, kv);       // or the ModelRunner's own batch
//   backend->Forward(batch, &logits);
//   scheduler.OnStepDone(out);
//   for each scheduled with samples: AppendToken(id, Sample(...)), or Finish(id) when it stops
// Cancel and Finish are called outside Schedule..OnStepDone, since the output points at the
// sequences; the one exception is an output that is dropped without OnStepDone (a failed
// forward), whose sequences may then be cancelled.
//
// Thread rules: engine thread only; not thread-safe. The KvCacheManager is shared with nobody
// else while the scheduler uses it (the scheduler is the only caller that changes it).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "strata/backend/backend.h"
#include "strata/common/status.h"
#include "strata/engine/background_budget.h"
#include "strata/engine/sequence.h"
#include "strata/kv/kv_cache_manager.h"

namespace strata::engine {

struct SchedulerConfig {
  int64_t max_batched_tokens = 512;  // per-step token budget (SetTokenBudget changes it)
  int32_t max_batch_size = 64;       // running sequences at most (so sequences per step)
  double watermark = 0.01;           // fraction of the blocks kept free when admitting
  int64_t max_model_len = 0;         // context length in tokens (the model's); must be set
  // Tokens one sequence may take per step at most; 0: no cap beyond the budget. Keeps a long
  // prompt from filling a whole step while decodes wait behind it.
  int64_t long_prefill_chunk = 0;

  // INVALID_ARGUMENT naming the first bad field (these come from flags).
  Status Validate() const;
};

// One sequence's part of a step: tokens [start_pos, start_pos + num_tokens) of seq->tokens.
struct ScheduledSequence {
  Sequence* seq = nullptr;  // owned by the scheduler; valid until Finish/Cancel
  int64_t start_pos = 0;    // == seq->num_computed_tokens when scheduled
  int64_t num_tokens = 0;   // >= 1
  bool samples = false;     // the chunk reaches the end of seq->tokens: sample after the forward
  // Draft tokens at the end of the chunk (seq->num_draft_tokens when scheduled): the chunk is
  // [last sampled token, draft...] and has 1 + num_draft logits rows to verify.
  int64_t num_draft = 0;
};

struct SchedulerOutput {
  // Running sequences in service order, then the ones admitted this step in admission order.
  std::vector<ScheduledSequence> scheduled;
  std::vector<kv::SequenceId> preempted;  // preempted this step, in order
  int64_t num_scheduled_tokens = 0;       // sum of scheduled[i].num_tokens
};

struct SchedulerStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_scheduled_sequences = 0;  // last step
  int64_t num_scheduled_tokens = 0;     // last step
  // Tokens of running sequences the last step left for later (budget or chunk cap; background
  // tokens only while no other sequence is held): with num_waiting > 0 this is the "work
  // waiting" signal of AdaptiveBudget.
  int64_t num_pending_tokens = 0;
  int64_t token_budget = 0;     // the current per-step budget
  int64_t num_preemptions = 0;  // total since construction
  kv::KvCacheStats kv;
};

class Scheduler {
 public:
  // `config` must be valid (Validate); `kv` must outlive the scheduler and hold no live
  // sequences the scheduler does not know of.
  Scheduler(const SchedulerConfig& config, kv::KvCacheManager* kv);

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a fresh sequence (status kWaiting, nothing computed, tokens == its prompt, an id not
  // in use: programmer invariants) and gives it its arrival order. INVALID_ARGUMENT, with the
  // sequence dropped, for one that can never run: an empty prompt, max_tokens < 1,
  // prompt_len + max_tokens > max_model_len, or more KV blocks than the whole cache holds (its
  // KV peaks at prompt_len + max_tokens - 1 tokens: the last token is never run).
  Status Add(std::unique_ptr<Sequence> seq);

  // Picks this step's work (see the top of the file). Reserves the KV blocks every scheduled
  // slice needs. An empty `scheduled` means nothing to do (idle()): with any sequence held, at
  // least one is scheduled. Every sequence whose last chunk sampled must have had AppendToken or
  // Finish since (programmer invariant).
  SchedulerOutput Schedule();

  // After the forward of `out`: every scheduled sequence has num_tokens more computed tokens,
  // and its newly full blocks go to the prefix cache. Call once per Schedule, before
  // AppendToken/Finish for that step.
  void OnStepDone(const SchedulerOutput& out);

  // Appends the token sampled for running sequence `id` (its chunk sampled). A sequence must
  // not get more than max_tokens tokens: the engine calls Finish when it reaches them.
  void AppendToken(kv::SequenceId id, int32_t token);

  // The same for several tokens at once (a verified speculative run): all but the last are
  // computed by the next step that schedules the sequence, in one chunk if the budget allows.
  // A paused sequence may also take its tokens later (the engine sampled its chunk after the
  // step, see SetPaused), even after a preemption sent it back to waiting.
  void AppendTokens(kv::SequenceId id, std::span<const int32_t> tokens);

  // Appends a speculative draft to running sequence `id`, which must be about to decode (one
  // uncomputed token: the last sampled one) and hold no draft. At most
  // max_tokens - num_generated() - 1 tokens (programmer invariant), so that the draft's
  // accepted tokens and the token sampled after them stay within max_tokens.
  void SetDraft(kv::SequenceId id, std::span<const int32_t> draft);

  // Tokens sequence `id` may still take as a draft now (0 when it is not about to decode).
  int64_t DraftRoom(kv::SequenceId id) const;

  // After the forward of a drafted chunk (OnStepDone): keeps the first `num_accepted` draft
  // tokens of running sequence `id` as its own (computed) tokens and drops the rest with their
  // KV. The engine then appends the token sampled after them.
  void ResolveDraft(kv::SequenceId id, int64_t num_accepted);

  // Rolls running sequence `id` back to its first `num_tokens` tokens (prompt_len <= num_tokens
  // <= num_tokens()), at the point where AppendToken could be called (its chunk sampled): the
  // tokens after are dropped and their KV released (KvCacheManager::Truncate). False, nothing
  // changed, when the cut passes through a KV block another sequence shares.
  [[nodiscard]] bool Rollback(kv::SequenceId id, int64_t num_tokens);

  // Ends running sequence `id` (stop token, stop string, max_tokens), frees its blocks and
  // hands it back with status kFinished (for usage: tokens, cached tokens, preemptions). A
  // paused sequence may also be waiting (preempted while its token was being sampled).
  std::unique_ptr<Sequence> Finish(kv::SequenceId id);

  // Drops sequence `id`, waiting or running, and frees its blocks. False when the scheduler does
  // not hold it (already finished or cancelled, or never added): cancel races are normal.
  bool Cancel(kv::SequenceId id);

  // Keeps sequence `id` (waiting or running) from sampling from now on, or takes it back. A
  // paused sequence still computes its prompt (or recomputes it after a preemption) up to the
  // token that samples, then sits out, keeping its place and KV blocks (it can still be
  // preempted); its draft, if any, is dropped; those behind it in the waiting order are
  // admitted past it. A sequence paused after its sampling chunk ran (every token computed)
  // sits out until the engine appends its token, which it may do before taking it back.
  // False when the scheduler does not hold it.
  bool SetPaused(kv::SequenceId id, bool paused);

  // Per-step token budget from now on (>= 1), e.g. from AdaptiveBudget.
  void SetTokenBudget(int64_t budget);
  int64_t token_budget() const { return budget_; }

  // What background sequences may take per step while another sequence is held, from now on
  // (tokens >= 1 + sample_cost, sample_cost >= 0, so a background decode always fits; the
  // default is no limit beyond the token budget).
  void SetBackgroundBudget(const BackgroundBudget& budget);
  const BackgroundBudget& background_budget() const { return background_budget_; }

  // The sequence `id` while the scheduler holds it, else nullptr.
  const Sequence* Find(kv::SequenceId id) const;
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool idle() const { return running_.empty() && waiting_.empty(); }

  SchedulerStats Stats() const;

 private:
  // Other sequences before background ones, then highest priority first, then earliest
  // arrival: the order of service. Its last element is
  // the preemption victim.
  struct ServiceOrder {
    bool operator()(const Sequence* a, const Sequence* b) const {
      if (a->background != b->background) return b->background;
      if (a->priority != b->priority) return a->priority > b->priority;
      return a->arrival < b->arrival;
    }
  };

  Sequence* Held(kv::SequenceId id) const;
  // Drops the draft tokens of `seq` (whose draft is not computed) beyond the first `keep`.
  static void TrimDraft(Sequence* seq, int64_t keep);
  // The tokens a chunk of `seq` may have of `remaining` uncomputed ones: the budget left and
  // the per-sequence chunk cap; for a background sequence while others are held, also the
  // background budget left (with the sample cost of a chunk that samples).
  int64_t Chunk(const Sequence& seq, int64_t remaining, int64_t budget_left,
                int64_t background_left) const;
  // What a chunk of `num_new` of `remaining` tokens of `seq` takes from the background budget
  // (0 for a sequence that is not background work).
  int64_t BackgroundCost(const Sequence& seq, int64_t num_new, int64_t remaining) const;
  // `tokens` left for later by `seq`, as the pending-work signal counts them: background tokens
  // held back for others are not work waiting for a bigger budget.
  int64_t Pending(const Sequence& seq, int64_t tokens) const;
  void Preempt(Sequence* seq, SchedulerOutput* out);
  // Admits waiting sequences into `out` while budget, batch size and blocks allow. Returns the
  // admitted sequences' tokens left for later steps.
  int64_t Admit(int64_t* budget_left, int64_t* background_left, SchedulerOutput* out);

  SchedulerConfig config_;
  kv::KvCacheManager* kv_;
  int64_t budget_;
  BackgroundBudget background_budget_;
  int64_t num_foreground_ = 0;  // held sequences that are not background
  int32_t watermark_blocks_;
  uint64_t next_arrival_ = 0;
  std::unordered_map<kv::SequenceId, std::unique_ptr<Sequence>> sequences_;  // all held
  std::set<Sequence*, ServiceOrder> waiting_;
  std::set<Sequence*, ServiceOrder> running_;
  std::vector<Sequence*> running_snapshot_;  // Schedule's scratch
  int32_t last_scheduled_sequences_ = 0;
  int64_t last_scheduled_tokens_ = 0;
  int64_t last_pending_tokens_ = 0;
  int64_t num_preemptions_ = 0;
};

// The step's ragged batch: one slice per scheduled sequence, in order, with its tokens, start
// position and KV blocks; logits kAll for a drafted chunk, kLast for another sampling chunk,
// kNone otherwise. The spans point
// into the sequences and `kv`: valid until the next AppendToken, Finish, Cancel or Schedule.
backend::Batch MakeBatch(const SchedulerOutput& out, const kv::KvCacheManager& kv);

}  // namespace strata::engine
