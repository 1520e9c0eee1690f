// Engine: serves many requests at once on one backend, iteration by iteration (continuous
// batching, Yu et al. "Orca", OSDI 2022) over the paged KV cache (Kwon et al. "vLLM",
// SOSP 2023).
//
// One thread owns everything mutable: the scheduler, the KV cache manager, every sequence's
// sampler, finish checker and detokenizer, and the backend. That is the loop thread after
// Start(), or the caller of Step() when the engine is driven by hand (tests, benchmarks).
// Other threads only Submit, Cancel and read Stats(); what they hand over goes through the
// SubmissionQueue and a cancel list, and results come back through each request's
// RequestStream.
//
// Each Step(): take cancellations and new requests -> propose drafts -> schedule -> run one
// ragged batch -> sample (and verify drafts) -> append, stream and finish.
//
// Speculative decoding (EngineOptions::speculative): before scheduling, each sequence about to
// decode may get a draft from the proposer, as long as SpeculationPolicy finds it worth its
// cost. The draft runs in the sequence's chunk with every logits row kept; the engine then
// samples the rows in order with the request's own sampler (its penalty window taking each
// kept token, its generator one draw per row) and keeps tokens while the sampled token equals
// the draft's. Drafts are deterministic guesses, so this is exact: a greedy request gets the
// tokens it gets without speculation, and a sampled one gets, for the same seed, the same
// tokens too (the token sampled where the draft is rejected is the one plain decoding would
// have sampled there), provided the backend's logits do not depend on how a step is batched. A
// sequence's prompt and generated tokens are both just "tokens not yet computed"; prefill, chunked
// prefill, decode, prefix hits and recompute after preemption are the same rule (see scheduler.h).
//
// Errors: Submit refuses bad requests (INVALID_ARGUMENT naming the field), requests that could
// never fit the context or the KV cache (INVALID_ARGUMENT), and a full queue
// (RESOURCE_EXHAUSTED). Once accepted, a request always ends with exactly one last chunk:
// stop/length, cancelled, or error (a backend failure fails the requests of that step only).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "strata/backend/backend.h"
#include "strata/common/status.h"
#include "strata/engine/adaptive_budget.h"
#include "strata/engine/model_runner.h"
#include "strata/engine/output_processor.h"
#include "strata/engine/proposer.h"
#include "strata/engine/request.h"
#include "strata/engine/request_stream.h"
#include "strata/engine/request_submitter.h"
#include "strata/engine/scheduler.h"
#include "strata/engine/speculation_policy.h"
#include "strata/engine/step_cost_model.h"
#include "strata/engine/submission_queue.h"
#include "strata/kv/kv_cache_manager.h"
#include "strata/sampling/sampler.h"
#include "strata/tokenizer/tokenizer.h"

