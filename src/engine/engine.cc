#include "strata/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <span>
#include <utility>

#include "mask_helper.h"
#include "strata/common/check.h"
#include "strata/common/logging.h"
#include "strata/engine/output_processor.h"
#include "strata/engine/request_limits.h"
#include "strata/engine/sequence.h"
#include "strata/sampling/sampler.h"
#include "strata/sampling/token_mask.h"

namespace strata::engine {
namespace {

using Clock = std::chrono::steady_clock;

kv::KvCacheManagerOptions KvOptions(const backend::Backend& backend, const EngineOptions& options) {
  const backend::KvGeometry g = backend.kv_geometry();
  kv::KvCacheManagerOptions o;
  o.num_blocks = g.num_blocks;
  o.block_size = g.block_size;
  o.enable_prefix_caching = options.enable_prefix_caching;
  o.salt = options.model_salt;
  return o;
}

SchedulerConfig ResolvedSchedulerConfig(const backend::Backend& backend,
                                        const EngineOptions& options) {
  SchedulerConfig c = options.scheduler;
  if (c.max_model_len == 0) c.max_model_len = backend.config().context_length;
  if (options.batching == BatchingMode::kAdaptive) {
    c.max_batched_tokens = std::clamp(options.adaptive.initial_budget, options.adaptive.min_budget,
                                      options.adaptive.max_budget);
  }
  return c;
}

}  // namespace

// Everything the engine keeps per accepted request besides its Sequence (which the scheduler
// owns). Engine thread only.
struct Engine::Live {
  Live(const Request& request, std::shared_ptr<RequestStream> s,
       const tokenizer::Tokenizer& tokenizer, std::span<const int32_t> end_of_generation_ids)
      : stream(std::move(s)),
        sampler(request.params, request.prompt),
        output(request.params, tokenizer, end_of_generation_ids),
        wants_logprobs(request.params.logprobs > 0),
        speculative(request.speculative && !request.background),
        constraint(request.constraint),
        record_stages(request.record_stages) {}

