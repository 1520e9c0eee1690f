// Sequence: the engine's execution state of one request (LMDeploy's Request/Sequence split: the
// client's Request is a plain value shared with the frontend; this is engine-private).
//
// One rule covers prefill, chunked prefill, prefix-cache hits, decode and recompute after
// preemption (vLLM v1): `num_computed_tokens` catches up with `tokens.size()`. Every step the
// scheduler hands a sequence the next slice [num_computed_tokens, num_computed_tokens + n) of
// `tokens`; when a slice reaches the end of `tokens`, the forward's last logits row gives the
// next token, which the engine appends.
//
// Ownership and thread rules: the Scheduler owns every Sequence from Add until Finish (which
// hands it back) or Cancel (which destroys it). Only the engine thread reads or writes one; the
// scheduler alone changes `status`, `arrival`, `num_computed_tokens`, `num_cached_tokens`,
// `num_preemptions`, `num_draft_tokens` and (through Scheduler::AppendToken, SetDraft and
// ResolveDraft) `tokens`.
//
// Speculative decoding (issue 18): a sequence about to decode (one uncomputed token, the last
// sampled) may carry a draft, `num_draft_tokens` guessed tokens appended after it. They are
// scheduled and run like any uncomputed tokens, their logits are all kept, and after the
// forward the engine verifies them and the scheduler drops the rejected ones; a step that
// cannot run the whole draft trims it, and a preempted sequence loses it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "strata/kv/kv_cache_manager.h"

namespace strata::engine {

enum class SequenceStatus {
  kWaiting,   // queued: not yet started, or preempted (holds no KV blocks)
  kRunning,   // holds KV blocks; scheduled whenever the budget allows
  kFinished,  // done (returned by Scheduler::Finish); holds no KV blocks
};

struct Sequence {
  Sequence(kv::SequenceId id_in, std::vector<int32_t> prompt, int64_t max_tokens_in,
           int32_t priority_in = 0, bool background_in = false)
      : id(id_in),
        priority(priority_in),
        background(background_in),
        tokens(std::move(prompt)),
        prompt_len(static_cast<int64_t>(tokens.size())),
        max_tokens(max_tokens_in) {}

  kv::SequenceId id;
  // Scheduling class: higher is admitted first and preempted last; FCFS within a class.
  int32_t priority = 0;
  // Background work (Request::background): served after, and preempted before, every other
  // sequence, and held to the scheduler's background token budget while others are held.
  bool background = false;
  // Arrival order, given by Scheduler::Add (monotonic). A preempted sequence keeps it, so it
  // rejoins the waiting queue where it first stood.
  uint64_t arrival = 0;
  // Prompt then generated token ids.
  std::vector<int32_t> tokens;
  int64_t prompt_len = 0;
  // Tokens to generate at most, already limited to the context (prompt_len + max_tokens <=
  // max_model_len).
  int64_t max_tokens = 0;
  // Leading `tokens` whose KV is in the sequence's blocks (0 while waiting).
  int64_t num_computed_tokens = 0;
  // Of those, how many came from the prefix cache when the sequence last started.
  int64_t num_cached_tokens = 0;
  // Trailing `tokens` that are an unverified draft (0 when none): never in the prefix cache,
  // never counted as generated.
  int64_t num_draft_tokens = 0;
  SequenceStatus status = SequenceStatus::kWaiting;
  int32_t num_preemptions = 0;
  // Not sampled (only prompt chunks that stop short of sampling run) while the engine prepares
  // what it needs to sample it, or while it samples a chunk that ran (Scheduler::SetPaused).
  bool paused = false;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  // Tokens without the draft: the prompt and the tokens the model has chosen.
  int64_t num_verified_tokens() const { return num_tokens() - num_draft_tokens; }
  int64_t num_generated() const { return num_verified_tokens() - prompt_len; }
  // Tokens still to run through a forward before the next sample.
  int64_t num_uncomputed() const { return num_tokens() - num_computed_tokens; }
};

}  // namespace strata::engine