namespace strata::engine {

class MaskHelper;

enum class BatchingMode {
  kStatic,    // the token budget is SchedulerConfig::max_batched_tokens, always
  kAdaptive,  // AdaptiveBudget moves it with load and the inter-token latency target
};

struct EngineStats;

struct SpeculativeOptions {
  std::shared_ptr<Proposer> proposer;  // null: no speculation
  std::string proposer_name;           // for metrics labels and logs ("ngram")
  SpeculationPolicyOptions policy;
};

struct EngineOptions {
  SchedulerConfig scheduler;  // max_model_len 0 = the model's context length
  size_t max_queued_requests = 1024;
  bool enable_prefix_caching = true;
  // Identity of the weights for prefix-cache keys (e.g. a hash of the model file's path, size
  // and adapter); requests of different models must never share KV.
  uint64_t model_salt = 0;
  BatchingMode batching = BatchingMode::kStatic;
  AdaptiveBudgetOptions adaptive;  // used in kAdaptive mode
  SpeculativeOptions speculative;
  // Background requests (Request::background) may lengthen a step that carries other requests
  // by at most this fraction (0.1: 10%), by the step-time model (StepCostModel); they always
  // get at least one token per step. Must be finite and >= 0.
  double background_max_slowdown = 0.1;
  // Structured output: a constrained request whose next mask is not in its grammar's caches
  // (a position seen for the first time) gets it from this many helper threads at this nice
  // value while its step runs; the row's logits wait for the mask, so that the other requests'
  // steps do not (mask_helper.h). 0 threads: on the engine thread.
  int constraint_mask_threads = 1;
  int constraint_mask_nice = 5;
  // Called on the engine thread after every Step with a fresh snapshot, and whether the step
  // ran a batch (idle steps report the same state with no batch); for the metrics exporter.
  // Must be cheap, must not block and must not call into the engine.
  std::function<void(const EngineStats& stats, bool ran_batch)> step_observer;
};

// A snapshot of the engine's counters, for logs, benchmarks and the metrics exporter.
struct EngineStats {
  int64_t steps = 0;
  int64_t queued = 0;   // in the submission queue
  int64_t waiting = 0;  // in the scheduler, not running
  int64_t running = 0;
  int64_t last_batch_sequences = 0;
  int64_t last_batch_tokens = 0;
  int64_t token_budget = 0;  // for the next step
  int64_t preemptions_total = 0;
  int64_t finished_total = 0;  // ended with stop or length
  int64_t cancelled_total = 0;
  int64_t failed_total = 0;
  int64_t generated_tokens_total = 0;
  // Seconds spent in steps that ran a batch (the engine's utilisation is this over time).
  double busy_seconds_total = 0;
  // Masks the helper computed (mask_helper.h), and requests sitting out for one now.
  int64_t constraint_masks_off_thread_total = 0;
  int64_t constraint_masks_pending = 0;
  // Speculative decoding: drafts verified, their tokens, the tokens accepted, and verifications
  // by the number of draft tokens accepted (index 0..kMaxDraftTokens).
  int64_t speculative_verifications_total = 0;
  int64_t speculative_proposed_tokens_total = 0;
  int64_t speculative_accepted_tokens_total = 0;
  std::array<int64_t, SpeculationPolicyOptions::kMaxDraftTokens + 1> speculative_accepted_lengths{};
  kv::KvCacheStats kv;
};

class Engine final : public RequestSubmitter {
 public:
  // `backend` and `tokenizer` must outlive the engine. INVALID_ARGUMENT for inconsistent
  // options (a budget or batch cap below 1, a max_model_len above the model's context).
  static StatusOr<std::unique_ptr<Engine>> Create(backend::Backend* backend,
                                                  const tokenizer::Tokenizer* tokenizer,
                                                  const EngineOptions& options);
  ~Engine() override;  // Stop()

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Any thread. Validates and queues a request; its output arrives on the returned stream.
  StatusOr<std::shared_ptr<RequestStream>> Submit(Request request) override;

  // Any thread. The request ends with kCancelled at the next step (its blocks are freed then).
  // Unknown and already finished ids are ignored.
  void Cancel(RequestId id) override;

  // Runs the loop on an own thread until Stop(). Call once.
  void Start();
  // Refuses new requests, stops the loop, and ends every request still queued or running with
  // kCancelled. Idempotent.
  void Stop();

  // One iteration on the calling thread (only when not Start()ed). Sets *did_work to whether a
  // batch ran. An error means the backend failed: the requests of that step were failed.
  Status Step(bool* did_work);

  // Runs `prompt` once (one generated token, greedy) so its full blocks enter the prefix cache;
  // for --preload-prompts at start-up, before Start(). Engine thread only.
  Status Preload(std::vector<int32_t> prompt);

  // Any thread: a snapshot.
  EngineStats Stats() const;

  const backend::Backend& backend() const { return *backend_; }

 private:
  struct Live;  // one accepted request: its stream, sampler, finish checker, detokenizer

  Engine(backend::Backend* backend, const tokenizer::Tokenizer* tokenizer,
         const EngineOptions& options);