  std::shared_ptr<RequestStream> stream;
  Clock::time_point submitted;
  Clock::time_point first_scheduled;  // epoch until then
  Clock::time_point first_token;      // epoch until then
  RequestUsage usage;
  sampling::Sampler sampler;
  OutputProcessor output;
  bool wants_logprobs;
  // Drafts allowed: the request allows them and is not background work.
  bool speculative;
  std::shared_ptr<TokenConstraint> constraint;  // null: any token
  // The mask helper is computing its next mask, or has: `ready_mask` is the mask for its next
  // sampling. A row that samples while the mask is pending keeps its logits in
  // `deferred_logits` (non-empty while they wait) and is sampled when the mask is ready.
  bool mask_pending = false;
  bool has_ready_mask = false;
  std::vector<uint32_t> ready_mask;
  std::vector<float> deferred_logits;
  SequenceAcceptance acceptance;  // its drafts' record, for SpeculationPolicy
  bool record_stages;             // keep its prefill chunks' times
  std::vector<PrefillChunkTime> prefill_chunks;
  int64_t prefill_chunks_dropped = 0;
  int32_t preemptions = 0;
  double detokenize_seconds = 0;  // in `output`
};

namespace {

// `output.Append(...)`, timed into live->detokenize_seconds.
template <class Fn>
OutputProcessor::Output Timed(double* seconds, Fn&& fn) {
  const Clock::time_point start = Clock::now();
  OutputProcessor::Output o = fn();
  *seconds += std::chrono::duration<double>(Clock::now() - start).count();
  return o;
}

}  // namespace

void Engine::FillUsage(const Live& live, StreamChunk* last) {
  const auto since_submit = [&](Clock::time_point t) {
    return t == Clock::time_point() ? 0.0
                                    : std::chrono::duration<double>(t - live.submitted).count();
  };
  const auto between = [](Clock::time_point from, Clock::time_point to) {
    return from == Clock::time_point() || to == Clock::time_point()
               ? 0.0
               : std::chrono::duration<double>(to - from).count();
  };
  last->usage = live.usage;
  RequestTiming& t = last->timing;
  t.queue_seconds = since_submit(live.first_scheduled);
  t.time_to_first_token_seconds = since_submit(live.first_token);
  t.total_seconds = since_submit(last->time);
  t.prefill_seconds = between(live.first_scheduled, live.first_token);
  t.decode_seconds = between(live.first_token, last->time);
  t.detokenize_seconds = live.detokenize_seconds;
  t.stages.submitted = live.submitted;
  t.stages.first_scheduled = live.first_scheduled;
  t.stages.first_token = live.first_token;
  t.stages.finished = last->time;
  t.stages.prefill_chunks = live.prefill_chunks;
  t.stages.prefill_chunks_dropped = live.prefill_chunks_dropped;
  t.stages.preemptions = live.preemptions;
}

// The last chunk of a request that ends before it was scheduled (cancelled in the queue, or
// at shutdown).
StreamChunk Engine::UnscheduledLast(const Submission& s, sampling::FinishReason reason) {
  StreamChunk last;
  last.finish_reason = reason;
  last.time = Clock::now();
  last.usage.prompt_tokens = static_cast<int64_t>(s.request.prompt.size());
  last.timing.total_seconds = std::chrono::duration<double>(last.time - s.submitted).count();
  last.timing.stages.submitted = s.submitted;
  last.timing.stages.finished = last.time;
  return last;
}

StatusOr<std::unique_ptr<Engine>> Engine::Create(backend::Backend* backend,
                                                 const tokenizer::Tokenizer* tokenizer,
                                                 const EngineOptions& options) {
  STRATA_CHECK(backend != nullptr && tokenizer != nullptr);
  if (options.scheduler.max_model_len < 0 ||
      options.scheduler.max_model_len > backend->config().context_length) {
    return InvalidArgumentError("max_model_len must be between 1 and the model's context " +
                                std::to_string(backend->config().context_length) + ", got " +
                                std::to_string(options.scheduler.max_model_len));
  }
  STRATA_RETURN_IF_ERROR(ResolvedSchedulerConfig(*backend, options).Validate());
  if (options.max_queued_requests < 1) {
    return InvalidArgumentError("max_queued_requests must be at least 1");
  }
  STRATA_RETURN_IF_ERROR(options.adaptive.Validate());
  if (!(options.background_max_slowdown >= 0) || !std::isfinite(options.background_max_slowdown)) {
    return InvalidArgumentError("batch_max_slowdown must be a finite number >= 0, got " +
                                std::to_string(options.background_max_slowdown));
  }
  if (options.speculative.proposer != nullptr) {
    STRATA_RETURN_IF_ERROR(options.speculative.policy.Validate());
  }
  if (backend->kv_geometry().num_blocks < 1) {
    return FailedPreconditionError("the KV cache holds no block");
  }
  return std::unique_ptr<Engine>(new Engine(backend, tokenizer, options));
}

Engine::Engine(backend::Backend* backend, const tokenizer::Tokenizer* tokenizer,
               const EngineOptions& options)
    : backend_(backend),
      tokenizer_(tokenizer),
      options_(options),
      end_of_generation_ids_(tokenizer->vocab().EndOfGenerationIds()),
      kv_(KvOptions(*backend, options)),
      scheduler_(ResolvedSchedulerConfig(*backend, options), &kv_),
      adaptive_(options.adaptive),
      runner_(backend),
      policy_(options.speculative.policy.Validate().ok() ? options.speculative.policy
                                                         : SpeculationPolicyOptions{}),
      queue_(options.max_queued_requests),
      masks_(std::make_unique<MaskHelper>(std::max(0, options.constraint_mask_threads),
                                          options.constraint_mask_nice,
                                          [this] { queue_.Wake(); })) {
  options_.scheduler = ResolvedSchedulerConfig(*backend, options);
  PublishStats(nullptr);
}

Engine::~Engine() { Stop(); }

StatusOr<std::shared_ptr<RequestStream>> Engine::Submit(Request request) {
  const model::ModelConfig& config = backend_->config();
  STRATA_RETURN_IF_ERROR(sampling::Validate(request.params, static_cast<int>(config.vocab_size)));
  if (request.prompt.empty()) return InvalidArgumentError("the prompt is empty");
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    const int32_t t = request.prompt[i];
    if (t < 0 || t >= config.vocab_size) {
      return InvalidArgumentError("prompt token " + std::to_string(i) + " is " + std::to_string(t) +
                                  ", outside the vocabulary [0, " +
                                  std::to_string(config.vocab_size) + ")");
    }
  }
  STRATA_RETURN_IF_ERROR(
      CheckRequestFits(static_cast<int64_t>(request.prompt.size()), request.params.max_tokens,
                       {options_.scheduler.max_model_len, kv_.num_blocks(), kv_.block_size()}));
  const RequestId id = next_id_.fetch_add(1);
  auto stream = std::make_shared<RequestStream>(id);
  Submission submission{id, std::move(request), stream, Clock::now()};
  STRATA_RETURN_IF_ERROR(queue_.Push(std::move(submission)));
  return stream;
}

