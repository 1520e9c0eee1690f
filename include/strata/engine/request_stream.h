// RequestStream: one request's output as it is produced, from the engine thread to whoever
// consumes it (a gRPC handler, the CLI, a test).
//
// The engine pushes chunks (new token ids and the text they made safe to show); the last chunk
// carries the finish reason, and an error status when the engine failed the request. Chunks
// are never merged or dropped: the consumer sees every token exactly once, in order.
//
// Thread rules: Push/Close from the engine thread only; Next/TryNext from one consumer thread
// at a time; id()/finished() from any thread. Shared by both sides through a shared_ptr: the
// engine keeps pushing (into a buffer nobody reads) if the consumer drops its end; a consumer
// that no longer wants the output calls Engine::Cancel.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "strata/common/status.h"
#include "strata/engine/request.h"
#include "strata/sampling/finish_reason.h"
#include "strata/sampling/sampler.h"

namespace strata::engine {

// What a finished request consumed (on its last chunk).
struct RequestUsage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // Prompt tokens whose KV came from the prefix cache when the request was first scheduled.
  int64_t cached_prompt_tokens = 0;
};

// One forward over part of a request's prompt (or over its prompt and generated tokens again,
// after a preemption), for traces.
struct PrefillChunkTime {
  std::chrono::steady_clock::time_point start;  // the step's forward began
  std::chrono::steady_clock::time_point end;    // ... and ended
  int64_t start_position = 0;                   // the first position it computed
  int64_t tokens = 0;                           // positions it computed
};

// When a request reached each stage (steady clock; the epoch for a stage it never reached).
struct RequestStages {
  // Prefill chunks recorded per request at most; later ones are counted in
  // prefill_chunks_dropped.
  static constexpr size_t kMaxPrefillChunks = 128;

  std::chrono::steady_clock::time_point submitted;
  std::chrono::steady_clock::time_point first_scheduled;
  std::chrono::steady_clock::time_point first_token;
  std::chrono::steady_clock::time_point finished;
  // Only for a request with Request::record_stages.
  std::vector<PrefillChunkTime> prefill_chunks;
  int64_t prefill_chunks_dropped = 0;
  int32_t preemptions = 0;
};

// Where a finished request's time went, in seconds (on its last chunk). A request that never
// reached a stage reports 0 for it.
struct RequestTiming {
  double queue_seconds = 0;                // Submit -> first scheduled
  double time_to_first_token_seconds = 0;  // Submit -> first token
  double total_seconds = 0;                // Submit -> finished
  double prefill_seconds = 0;              // first scheduled -> first token
  double decode_seconds = 0;               // first token -> finished
  // Time the engine spent turning the request's tokens into text and checking stop strings
  // (part of its steps, within prefill and decode).
  double detokenize_seconds = 0;
  RequestStages stages;
};

struct StreamChunk {
  std::vector<int32_t> token_ids;  // tokens generated since the previous chunk
  std::string text;                // text they made safe to show (may be "")
  // One per token when the request asked for logprobs (SamplingParams::logprobs > 0).
  std::vector<sampling::SampleLogprobs> logprobs;
  // Set on the last chunk only.
  std::optional<sampling::FinishReason> finish_reason;
  Status error;  // not OK only on a last chunk with kError
  // Set on the last chunk only.
  RequestUsage usage;
  RequestTiming timing;
  // On every chunk of a request whose output came from a response cache (a stored answer, or a
  // computation another identical request started), not from a computation of its own.
  bool from_cache = false;
  // Timing, for metrics: when the engine pushed the chunk.
  std::chrono::steady_clock::time_point time;
};

class RequestStream {
 public:
  explicit RequestStream(RequestId id) : id_(id) {}

  RequestId id() const { return id_; }

  // Engine side. Push after the last chunk (one with finish_reason) is a programmer error.
  void Push(StreamChunk chunk);

  // Consumer side: waits for the next chunk and moves it to *out. Returns false (and leaves
  // *out alone) once the last chunk has been taken, or when `timeout` passes first (then
  // timed_out() says so). A zero timeout polls.
  bool Next(StreamChunk* out,
            std::chrono::steady_clock::duration timeout = std::chrono::hours(24 * 365));

  // Consumer side, for event-driven consumers (a gRPC reactor) that must not block a thread
  // in Next: `listener` runs after every Push, on the engine thread, outside the stream's lock;
  // it must be cheap and must not block (typically: start a write if none is in flight, which
  // then takes chunks with a zero-timeout Next). If chunks are already queued when it is set,
  // it runs once at once, on the calling thread. Any thread; replaces an earlier listener.
  void SetListener(std::function<void()> listener);

  // True once the engine pushed the last chunk (it may not have been taken yet).
  bool finished() const;
  // True when the latest Next returned false because of its timeout.
  bool timed_out() const;

 private:
  const RequestId id_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamChunk> chunks_;
  bool finished_ = false;  // the last chunk was pushed
  bool drained_ = false;   // ... and taken
  bool timed_out_ = false;
  std::shared_ptr<std::function<void()>> listener_;
};

}  // namespace strata::engine