  void Loop();
  void TakeCancellations();
  void TakeSubmissions();
  void ProposeDrafts();
  // Constrained requests whose next mask is slow to compute go to the mask helper; their steps
  // go on, and a row that samples before the mask is ready keeps its logits and waits for it
  // (the request sits out the steps until then). Masks the helper finished are kept for their
  // next sampling, or sample the waiting logits at once.
  void PrepareMasks();
  void TakeReadyMasks();
  // Samples request `id`'s waiting logits under its ready mask and keeps the token.
  void SampleDeferred(RequestId id, Live* live);
  // A constrained request's next mask into `mask` (zeroed, sized): the helper's, when it has
  // one ready, or computed now.
  void FillMask(Live* live, std::vector<uint32_t>* mask);
  void ForgetDrafts(RequestId id);  // the proposer's state for an ended request
  Status RunBatch(const SchedulerOutput& out);
  void Postprocess(const SchedulerOutput& out);
  // Keeps `token` sampled for request `id` (-1: its mask allowed nothing): accepted by its
  // constraint, detokenized, appended and delivered, or the request fails. Returns the tokens
  // delivered. `live` may be gone after.
  int64_t KeepSampled(RequestId id, Live* live, int32_t token);
  // Streams `o` to request `id` and ends it when `o` finishes it. Returns o's token count.
  // `live` may be gone after.
  int64_t Deliver(RequestId id, Live* live, OutputProcessor::Output o);
  // Samples a drafted chunk's rows from `row` on and keeps tokens while they match the draft
  // (masked by the request's constraint, if any). False when the constraint allowed no token:
  // the caller fails the request.
  bool VerifyDraft(const ScheduledSequence& s, size_t row, Live* live,
                   OutputProcessor::Output* kept);
  // A step's preemptions, and the prompt chunks it ran for requests that record stages (its
  // forward began at `start` and ended now).
  void RecordStages(const SchedulerOutput& out, std::chrono::steady_clock::time_point start);
  void EndRequest(RequestId id, sampling::FinishReason reason, Status error);
  static void FillUsage(const Live& live, StreamChunk* last);
  static StreamChunk UnscheduledLast(const Submission& s, sampling::FinishReason reason);
  void PublishStats(const SchedulerOutput* out);
  // A constrained request's token from `logits` masked to what its constraint allows, sampled
  // with its sampler but not yet accepted by the constraint; -1 when no token is allowed.
  int32_t SampleMasked(Live* live, std::span<float> logits);
  // A constrained request's token at a row of a drafted chunk (its other rows are masked in
  // RunBatch and sampled by the runner): the logits masked to what the constraint allows, then
  // sampled with its sampler, then accepted by the constraint; -1 when no token is allowed or
  // the constraint refused the sampled one.
  int32_t SampleConstrained(Live* live, std::span<float> logits);
  // Ends request `id` (running, its step done) whose constraint allowed no token.
  void FailConstrained(RequestId id);
  // Feeds the step (its tokens, sampled rows, how many of its sequences were not background
  // work, its seconds) to the step-time model and sizes the background work of the next step.
  void SizeBackgroundWork(int64_t step_tokens, int64_t step_rows, int64_t foreground,
                          double step_seconds);

  backend::Backend* backend_;
  const tokenizer::Tokenizer* tokenizer_;
  EngineOptions options_;
  std::vector<int32_t> end_of_generation_ids_;

  // Engine-thread state.
  kv::KvCacheManager kv_;
  Scheduler scheduler_;
  AdaptiveBudget adaptive_;
  StepCostModel step_cost_;
  std::unordered_map<RequestId, std::unique_ptr<Live>> live_;
  ModelRunner runner_;
  std::vector<sampling::Sampler*> row_samplers_;  // this step's, one per sampled row
  std::vector<int32_t> sampled_;                  // this step's tokens, one per sampled row
  std::vector<uint32_t> allowed_;                 // SampleConstrained's scratch bitmask
  // This step's token masks: one per sampled row (empty: none), in the constrained rows' own
  // storage (kept between steps).
  std::vector<std::span<const uint32_t>> row_masks_;
  std::vector<std::vector<uint32_t>> mask_storage_;
  SpeculationPolicy policy_;
  std::vector<DraftRequest> draft_requests_;  // ProposeDrafts' scratch
  std::vector<std::vector<int32_t>> drafts_;  // one per draft request

  // Shared with other threads.
  SubmissionQueue queue_;
  std::atomic<RequestId> next_id_{1};
  std::mutex cancel_mutex_;
  std::vector<RequestId> cancels_;
  mutable std::mutex stats_mutex_;
  EngineStats stats_;
  std::atomic<bool> stop_{false};
  // After queue_ (its workers wake the loop through it), so destroyed before it.
  std::unique_ptr<MaskHelper> masks_;
  std::vector<std::pair<RequestId, std::vector<uint32_t>>> ready_masks_;  // TakeReadyMasks'
  int64_t masks_pending_ = 0;  // engine thread: requests with mask_pending
  std::thread loop_;
  std::once_flag stop_once_;
};

}  // namespace strata::engine