void Engine::Cancel(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(cancel_mutex_);
    cancels_.push_back(id);
  }
  queue_.Wake();
}

void Engine::Start() {
  STRATA_CHECK(!loop_.joinable());
  loop_ = std::thread([this] { Loop(); });
}

void Engine::Stop() {
  std::call_once(stop_once_, [this] {
    queue_.Close();
    stop_.store(true);
    queue_.Wake();
    if (loop_.joinable()) loop_.join();
    // The loop is gone: this thread owns the engine state now.
    std::vector<Submission> queued;
    queue_.Pop(queue_.size(), &queued);
    for (Submission& s : queued) {
      s.stream->Push(UnscheduledLast(s, sampling::FinishReason::kCancelled));
    }
    std::vector<RequestId> ids;
    for (const auto& [id, live] : live_) ids.push_back(id);
    for (RequestId id : ids) {
      scheduler_.Cancel(id);
      EndRequest(id, sampling::FinishReason::kCancelled, OkStatus());
    }
    PublishStats(nullptr);
  });
}

void Engine::Loop() {
  while (!stop_.load()) {
    bool did_work = false;
    Status status = Step(&did_work);
    if (!status.ok()) LogError("engine step failed: " + status.ToString());
    if (!did_work) queue_.WaitForWork(std::chrono::milliseconds(100));
  }
}

Status Engine::Step(bool* did_work) {
  STRATA_CHECK(did_work != nullptr);
  *did_work = false;
  TakeCancellations();
  TakeSubmissions();
  TakeReadyMasks();
  PrepareMasks();
  ProposeDrafts();

  const SchedulerOutput out = scheduler_.Schedule();
  if (out.scheduled.empty()) {
    PublishStats(nullptr);
    return OkStatus();
  }
  *did_work = true;
  const Clock::time_point scheduled_at = Clock::now();
  for (const ScheduledSequence& s : out.scheduled) {
    Live& live = *live_.at(s.seq->id);
    if (live.first_scheduled == Clock::time_point()) {
      live.first_scheduled = scheduled_at;
      live.usage.cached_prompt_tokens = s.seq->num_cached_tokens;
    }
  }
  // A step that computes a generated token is an inter-token gap for that sequence.
  bool had_decodes = false;
  // Only decode and verification chunks: a data point for the speculation cost fit.
  bool decode_only = true;
  // Sequences of the step that are not background work (read before Postprocess finishes any),
  // and rows sampled.
  int64_t foreground = 0;
  int64_t rows = 0;
  for (const ScheduledSequence& s : out.scheduled) {
    foreground += s.seq->background ? 0 : 1;
    rows += s.samples ? 1 + s.num_draft : 0;
    had_decodes |= s.start_pos >= s.seq->prompt_len;
    decode_only &= s.samples && s.num_tokens == 1 + s.num_draft && s.start_pos >= s.seq->prompt_len;
  }
  const Clock::time_point start = Clock::now();
  Status status = RunBatch(out);
  if (!status.ok()) {
    // Fail this step's requests only; their blocks are freed and the engine goes on.
    std::vector<RequestId> ids;
    for (const ScheduledSequence& s : out.scheduled) ids.push_back(s.seq->id);
    for (RequestId id : ids) {
      scheduler_.Cancel(id);
      EndRequest(id, sampling::FinishReason::kError, status);
    }
    PublishStats(&out);
    return status;
  }
  RecordStages(out, start);
  scheduler_.OnStepDone(out);
  Postprocess(out);
  if (decode_only && options_.speculative.proposer != nullptr) {
    policy_.ObserveStep(out.num_scheduled_tokens,
                        std::chrono::duration<double>(Clock::now() - start).count());
  }

  SizeBackgroundWork(out.num_scheduled_tokens, rows, foreground,
                     std::chrono::duration<double>(Clock::now() - start).count());
  if (options_.batching == BatchingMode::kAdaptive) {
    const SchedulerStats ss = scheduler_.Stats();
    const bool waiting = queue_.size() > 0 || ss.num_waiting > 0 || ss.num_pending_tokens > 0;
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    scheduler_.SetTokenBudget(
        adaptive_.Observe(seconds, had_decodes, waiting, adaptive_.Floor(ss.num_running, waiting)));
  }
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.busy_seconds_total += std::chrono::duration<double>(Clock::now() - scheduled_at).count();
  }
  PublishStats(&out);
  return OkStatus();
}

void Engine::SizeBackgroundWork(int64_t step_tokens, int64_t step_rows, int64_t foreground,
                                double step_seconds) {
  step_cost_.Observe(step_tokens, step_rows, step_seconds);
  // The smallest step the other requests take next: one decode row for each that ran. Sized
  // against it, background work adds at most the allowed fraction to any of their steps.
  if (foreground == 0) foreground = scheduler_.num_running();
  scheduler_.SetBackgroundBudget(
      step_cost_.BackgroundBudgetFor(foreground, options_.background_max_slowdown));
}

void Engine::TakeCancellations() {
  std::vector<RequestId> ids;
  {
    std::lock_guard<std::mutex> lock(cancel_mutex_);
    ids.swap(cancels_);
  }
  for (RequestId id : ids) {
    Submission queued;
    if (queue_.Remove(id, &queued)) {
      queued.stream->Push(UnscheduledLast(queued, sampling::FinishReason::kCancelled));
      std::lock_guard<std::mutex> lock(stats_mutex_);
      ++stats_.cancelled_total;
      continue;
    }
    if (live_.count(id) == 0) continue;  // finished already, or unknown
    scheduler_.Cancel(id);
    EndRequest(id, sampling::FinishReason::kCancelled, OkStatus());
  }
}

void Engine::TakeSubmissions() {
  // Keep about one batch of candidates waiting in the scheduler; the rest stay in the bounded,
  // priority-ordered queue.
  const int64_t room = int64_t{options_.scheduler.max_batch_size} - scheduler_.num_waiting();
  if (room <= 0) return;
  std::vector<Submission> taken;
  queue_.Pop(static_cast<size_t>(room), &taken);
  for (Submission& s : taken) {
    auto seq = std::make_unique<Sequence>(s.id, s.request.prompt, s.request.params.max_tokens,
                                          s.request.priority, s.request.background);
    auto live = std::make_unique<Live>(s.request, s.stream, *tokenizer_, end_of_generation_ids_);
    Status added = scheduler_.Add(std::move(seq));
    if (!added.ok()) {
      StreamChunk last = UnscheduledLast(s, sampling::FinishReason::kError);
      last.error = added;
      s.stream->Push(std::move(last));
      std::lock_guard<std::mutex> lock(stats_mutex_);
      ++stats_.failed_total;
      continue;
    }
    live->submitted = s.submitted;
    live->usage.prompt_tokens = static_cast<int64_t>(s.request.prompt.size());
    live_.emplace(s.id, std::move(live));
  }
}

void Engine::ProposeDrafts() {
  Proposer* proposer = options_.speculative.proposer.get();
  if (proposer == nullptr) return;
  const int64_t decoding = scheduler_.num_running();
  draft_requests_.clear();
  for (const auto& [id, live] : live_) {
    if (!live->speculative || live->mask_pending) continue;
    const int64_t room = scheduler_.DraftRoom(id);
    if (room < 1) continue;
    const int64_t length = std::min<int64_t>(room, policy_.DraftLength(live->acceptance, decoding));
    if (length < 1) continue;
    draft_requests_.push_back(
        {id, scheduler_.Find(id)->tokens, static_cast<int32_t>(length), nullptr});
  }
  if (draft_requests_.empty()) return;
  if (drafts_.size() < draft_requests_.size()) drafts_.resize(draft_requests_.size());
  for (size_t i = 0; i < draft_requests_.size(); ++i) {
    drafts_[i].clear();
    draft_requests_[i].draft = &drafts_[i];
  }
  const Clock::time_point start = Clock::now();
  proposer->ProposeAll(draft_requests_);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  int64_t proposed = 0;
  for (size_t i = 0; i < draft_requests_.size(); ++i) {
    proposed +=
        std::min<int64_t>(static_cast<int64_t>(drafts_[i].size()), draft_requests_[i].max_tokens);
  }
  policy_.ObserveProposal(proposed, seconds);
  for (size_t i = 0; i < draft_requests_.size(); ++i) {
    std::vector<int32_t>& draft = drafts_[i];
    const auto length = static_cast<size_t>(draft_requests_[i].max_tokens);
    if (draft.size() > length) draft.resize(length);
    if (!draft.empty()) scheduler_.SetDraft(draft_requests_[i].id, draft);
  }
}

void Engine::RecordStages(const SchedulerOutput& out, Clock::time_point start) {
  for (const kv::SequenceId id : out.preempted) {
    if (auto it = live_.find(id); it != live_.end()) ++it->second->preemptions;
  }
  const Clock::time_point end = Clock::now();
  for (const ScheduledSequence& s : out.scheduled) {
    if (s.start_pos >= s.seq->prompt_len) continue;  // a decode or verification chunk
    Live& live = *live_.at(s.seq->id);
    if (!live.record_stages) continue;
    if (live.prefill_chunks.size() >= RequestStages::kMaxPrefillChunks) {
      ++live.prefill_chunks_dropped;
      continue;
    }
    live.prefill_chunks.push_back({start, end, s.start_pos, s.num_tokens});
  }
}

void Engine::ForgetDrafts(RequestId id) {
  if (options_.speculative.proposer != nullptr) options_.speculative.proposer->Forget(id);
}

Status Engine::RunBatch(const SchedulerOutput& out) {
  row_samplers_.clear();
  row_masks_.clear();
  size_t masks = 0;
  for (const ScheduledSequence& s : out.scheduled) {
    if (!s.samples) continue;
    if (s.num_draft > 0) {
      // The engine samples a drafted chunk's rows itself, in order (VerifyDraft).
      row_samplers_.insert(row_samplers_.end(), static_cast<size_t>(1 + s.num_draft), nullptr);
      row_masks_.insert(row_masks_.end(), static_cast<size_t>(1 + s.num_draft), {});
      continue;
    }
    Live& live = *live_.at(s.seq->id);
    if (!live.constraint || live.mask_pending) {
      // A row whose mask the helper is still computing comes back as logits (Postprocess).
      row_samplers_.push_back(live.mask_pending ? nullptr : &live.sampler);
      row_masks_.emplace_back();
      continue;
    }
    // A constrained row is sampled under its mask wherever the runner samples (on the device
    // as a bitmask). A mask that allows nothing leaves the row unsampled: the request fails.
    if (masks == mask_storage_.size()) mask_storage_.emplace_back();
    std::vector<uint32_t>& mask = mask_storage_[masks++];
    FillMask(&live, &mask);
    const bool any = sampling::AnyTokenAllowed(mask);
    row_samplers_.push_back(any ? &live.sampler : nullptr);
    row_masks_.emplace_back(any ? std::span<const uint32_t>(mask) : std::span<const uint32_t>());
  }
  return runner_.Run(MakeBatch(out, kv_), row_samplers_,
                     masks > 0 ? std::span<const std::span<const uint32_t>>(row_masks_)
                               : std::span<const std::span<const uint32_t>>(),
                     &sampled_);
}

bool Engine::VerifyDraft(const ScheduledSequence& s, size_t row, Live* live,
                         OutputProcessor::Output* kept) {
  const std::span<const int32_t> draft(s.seq->tokens.data() + s.start_pos + 1,
                                       static_cast<size_t>(s.num_draft));
  int64_t accepted = 0;
  bool rejected = false;
  for (int64_t i = 0; i <= s.num_draft; ++i) {
    // Under a constraint each row is masked by the state the kept tokens before it reached, so
    // a draft token the format does not allow is never sampled (rejected like any other).
    const std::span<float> logits = runner_.row(row + static_cast<size_t>(i));
    const int32_t token =
        live->constraint ? SampleConstrained(live, logits) : live->sampler.Sample(logits);
    if (token < 0) return false;
    std::span<const sampling::SampleLogprobs> logprobs;
    if (live->wants_logprobs) logprobs = {&live->sampler.last_logprobs(), 1};
    OutputProcessor::Output o = Timed(&live->detokenize_seconds, [&] {
      return live->output.Append(std::span<const int32_t>(&token, 1), logprobs, &live->sampler);
    });
    kept->token_ids.insert(kept->token_ids.end(), o.token_ids.begin(), o.token_ids.end());
    kept->logprobs.insert(kept->logprobs.end(), o.logprobs.begin(), o.logprobs.end());
    kept->text += o.text;
    if (o.finish_reason) {
      kept->finish_reason = o.finish_reason;
      break;
    }
    if (i == s.num_draft) break;  // every draft token accepted: this was the token after them
    if (token != draft[static_cast<size_t>(i)]) {
      rejected = true;
      break;
    }
    ++accepted;
  }
  policy_.ObserveVerification(&live->acceptance, s.num_draft, accepted, rejected);
  std::lock_guard<std::mutex> lock(stats_mutex_);
  ++stats_.speculative_verifications_total;
  stats_.speculative_proposed_tokens_total += s.num_draft;
  stats_.speculative_accepted_tokens_total += accepted;
  ++stats_.speculative_accepted_lengths[static_cast<size_t>(accepted)];
  return true;
}

void Engine::FailConstrained(RequestId id) {
  scheduler_.Cancel(id);
  EndRequest(id, sampling::FinishReason::kError,
             InvalidArgumentError("the output cannot go on under its structured-output "
                                  "constraint (no token is allowed next)"));
}

void Engine::FillMask(Live* live, std::vector<uint32_t>* mask) {
  const size_t words = sampling::TokenMaskWords(backend_->config().vocab_size);
  if (live->has_ready_mask && live->ready_mask.size() == words) {
    mask->swap(live->ready_mask);
    live->has_ready_mask = false;
    return;
  }
  live->has_ready_mask = false;
  mask->assign(words, 0);
  live->constraint->FillAllowed(*mask);
}

void Engine::PrepareMasks() {
  for (auto& [id, live] : live_) {
    if (!live->constraint || live->mask_pending || live->has_ready_mask) continue;
    if (live->constraint->AllowedIsCheap()) continue;
    if (!masks_->Start(id, live->constraint,
                       sampling::TokenMaskWords(backend_->config().vocab_size))) {
      continue;  // the helper is off or full: computed on this thread when sampled
    }
    live->mask_pending = true;
    ++masks_pending_;
  }
}

void Engine::TakeReadyMasks() {
  masks_->TakeReady(&ready_masks_);
  for (auto& [id, mask] : ready_masks_) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;  // ended meanwhile
    Live& live = *it->second;
    live.mask_pending = false;
    --masks_pending_;
    live.has_ready_mask = true;
    live.ready_mask = std::move(mask);
    if (!live.deferred_logits.empty()) SampleDeferred(id, &live);
  }
  if (!ready_masks_.empty()) {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.constraint_masks_off_thread_total += static_cast<int64_t>(ready_masks_.size());
  }
}

void Engine::SampleDeferred(RequestId id, Live* live) {
  std::vector<float> logits;
  logits.swap(live->deferred_logits);  // leaves it empty: no longer waiting
  const int64_t generated = KeepSampled(id, live, SampleMasked(live, logits));  // may end it
  scheduler_.SetPaused(id, false);  // false when it ended
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.generated_tokens_total += generated;
}

int32_t Engine::SampleMasked(Live* live, std::span<float> logits) {
  FillMask(live, &allowed_);
  if (!sampling::AnyTokenAllowed(allowed_)) return -1;
  sampling::ApplyTokenMask(allowed_, logits);
  return live->sampler.Sample(logits);
}

int32_t Engine::SampleConstrained(Live* live, std::span<float> logits) {
  const int32_t token = SampleMasked(live, logits);
  return token >= 0 && live->constraint->Accept(token) ? token : -1;
}

void Engine::Postprocess(const SchedulerOutput& out) {
  size_t row = 0;
  int64_t generated = 0;
  for (const ScheduledSequence& s : out.scheduled) {
    if (!s.samples) continue;
    const RequestId id = s.seq->id;
    Live& live = *live_.at(id);
    if (s.num_draft > 0) {
      OutputProcessor::Output o;
      const bool verified = VerifyDraft(s, row, &live, &o);
      row += static_cast<size_t>(1 + s.num_draft);
      if (!verified) {
        FailConstrained(id);
        continue;
      }
      if (!o.finish_reason) {
        // The accepted draft tokens are computed already; the last kept token is not.
        scheduler_.ResolveDraft(id, static_cast<int64_t>(o.token_ids.size()) - 1);
        scheduler_.AppendToken(id, o.token_ids.back());
      }
      generated += Deliver(id, &live, std::move(o));
    } else if (live.mask_pending) {
      // Its mask is not ready: the row's logits wait for it (TakeReadyMasks), the sequence
      // sits out the steps until then.
      const std::span<const float> logits = runner_.row(row++);
      live.deferred_logits.assign(logits.begin(), logits.end());
      scheduler_.SetPaused(id, true);
    } else {
      // A constrained row was sampled under its mask (-1: the mask allowed nothing).
      generated += KeepSampled(id, &live, sampled_[row++]);
    }
  }
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.generated_tokens_total += generated;
}

int64_t Engine::KeepSampled(RequestId id, Live* live, int32_t token) {
  if (live->constraint && (token < 0 || !live->constraint->Accept(token))) {
    FailConstrained(id);
    return 0;
  }
  std::span<const sampling::SampleLogprobs> logprobs;
  if (live->wants_logprobs) logprobs = {&live->sampler.last_logprobs(), 1};
  OutputProcessor::Output o = Timed(&live->detokenize_seconds, [&] {
    return live->output.Append(std::span<const int32_t>(&token, 1), logprobs, &live->sampler);
  });
  scheduler_.AppendTokens(id, o.token_ids);
  return Deliver(id, live, std::move(o));
}

int64_t Engine::Deliver(RequestId id, Live* live_request, OutputProcessor::Output o) {
  Live& live = *live_request;
  const auto generated = static_cast<int64_t>(o.token_ids.size());
  live.usage.completion_tokens += generated;
  StreamChunk chunk;
  chunk.token_ids = std::move(o.token_ids);
  chunk.logprobs = std::move(o.logprobs);
  chunk.text = std::move(o.text);
  chunk.finish_reason = o.finish_reason;
  chunk.time = Clock::now();
  if (live.first_token == Clock::time_point()) live.first_token = chunk.time;
  const bool finished = chunk.finish_reason.has_value();
  if (finished) FillUsage(live, &chunk);
  live.stream->Push(std::move(chunk));
  if (finished) {
    scheduler_.Finish(id);
    ForgetDrafts(id);
    live_.erase(id);
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.finished_total;
  }
  return generated;
}

void Engine::EndRequest(RequestId id, sampling::FinishReason reason, Status error) {
  auto it = live_.find(id);
  STRATA_CHECK(it != live_.end());
  Live& live = *it->second;
  OutputProcessor::Output last =
      Timed(&live.detokenize_seconds, [&] { return live.output.Finish(reason); });
  StreamChunk chunk;
  chunk.text = std::move(last.text);
  chunk.finish_reason = reason;
  chunk.error = std::move(error);
  chunk.time = Clock::now();
  FillUsage(live, &chunk);
  live.stream->Push(std::move(chunk));
  ForgetDrafts(id);
  if (live.mask_pending) {
    masks_->Drop(id);
    --masks_pending_;
  }
  live_.erase(it);
  std::lock_guard<std::mutex> lock(stats_mutex_);
  if (reason == sampling::FinishReason::kCancelled) ++stats_.cancelled_total;
  if (reason == sampling::FinishReason::kError) ++stats_.failed_total;
}

Status Engine::Preload(std::vector<int32_t> prompt) {
  STRATA_CHECK(!loop_.joinable());
  Request request;
  request.prompt = std::move(prompt);
  request.params.temperature = 0;
  request.params.max_tokens = 1;
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<RequestStream> stream, Submit(std::move(request)));
  while (!stream->finished()) {
    bool did_work = false;
    STRATA_RETURN_IF_ERROR(Step(&did_work));
    if (!did_work && !stream->finished()) return InternalError("preloading a prompt stalled");
  }
  StreamChunk chunk;
  while (stream->Next(&chunk, std::chrono::seconds(0))) {
    if (!chunk.error.ok()) return chunk.error;
  }
  return OkStatus();
}

EngineStats Engine::Stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  EngineStats s = stats_;
  s.queued = static_cast<int64_t>(queue_.size());
  return s;
}

void Engine::PublishStats(const SchedulerOutput* out) {
  const SchedulerStats ss = scheduler_.Stats();
  // Admission counts the batch slots the next step can fill as well as the queue's backlog;
  // sequences waiting beyond those slots count against the backlog (a negative room).
  queue_.SetSchedulerRoom(int64_t{options_.scheduler.max_batch_size} - ss.num_running -
                          ss.num_waiting);
  EngineStats snapshot;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    if (out != nullptr) {
      ++stats_.steps;
      stats_.last_batch_sequences = static_cast<int64_t>(out->scheduled.size());
      stats_.last_batch_tokens = out->num_scheduled_tokens;
    } else {
      stats_.last_batch_sequences = 0;
      stats_.last_batch_tokens = 0;
    }
    stats_.waiting = ss.num_waiting;
    stats_.running = ss.num_running;
    stats_.token_budget = ss.token_budget;
    stats_.preemptions_total = ss.num_preemptions;
    stats_.kv = ss.kv;
    stats_.constraint_masks_pending = masks_pending_;
    if (!options_.step_observer) return;
    snapshot = stats_;
  }
  snapshot.queued = static_cast<int64_t>(queue_.size());
  options_.step_observer(snapshot, out != nullptr);
}

}  // namespace strata::engine
