#include "strata/engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "strata/backend/cpu/cpu_backend.h"
#include "strata/engine/generator.h"
#include "strata/model/gguf_file.h"
#include "support/engine_drain.h"
#include "support/failing_backend.h"
#include "support/host_sampling_backend.h"
#include "support/tiny_llama.h"

namespace strata::engine {
namespace {

using namespace strata::testing::tiny_llama;  // NOLINT: the tiny model's constants and builders
using sampling::FinishReason;
using sampling::SamplingParams;

using Output = strata::testing::EngineOutput;
using strata::testing::Collect;
using strata::testing::Drain;

SamplingParams Greedy(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Prompts of different lengths, all different from their first token on.
std::vector<int32_t> Prompt(int i, int64_t length) {
  std::vector<int32_t> p = {1};
  for (int64_t k = 1; k < length; ++k) p.push_back(static_cast<int32_t>(3 + (i * 7 + k * 5) % 60));
  return p;
}

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bytes_ = new std::vector<uint8_t>(BuildModel());
    auto file = model::GgufFile::Parse(MappedFile::FromBytes(*bytes_));
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    file_ = new model::GgufFile(std::move(*file));
  }
  static void TearDownTestSuite() {
    delete file_;
    delete bytes_;
  }

  void SetUp() override {
    tokenizer_ = MakeTokenizer();
    ASSERT_NE(tokenizer_, nullptr);
  }

  static std::unique_ptr<backend::cpu::CpuBackend> MakeBackend(int64_t kv_budget_bytes) {
    return MakeBackendFor(*file_, kv_budget_bytes);
  }

  // The reference: the request alone through the single-request Generator.
  std::vector<int32_t> Alone(const std::vector<int32_t>& prompt, const SamplingParams& params) {
    auto backend = MakeBackend(int64_t{1} << 20);
    Generator generator(backend.get(), tokenizer_.get());
    auto result = generator.Generate(prompt, params, nullptr);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? result->tokens : std::vector<int32_t>{};
  }

  // Runs `requests` at once on `backend`, with chunked prefills mixed with decodes.
  std::vector<Output> RunMixed(backend::Backend* backend, const std::vector<Request>& requests) {
    EngineOptions options;
    options.scheduler.max_batched_tokens = 24;
    auto engine = MakeEngine(backend, options);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const Request& r : requests) {
      auto s = engine->Submit(r);
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      streams.push_back(*s);
    }
    return Drain(*engine, streams);
  }

  std::unique_ptr<Engine> MakeEngine(backend::Backend* backend, EngineOptions options) {
    auto engine = Engine::Create(backend, tokenizer_.get(), options);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    return engine.ok() ? std::move(*engine) : nullptr;
  }

  // Submits `n` greedy requests (prompts Prompt(i, prompt_len)), drains them and checks that
  // each got the tokens it gets alone.
  void ExpectEveryoneGetsTheirSoloTokens(Engine& engine, int n, int prompt_len,
                                         int32_t max_tokens) {
    std::vector<Request> requests;
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < n; ++i) {
      Request r;
      r.prompt = Prompt(i, prompt_len);
      r.params = Greedy(max_tokens);
      auto s = engine.Submit(r);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      requests.push_back(r);
      streams.push_back(*s);
    }
    std::vector<Output> out = Drain(engine, streams);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(out[i].tokens, Alone(requests[i].prompt, requests[i].params)) << i;
    }
  }

  static std::vector<uint8_t>* bytes_;
  static model::GgufFile* file_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
};

std::vector<uint8_t>* EngineTest::bytes_ = nullptr;
model::GgufFile* EngineTest::file_ = nullptr;

TEST_F(EngineTest, BusySecondsGrowWithStepsThatRunABatchOnly) {
  auto backend = MakeBackend(int64_t{1} << 20);
  auto engine = MakeEngine(backend.get(), {});
  EXPECT_EQ(engine->Stats().busy_seconds_total, 0.0);
  Request r;
  r.prompt = Prompt(0, 9);
  r.params = Greedy(8);
  auto stream = engine->Submit(r);
  ASSERT_TRUE(stream.ok());
  const auto start = std::chrono::steady_clock::now();
  Drain(*engine, {*stream});
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double busy = engine->Stats().busy_seconds_total;
  EXPECT_GT(busy, 0.0);
  EXPECT_LE(busy, elapsed);
  for (int i = 0; i < 5; ++i) {
    bool did_work = true;
    ASSERT_TRUE(engine->Step(&did_work).ok());
    EXPECT_FALSE(did_work);
  }
  EXPECT_EQ(engine->Stats().busy_seconds_total, busy);  // idle steps count nothing
}

TEST_F(EngineTest, OneRequestGivesTheGeneratorsTokensAndText) {
  auto backend = MakeBackend(int64_t{1} << 20);
  auto engine = MakeEngine(backend.get(), {});
  Request r;
  r.prompt = Prompt(0, 9);
  r.params = Greedy(20);
  auto stream = engine->Submit(r);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  std::vector<Output> out = Drain(*engine, {*stream});
  EXPECT_EQ(out[0].tokens, Alone(r.prompt, r.params));
  EXPECT_EQ(out[0].finish, FinishReason::kLength);
  EXPECT_TRUE(out[0].error.ok());
  EXPECT_EQ(out[0].chunks, 20);  // one chunk per token, the last one carries the reason
  EXPECT_EQ(out[0].usage.prompt_tokens, 9);
  EXPECT_EQ(out[0].usage.completion_tokens, 20);
  EXPECT_EQ(out[0].usage.cached_prompt_tokens, 0);
  EXPECT_GE(out[0].timing.queue_seconds, 0);
  EXPECT_GT(out[0].timing.time_to_first_token_seconds, out[0].timing.queue_seconds);
  EXPECT_GT(out[0].timing.total_seconds, out[0].timing.time_to_first_token_seconds);
  const EngineStats stats = engine->Stats();
  EXPECT_EQ(stats.finished_total, 1);
  EXPECT_EQ(stats.generated_tokens_total, 20);
  EXPECT_EQ(stats.running + stats.waiting + stats.queued, 0);
  EXPECT_EQ(stats.kv.used_blocks, 0);
}

// The step observer sees every step: batches while the request runs (their tokens adding up to
// the prompt plus the generated tokens it fed back), then an idle step with nothing running.
TEST_F(EngineTest, TheStepObserverSeesEveryBatchAndTheIdleState) {
  auto backend = MakeBackend(int64_t{1} << 20);
  struct Seen {
    int batches = 0;
    int idle = 0;
    int64_t tokens = 0;
    EngineStats last;
  };
  auto seen = std::make_shared<Seen>();
  EngineOptions options;
  options.scheduler.max_batched_tokens = 4;
  options.step_observer = [seen](const EngineStats& stats, bool ran_batch) {
    (ran_batch ? seen->batches : seen->idle) += 1;
    if (ran_batch) {
      EXPECT_GT(stats.last_batch_tokens, 0);
      seen->tokens += stats.last_batch_tokens;
    } else {
      EXPECT_EQ(stats.last_batch_tokens, 0);
    }
    seen->last = stats;
  };
  auto engine = MakeEngine(backend.get(), options);
  Request r;
  r.prompt = Prompt(1, 10);
  r.params = Greedy(5);
  auto stream = engine->Submit(r);
  ASSERT_TRUE(stream.ok());
  Drain(*engine, {*stream});
  EXPECT_EQ(seen->batches, 3 + 4);  // prompt chunks of 4, 4, 2; four more decode steps
  EXPECT_EQ(seen->tokens, 10 + 4);  // the last generated token is never run
  const int idle_before = seen->idle;
  bool did_work = true;
  ASSERT_TRUE(engine->Step(&did_work).ok());
  EXPECT_FALSE(did_work);
  EXPECT_EQ(seen->idle, idle_before + 1);
  EXPECT_EQ(seen->last.running, 0);
  EXPECT_EQ(seen->last.kv.used_blocks, 0);
  EXPECT_EQ(seen->last.kv.free_blocks, seen->last.kv.num_blocks);
}

TEST_F(EngineTest, ChunksCarryLogprobsOnlyWhenAskedFor) {
  auto backend = MakeBackend(int64_t{1} << 20);
  auto engine = MakeEngine(backend.get(), {});
  for (const int32_t top : {3, 0}) {
    Request r;
    r.prompt = Prompt(2, 7);
    r.params = Greedy(4);
    r.params.logprobs = top;
    auto stream = engine->Submit(r);
    ASSERT_TRUE(stream.ok());
    int tokens = 0;
    for (int step = 0; step < 100 && !(*stream)->finished(); ++step) {
      bool did_work = false;
      ASSERT_TRUE(engine->Step(&did_work).ok());
      StreamChunk chunk;
      while ((*stream)->Next(&chunk, std::chrono::seconds(0))) {
        tokens += static_cast<int>(chunk.token_ids.size());
        if (top == 0) {
          EXPECT_TRUE(chunk.logprobs.empty());
          continue;
        }
        ASSERT_EQ(chunk.logprobs.size(), chunk.token_ids.size());
        for (size_t i = 0; i < chunk.token_ids.size(); ++i) {
          EXPECT_EQ(chunk.logprobs[i].chosen.token, chunk.token_ids[i]);
          ASSERT_EQ(chunk.logprobs[i].top.size(), 3u);
          EXPECT_EQ(chunk.logprobs[i].top[0].token, chunk.token_ids[i]);  // greedy
          EXPECT_LE(chunk.logprobs[i].chosen.logprob, 0.0f);
        }
      }
    }
    EXPECT_EQ(tokens, 4);
  }
}

// Many requests at once, a small token budget (prefill chunks share steps with decodes) and
// chunks capped per sequence: each output is the one it has alone.
TEST_F(EngineTest, BatchedChunkedRequestsMatchTheirSoloOutputs) {
  auto backend = MakeBackend(int64_t{1} << 20);
  for (int64_t budget : {7, 64}) {
    EngineOptions options;
    options.scheduler.max_batched_tokens = budget;
    options.scheduler.long_prefill_chunk = 5;
    auto engine = MakeEngine(backend.get(), options);
    std::vector<Request> requests;
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < 8; ++i) {
      Request r;
      r.prompt = Prompt(i, 3 + 4 * i);
      r.params = Greedy(6 + i);
      auto s = engine->Submit(r);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      requests.push_back(r);
      streams.push_back(*s);
    }
    std::vector<Output> out = Drain(*engine, streams);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(out[i].tokens, Alone(requests[i].prompt, requests[i].params))
          << "request " << i << ", budget " << budget;
      EXPECT_EQ(out[i].finish, FinishReason::kLength);
    }
    EXPECT_LE(engine->Stats().last_batch_tokens, budget);
    EXPECT_EQ(engine->Stats().kv.used_blocks, 0);
  }
}

TEST_F(EngineTest, StagesAreTimedAndPrefillChunksRecordedWhenAsked) {
  auto backend = MakeBackend(int64_t{1} << 20);
  EngineOptions options;
  options.scheduler.long_prefill_chunk = 5;
  auto engine = MakeEngine(backend.get(), options);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 2; ++i) {
    Request r;
    r.prompt = Prompt(i, 17);
    r.params = Greedy(4);
    r.record_stages = i == 0;
    auto s = engine->Submit(r);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    streams.push_back(*s);
  }
  std::vector<Output> out = Drain(*engine, streams);

  const RequestTiming& t = out[0].timing;
  const RequestStages& st = t.stages;
  // 17 prompt positions in chunks of at most 5, contiguous, in order, between the first
  // schedule and the first token.
  ASSERT_EQ(st.prefill_chunks.size(), 4u);
  int64_t position = 0;
  auto previous_end = st.first_scheduled;
  for (const PrefillChunkTime& c : st.prefill_chunks) {
    EXPECT_EQ(c.start_position, position);
    EXPECT_GE(c.tokens, 1);
    EXPECT_LE(c.tokens, 5);
    EXPECT_LE(previous_end, c.start);
    EXPECT_LE(c.start, c.end);
    position += c.tokens;
    previous_end = c.end;
  }
  EXPECT_EQ(position, 17);
  EXPECT_EQ(st.prefill_chunks_dropped, 0);
  EXPECT_LE(st.submitted, st.first_scheduled);
  EXPECT_LE(previous_end, st.first_token);
  EXPECT_LE(st.first_token, st.finished);
  EXPECT_GT(t.prefill_seconds, 0);
  EXPECT_GT(t.decode_seconds, 0);
  EXPECT_NEAR(t.queue_seconds + t.prefill_seconds + t.decode_seconds, t.total_seconds, 1e-6);
  EXPECT_GT(t.detokenize_seconds, 0);
  EXPECT_LT(t.detokenize_seconds, t.total_seconds);

  // Without record_stages: the same stage times, no chunk list.
  EXPECT_TRUE(out[1].timing.stages.prefill_chunks.empty());
  EXPECT_NE(out[1].timing.stages.first_token, std::chrono::steady_clock::time_point());
  EXPECT_GT(out[1].timing.prefill_seconds, 0);
}

TEST_F(EngineTest, ASecondRequestWithTheSamePromptHitsThePrefixCache) {
  auto backend = MakeBackend(int64_t{1} << 20);
  auto engine = MakeEngine(backend.get(), {});
  Request r;
  r.prompt = Prompt(3, 23);  // 5 full blocks of 4, then 3 tokens
  r.params = Greedy(8);
  std::vector<Output> first;
  for (int round = 0; round < 2; ++round) {
    auto s = engine->Submit(r);
    ASSERT_TRUE(s.ok());
    std::vector<Output> out = Drain(*engine, {*s});
    if (round == 0) {
      first = out;
      EXPECT_EQ(engine->Stats().kv.prefix_hit_tokens, 0);
    } else {
      EXPECT_EQ(out[0].tokens, first[0].tokens);
      EXPECT_EQ(engine->Stats().kv.prefix_hit_tokens, 20);
      EXPECT_EQ(out[0].usage.cached_prompt_tokens, 20);
      EXPECT_EQ(out[0].usage.prompt_tokens, 23);
    }
  }
  EXPECT_EQ(first[0].tokens, Alone(r.prompt, r.params));
}

TEST_F(EngineTest, PreloadedPromptIsAHitOnFirstUse) {
  auto backend = MakeBackend(int64_t{1} << 20);
  auto engine = MakeEngine(backend.get(), {});
  const std::vector<int32_t> system = Prompt(5, 17);
  ASSERT_TRUE(engine->Preload(system).ok());
  EXPECT_EQ(engine->Stats().kv.used_blocks, 0);
  Request r;
  r.prompt = system;
  r.prompt.insert(r.prompt.end(), {10, 11, 12});
  r.params = Greedy(5);
  auto s = engine->Submit(r);
  ASSERT_TRUE(s.ok());
  std::vector<Output> out = Drain(*engine, {*s});
  EXPECT_EQ(engine->Stats().kv.prefix_hit_tokens, 16);
  EXPECT_EQ(out[0].tokens, Alone(r.prompt, r.params));
}

// A cache too small for everyone at once: sequences are preempted, recomputed and still give
// their solo outputs; afterwards every block is free.
TEST_F(EngineTest, PreemptedRequestsRecomputeAndGiveTheSameTokens) {
  // Per token: 2 layers x 2 KV heads x 16 dims x K and V x 2 bytes = 256 bytes; 12 blocks of 4.
  auto backend = MakeBackend(12 * 4 * 256);
  ASSERT_EQ(backend->kv_geometry().num_blocks, 12);
  EngineOptions options;
  options.enable_prefix_caching = false;
  options.scheduler.watermark = 0;
  auto engine = MakeEngine(backend.get(), options);
  std::vector<Request> requests;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.prompt = Prompt(i, 6);
    r.params = Greedy(14);  // 20 tokens = 5 blocks each; 4 of them need 20 > 12 blocks
    auto s = engine->Submit(r);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    requests.push_back(r);
    streams.push_back(*s);
  }
  std::vector<Output> out = Drain(*engine, streams);
  EXPECT_GT(engine->Stats().preemptions_total, 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(out[i].tokens, Alone(requests[i].prompt, requests[i].params)) << "request " << i;
  }
  EXPECT_EQ(engine->Stats().kv.free_blocks, 12);
}

TEST_F(EngineTest, CancelEndsQueuedAndRunningRequestsAndFreesTheirBlocks) {
  auto backend = MakeBackend(int64_t{1} << 20);
  EngineOptions options;
  options.scheduler.max_batch_size = 1;  // the second request stays queued
  auto engine = MakeEngine(backend.get(), options);
  Request r;
  r.prompt = Prompt(1, 10);
  r.params = Greedy(40);
  auto running = engine->Submit(r);
  auto queued = engine->Submit(r);
  ASSERT_TRUE(running.ok() && queued.ok());
  bool did_work = false;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine->Step(&did_work).ok());
  engine->Cancel((*running)->id());
  engine->Cancel((*queued)->id());
  engine->Cancel(12345);  // unknown: ignored
  ASSERT_TRUE(engine->Step(&did_work).ok());
  EXPECT_FALSE(did_work);
  Output a, b;
  Collect(**running, &a);
  Collect(**queued, &b);
  EXPECT_EQ(a.finish, FinishReason::kCancelled);
  EXPECT_GE(a.tokens.size(), 2u);
  EXPECT_LT(a.tokens.size(), 40u);
  EXPECT_EQ(b.finish, FinishReason::kCancelled);
  EXPECT_TRUE(b.tokens.empty());
  EXPECT_EQ(a.usage.completion_tokens, static_cast<int64_t>(a.tokens.size()));
  EXPECT_EQ(b.usage.prompt_tokens, 10);
  EXPECT_EQ(b.usage.completion_tokens, 0);
  EXPECT_EQ(b.timing.time_to_first_token_seconds, 0);  // never reached
  const EngineStats stats = engine->Stats();
  EXPECT_EQ(stats.cancelled_total, 2);
  EXPECT_EQ(stats.kv.used_blocks, 0);
  EXPECT_EQ(stats.running + stats.waiting + stats.queued, 0);
}

TEST_F(EngineTest, HigherPriorityIsServedFirst) {
  auto backend = MakeBackend(int64_t{1} << 20);
  EngineOptions options;
  options.scheduler.max_batch_size = 1;
  auto engine = MakeEngine(backend.get(), options);
  Request low, high;
  low.prompt = Prompt(1, 5);
  low.params = Greedy(3);
  high = low;
  high.priority = 5;
  auto a = engine->Submit(low);
  auto b = engine->Submit(high);
  ASSERT_TRUE(a.ok() && b.ok());
  bool did_work = false;
  ASSERT_TRUE(engine->Step(&did_work).ok());
  Output out_low, out_high;
  Collect(**a, &out_low);
  Collect(**b, &out_high);
  EXPECT_TRUE(out_low.tokens.empty());
  EXPECT_EQ(out_high.tokens.size(), 1u);
}

TEST_F(EngineTest, SubmitRejectsBadRequestsWithClearErrors) {
  auto backend = MakeBackend(int64_t{1} << 20);
  EngineOptions options;
  options.max_queued_requests = 1;
  auto engine = MakeEngine(backend.get(), options);
  Request r;
  r.params = Greedy(4);
  EXPECT_EQ(engine->Submit(r).status().code(), StatusCode::kInvalidArgument);  // empty
  r.prompt = {1, static_cast<int32_t>(kVocab)};
  auto bad_token = engine->Submit(r);
  EXPECT_EQ(bad_token.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_token.status().message().find("vocabulary"), std::string::npos);
  r.prompt = Prompt(0, 60);
  r.params.max_tokens = 10;  // 70 > the context of 64
  auto too_long = engine->Submit(r);
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("context"), std::string::npos);
  r.prompt = Prompt(0, 5);
  r.params.top_p = 0;
  EXPECT_EQ(engine->Submit(r).status().code(), StatusCode::kInvalidArgument);
  r.params = Greedy(4);
  // The queue of 1 plus every free batch slot of the idle scheduler.
  for (int i = 0; i < 1 + options.scheduler.max_batch_size; ++i) {
    ASSERT_TRUE(engine->Submit(r).ok()) << i;
  }
  EXPECT_EQ(engine->Submit(r).status().code(), StatusCode::kResourceExhausted);
}

// The admission tests' engine: a queue of 2 places and batches of 4 sequences; and their
// request, 5 prompt tokens and 8 greedy ones.
EngineOptions AdmissionOptions() {
  EngineOptions options;
  options.max_queued_requests = 2;
  options.scheduler.max_batch_size = 4;
  return options;
}

Request AdmissionRequest() {
  Request r;
  r.prompt = Prompt(0, 5);
  r.params = Greedy(8);
  return r;
}

// A burst between two steps is admitted up to the queue plus the batch slots the next step can
// fill; once the slots are taken only the queue's backlog remains.
TEST_F(EngineTest, AdmissionCountsTheSchedulersFreeBatchSlots) {
  auto backend = MakeBackend(int64_t{1} << 20);
  auto engine = MakeEngine(backend.get(), AdmissionOptions());
  const Request r = AdmissionRequest();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(engine->Submit(r).ok()) << i;
  const auto refused = engine->Submit(r);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("queue is full"), std::string::npos);
  bool did_work = false;
  ASSERT_TRUE(engine->Step(&did_work).ok());  // 4 run, 2 stay queued, no slot free
  EXPECT_EQ(engine->Submit(r).status().code(), StatusCode::kResourceExhausted);
}

// Sequences the engine takes beyond the scheduler's free slots wait there and count against
// the queue's backlog: what waits in all stays within max_queued_requests beyond the batch.
TEST_F(EngineTest, SequencesWaitingBeyondTheFreeSlotsCountAgainstTheQueue) {
  auto backend = MakeBackend(int64_t{1} << 20);
  auto engine = MakeEngine(backend.get(), AdmissionOptions());
  const Request r = AdmissionRequest();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(engine->Submit(r).ok()) << i;
  bool did_work = false;
  ASSERT_TRUE(engine->Step(&did_work).ok());  // 2 run, 2 slots free
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(engine->Submit(r).ok()) << i;
  EXPECT_EQ(engine->Submit(r).status().code(), StatusCode::kResourceExhausted);
  // The engine takes all 4 into its scheduler: 2 start, 2 wait there, so nothing more fits.
  ASSERT_TRUE(engine->Step(&did_work).ok());
  EXPECT_EQ(engine->Stats().queued, 0);
  EXPECT_EQ(engine->Submit(r).status().code(), StatusCode::kResourceExhausted);
}

TEST_F(EngineTest, RequestBeyondTheWholeCacheIsRejectedUpFront) {
  auto backend = MakeBackend(4 * 4 * 256);  // 4 blocks = 16 tokens
  auto engine = MakeEngine(backend.get(), {});
  Request r;
  r.prompt = Prompt(0, 10);
  r.params = Greedy(7);  // peaks at 16 tokens: fits
  EXPECT_TRUE(engine->Submit(r).ok());
  r.params = Greedy(8);  // 17: never fits
  auto s = engine->Submit(r);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("KV cache"), std::string::npos) << s.status().message();
}

// Eight requests, greedy and seeded sampled ones with every filter, penalties and
// log-probabilities, 12 tokens each.
std::vector<Request> MixedSamplingRequests() {
  std::vector<Request> requests;
  for (int i = 0; i < 8; ++i) {
    Request r;
    r.prompt = Prompt(i, 5 + i);
    r.params = Greedy(12);
    r.params.seed = 100 + static_cast<uint64_t>(i);
    switch (i % 4) {
      case 0:
        break;  // greedy
      case 1:
        r.params.temperature = 0.9f;
        r.params.top_k = 7;
        r.params.top_p = 0.8f;
        break;
      case 2:
        r.params.temperature = 1.3f;
        r.params.min_p = 0.05f;
        if (i == 6) r.params.logprobs = 2;
        break;
      case 3:
        r.params.temperature = 0.7f;
        r.params.repetition_penalty = 1.3f;
        r.params.frequency_penalty = 0.5f;
        if (i == 7) r.params.logprobs = 3;
        break;
    }
    requests.push_back(r);
  }
  return requests;
}

// Each request's tokens and log-probabilities in `a` are those in `b`, to the bit.
void ExpectSameOutputs(const std::vector<Output>& a, const std::vector<Output>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i;
    ASSERT_EQ(a[i].logprobs.size(), b[i].logprobs.size()) << "request " << i;
    for (size_t t = 0; t < a[i].logprobs.size(); ++t) {
      const sampling::SampleLogprobs& x = a[i].logprobs[t];
      const sampling::SampleLogprobs& y = b[i].logprobs[t];
      EXPECT_EQ(x.chosen.token, y.chosen.token);
      EXPECT_EQ(x.chosen.logprob, y.chosen.logprob);
      ASSERT_EQ(x.top.size(), y.top.size());
      for (size_t k = 0; k < x.top.size(); ++k) {
        EXPECT_EQ(x.top[k].token, y.top[k].token);
        EXPECT_EQ(x.top[k].logprob, y.top[k].logprob);
      }
    }
  }
}

// The ModelRunner's contract: a backend that samples rows itself (as CUDA does) gives every
// request exactly the tokens (and log-probabilities) host sampling gives, whatever mix of rows
// shares a step: greedy, seeded temperature / top-k / top-p / min-p rows, rows with penalties
// (the backend gets the window's counts) and with log-probabilities, each consuming its own
// generator's draws in the same order.
TEST_F(EngineTest, BackendSamplingGivesTheTokensOfHostSamplingInEveryMix) {
  const std::vector<Request> requests = MixedSamplingRequests();
  auto cpu = MakeBackend(int64_t{1} << 20);
  const std::vector<Output> host = RunMixed(cpu.get(), requests);
  testing::HostSamplingBackend sampling(cpu.get());
  const std::vector<Output> on_backend = RunMixed(&sampling, requests);
  ExpectSameOutputs(on_backend, host);
  for (const Output& o : on_backend) EXPECT_EQ(o.tokens.size(), 12u);
  EXPECT_EQ(on_backend[6].logprobs.size(), 12u);
  EXPECT_EQ(on_backend[7].logprobs.size(), 12u);
  // Every row went to the backend, penalties and log-probabilities included.
  EXPECT_EQ(sampling.sampled_rows(), static_cast<int64_t>(requests.size()) * 12);
}

// A backend whose ParallelForHost runs every index at once, each on a thread of its own started
// in reverse order, or (`threads` false) all on the caller, in order, as the default does.
class HostThreadsBackend final : public backend::Backend {
 public:
  HostThreadsBackend(backend::Backend* inner, bool threads) : inner_(inner), threads_(threads) {}
  Status Forward(const backend::Batch& batch, std::vector<float>* logits) override {
    return inner_->Forward(batch, logits);
  }
  const model::ModelConfig& config() const override { return inner_->config(); }
  backend::KvGeometry kv_geometry() const override { return inner_->kv_geometry(); }
  std::string_view name() const override { return inner_->name(); }
  std::string Describe() const override { return inner_->Describe(); }
  void ParallelForHost(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override {
    widest = std::max(widest, n);
    if (!threads_) {
      Backend::ParallelForHost(n, fn);
      return;
    }
    std::vector<std::thread> threads;
    for (int64_t i = n - 1; i >= 0; --i) threads.emplace_back([&fn, i] { fn(i, i + 1); });
    for (std::thread& t : threads) t.join();
  }
  int64_t widest = 0;  // the most rows one call was given

 private:
  backend::Backend* inner_;
  bool threads_;
};

// Host rows are sampled at once, on several threads: every request still gets the tokens and
// log-probabilities it gets when the rows are sampled one after another.
TEST_F(EngineTest, RowsSampledOnSeveralThreadsGiveTheTokensOfOneThread) {
  const std::vector<Request> requests = MixedSamplingRequests();
  auto cpu = MakeBackend(int64_t{1} << 20);
  HostThreadsBackend serial(cpu.get(), false);
  HostThreadsBackend threaded(cpu.get(), true);
  const std::vector<Output> one = RunMixed(&serial, requests);
  const std::vector<Output> many = RunMixed(&threaded, requests);
  ExpectSameOutputs(many, one);
  for (const Output& o : many) EXPECT_EQ(o.tokens.size(), 12u);
  EXPECT_GE(threaded.widest, 4);  // rows of several requests were sampled together
}

// A constraint that allows, at its k-th token, the ids in steps[k] (nothing after the last).
class ScriptedConstraint : public TokenConstraint {
 public:
  explicit ScriptedConstraint(std::vector<std::vector<int32_t>> steps) : steps_(std::move(steps)) {}
  void FillAllowed(std::span<uint32_t> allowed) override {
    ++fills;
    if (next_ >= steps_.size()) return;
    for (const int32_t id : steps_[next_]) allowed[id / 32] |= 1u << (id % 32);
  }
  bool Accept(int32_t token) override {
    if (next_ >= steps_.size()) return false;
    const std::vector<int32_t>& ok = steps_[next_];
    if (std::find(ok.begin(), ok.end(), token) == ok.end()) return false;
    ++next_;
    return true;
  }
  int fills = 0;

 private:
  std::vector<std::vector<int32_t>> steps_;
  size_t next_ = 0;
};

TEST_F(EngineTest, AConstrainedRequestSamplesOnlyAllowedTokensBesideAFreeOne) {
  auto backend = MakeBackend(int64_t{1} << 20);
  auto engine = MakeEngine(backend.get(), {});
  const std::vector<std::vector<int32_t>> steps = {{20, 21}, {30}, {40, 41, 42}, {7}};
  auto constraint = std::make_shared<ScriptedConstraint>(steps);
  Request constrained;
  constrained.prompt = Prompt(0, 9);
  constrained.params = Greedy(4);
  constrained.params.temperature = 0.8f;  // sampled, with a seed: still only allowed tokens
  constrained.params.seed = 7;
  constrained.constraint = constraint;
  Request free;
  free.prompt = Prompt(1, 7);
  free.params = Greedy(6);
  auto a = engine->Submit(constrained);
  auto b = engine->Submit(free);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<Output> out = Drain(*engine, {*a, *b});
  ASSERT_EQ(out[0].tokens.size(), 4u) << out[0].error.ToString();
  for (size_t k = 0; k < steps.size(); ++k) {
    EXPECT_NE(std::find(steps[k].begin(), steps[k].end(), out[0].tokens[k]), steps[k].end())
        << "token " << k << " = " << out[0].tokens[k];
  }
  EXPECT_EQ(out[0].finish, FinishReason::kLength);
  EXPECT_EQ(constraint->fills, 4);
  EXPECT_EQ(out[1].tokens, Alone(free.prompt, free.params));
}

// A backend that samples rows itself (CUDA) gets each constrained row's mask with the row and
// samples under it: the same tokens and log-probabilities as the host path, no logits back.
TEST_F(EngineTest, ConstrainedRowsSampledOnTheBackendMatchTheHostPath) {
  const std::vector<int32_t> allowed = {20, 21, 22, 23, 40, 41, 42, 7, 9};
  auto run = [&](backend::Backend* backend, std::vector<std::shared_ptr<ScriptedConstraint>>* cs) {
    auto engine = MakeEngine(backend, {});
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < 4; ++i) {
      Request r;
      r.prompt = Prompt(i, 5 + i);
      r.params = Greedy(8);
      r.params.temperature = 0.6f + 0.3f * static_cast<float>(i);
      r.params.seed = 11 + static_cast<uint64_t>(i);
      if (i == 2) r.params.logprobs = 3;
      if (i != 3) {  // the last one runs free beside them
        cs->push_back(
            std::make_shared<ScriptedConstraint>(std::vector<std::vector<int32_t>>(8, allowed)));
        r.constraint = cs->back();
      }
      auto s = engine->Submit(r);
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      if (s.ok()) streams.push_back(*s);
    }
    return Drain(*engine, streams);
  };
  auto cpu = MakeBackend(int64_t{1} << 20);
  std::vector<std::shared_ptr<ScriptedConstraint>> host_constraints, device_constraints;
  const std::vector<Output> host = run(cpu.get(), &host_constraints);
  testing::HostSamplingBackend sampling(cpu.get());
  const std::vector<Output> on_backend = run(&sampling, &device_constraints);
  ASSERT_EQ(host.size(), 4u);
  ASSERT_EQ(on_backend.size(), 4u);
  for (size_t i = 0; i < host.size(); ++i) {
    ASSERT_EQ(host[i].tokens.size(), 8u) << host[i].error.ToString();
    EXPECT_EQ(on_backend[i].tokens, host[i].tokens) << "request " << i;
    if (i == 3) continue;
    for (const int32_t t : on_backend[i].tokens) {
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end()) << t;
    }
    EXPECT_EQ(device_constraints[i]->fills, 8);
  }
  ASSERT_EQ(on_backend[2].logprobs.size(), host[2].logprobs.size());
  for (size_t t = 0; t < host[2].logprobs.size(); ++t) {
    EXPECT_EQ(on_backend[2].logprobs[t].chosen.logprob, host[2].logprobs[t].chosen.logprob);
    ASSERT_EQ(on_backend[2].logprobs[t].top.size(), host[2].logprobs[t].top.size());
    for (size_t k = 0; k < host[2].logprobs[t].top.size(); ++k) {
      EXPECT_EQ(on_backend[2].logprobs[t].top[k].token, host[2].logprobs[t].top[k].token);
    }
  }
  // Every row went to the backend; the constrained ones with their masks.
  EXPECT_EQ(sampling.sampled_rows(), 4 * 8);
  EXPECT_EQ(sampling.masked_rows(), 3 * 8);
}

TEST_F(EngineTest, AConstrainedRequestThatCannotGoOnEndsWithAnErrorOnEitherPath) {
  auto cpu = MakeBackend(int64_t{1} << 20);
  testing::HostSamplingBackend sampling(cpu.get());
  for (backend::Backend* backend :
       {static_cast<backend::Backend*>(cpu.get()), static_cast<backend::Backend*>(&sampling)}) {
    auto engine = MakeEngine(backend, {});
    Request r;
    r.prompt = Prompt(0, 5);
    r.params = Greedy(10);
    r.constraint =
        std::make_shared<ScriptedConstraint>(std::vector<std::vector<int32_t>>{{20}, {9}});
    auto stream = engine->Submit(r);
    ASSERT_TRUE(stream.ok());
    std::vector<Output> out = Drain(*engine, {*stream});
    EXPECT_EQ(out[0].tokens, (std::vector<int32_t>{20, 9})) << backend->name();
    EXPECT_EQ(out[0].finish, FinishReason::kError);
    EXPECT_EQ(out[0].error.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out[0].error.message().find("constraint"), std::string::npos);
    const EngineStats stats = engine->Stats();
    EXPECT_EQ(stats.failed_total, 1);
    EXPECT_EQ(stats.kv.used_blocks, 0);
  }
}

// A constraint whose masks are never cached (AllowedIsCheap false): the engine gets them from
// its mask helper. FillAllowed waits while `hold` is set (the helper's thread, not the
// engine's).
class SlowConstraint : public ScriptedConstraint {
 public:
  using ScriptedConstraint::ScriptedConstraint;
  void FillAllowed(std::span<uint32_t> allowed) override {
    while (hold.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    filled_on = std::this_thread::get_id();
    ScriptedConstraint::FillAllowed(allowed);
    ++filled;
  }
  bool AllowedIsCheap() override { return false; }
  std::atomic<bool> hold{false};
  std::atomic<int> filled{0};  // masks done (readable from any thread)
  std::thread::id filled_on;
};

// An unconstrained greedy request for `max_tokens` tokens, to run beside a constrained one.
Request FreeRequest(int32_t max_tokens) {
  Request r;
  r.prompt = Prompt(1, 6);
  r.params = Greedy(max_tokens);
  return r;
}

// A greedy request for 4 tokens, each 20 or 21, whose masks wait in `*slow` until its hold is
// lifted.
Request HeldConstrainedRequest(std::shared_ptr<SlowConstraint>* slow) {
  *slow = std::make_shared<SlowConstraint>(
      std::vector<std::vector<int32_t>>(4, std::vector<int32_t>{20, 21}));
  (*slow)->hold = true;
  Request r;
  r.prompt = Prompt(0, 6);
  r.params = Greedy(4);
  r.constraint = *slow;
  return r;
}

TEST_F(EngineTest, SlowMasksComeFromTheHelperWithTheSameTokensAsInline) {
  const std::vector<int32_t> allowed = {20, 21, 22, 23, 40, 41, 42, 7, 9};
  const auto run = [&](int helper_threads, std::vector<std::shared_ptr<SlowConstraint>>* cs) {
    auto backend = MakeBackend(int64_t{1} << 20);
    EngineOptions options;
    options.constraint_mask_threads = helper_threads;
    auto engine = MakeEngine(backend.get(), options);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < 3; ++i) {
      Request r;
      r.prompt = Prompt(i, 5 + i);
      r.params = Greedy(8);
      r.params.temperature = 0.7f;
      r.params.seed = 3 + static_cast<uint64_t>(i);
      cs->push_back(
          std::make_shared<SlowConstraint>(std::vector<std::vector<int32_t>>(8, allowed)));
      r.constraint = cs->back();
      auto s = engine->Submit(r);
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      if (s.ok()) streams.push_back(*s);
    }
    std::vector<Output> out = Drain(*engine, streams);
    return std::make_pair(out, engine->Stats());
  };
  std::vector<std::shared_ptr<SlowConstraint>> inline_cs, helper_cs;
  const auto [inline_out, inline_stats] = run(0, &inline_cs);
  const auto [helper_out, helper_stats] = run(1, &helper_cs);
  EXPECT_EQ(inline_stats.constraint_masks_off_thread_total, 0);
  EXPECT_EQ(helper_stats.constraint_masks_off_thread_total, 3 * 8);
  EXPECT_EQ(helper_stats.constraint_masks_pending, 0);
  for (size_t i = 0; i < inline_out.size(); ++i) {
    ASSERT_EQ(inline_out[i].tokens.size(), 8u) << inline_out[i].error.ToString();
    EXPECT_EQ(helper_out[i].tokens, inline_out[i].tokens) << "request " << i;
    EXPECT_EQ(helper_cs[i]->fills, 8) << "request " << i;  // one mask per token, none wasted
    EXPECT_NE(helper_cs[i]->filled_on, std::this_thread::get_id());
  }
}

TEST_F(EngineTest, ARequestWaitingForItsMaskDoesNotHoldTheOthersUp) {
  auto backend = MakeBackend(int64_t{1} << 20);
  auto engine = MakeEngine(backend.get(), {});
  std::shared_ptr<SlowConstraint> slow;
  const Request constrained = HeldConstrainedRequest(&slow);
  const Request free = FreeRequest(10);
  auto a = engine->Submit(constrained);
  auto b = engine->Submit(free);
  ASSERT_TRUE(a.ok() && b.ok());
  Output free_out;
  Output constrained_out;
  for (int step = 0; step < 100 && !free_out.finish.has_value(); ++step) {
    bool did_work = false;
    ASSERT_TRUE(engine->Step(&did_work).ok());
    Collect(**b, &free_out);
    Collect(**a, &constrained_out);
  }
  // The free request ran to its end while the constrained one waited for its first mask.
  EXPECT_EQ(free_out.tokens, Alone(free.prompt, free.params));
  EXPECT_TRUE(constrained_out.tokens.empty());
  EXPECT_EQ(engine->Stats().constraint_masks_pending, 1);
  slow->hold = false;
  std::vector<Output> rest = Drain(*engine, {*a});
  constrained_out.tokens.insert(constrained_out.tokens.end(), rest[0].tokens.begin(),
                                rest[0].tokens.end());
  ASSERT_EQ(constrained_out.tokens.size(), 4u) << rest[0].error.ToString();
  for (const int32_t t : constrained_out.tokens) EXPECT_TRUE(t == 20 || t == 21) << t;
  EXPECT_EQ(rest[0].finish, FinishReason::kLength);
}

// The helper computes a mask while the step that needs it runs; the row's logits wait for it, so
// a mask ready by the next step costs its request no step (paused before the forward, every
// token would take two).
TEST_F(EngineTest, AMaskComputedDuringItsStepCostsTheRequestNoStep) {
  auto backend = MakeBackend(int64_t{1} << 20);
  auto engine = MakeEngine(backend.get(), {});
  const std::vector<int32_t> allowed = {20, 21, 22};
  auto slow = std::make_shared<SlowConstraint>(std::vector<std::vector<int32_t>>(6, allowed));
  Request constrained;
  constrained.prompt = Prompt(0, 6);
  constrained.params = Greedy(6);
  constrained.constraint = slow;
  const Request free = FreeRequest(30);
  auto a = engine->Submit(constrained);
  auto b = engine->Submit(free);
  ASSERT_TRUE(a.ok() && b.ok());
  Output constrained_out;
  Output free_out;
  int steps = 0;
  while (!constrained_out.finish.has_value() && steps < 30) {
    bool did_work = false;
    ASSERT_TRUE(engine->Step(&did_work).ok());
    ++steps;
    Collect(**a, &constrained_out);
    Collect(**b, &free_out);
    // Give the helper the time a longer forward would have given it.
    for (int i = 0; i < 2000 && slow->filled.load() < std::min(steps, 6); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(constrained_out.tokens.size(), 6u) << constrained_out.error.ToString();
  for (const int32_t t : constrained_out.tokens) {
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end()) << t;
  }
  // Prompt + 6 tokens: 7 steps when no mask costs a step; 12 when each does.
  EXPECT_LE(steps, 8);
  EXPECT_EQ(engine->Stats().constraint_masks_off_thread_total, 6);
  std::vector<Output> rest = Drain(*engine, {*b});
  free_out.tokens.insert(free_out.tokens.end(), rest[0].tokens.begin(), rest[0].tokens.end());
  EXPECT_EQ(free_out.tokens, Alone(free.prompt, free.params));
  // The same tokens as with every mask computed inline.
  engine.reset();
  EngineOptions inline_options;
  inline_options.constraint_mask_threads = 0;
  auto inline_engine = MakeEngine(backend.get(), inline_options);
  constrained.constraint =
      std::make_shared<SlowConstraint>(std::vector<std::vector<int32_t>>(6, allowed));
  auto c = inline_engine->Submit(constrained);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Drain(*inline_engine, {*c})[0].tokens, constrained_out.tokens);
}

TEST_F(EngineTest, CancellingARequestWaitingForItsMaskEndsIt) {
  auto backend = MakeBackend(int64_t{1} << 20);
  auto engine = MakeEngine(backend.get(), {});
  std::shared_ptr<SlowConstraint> slow;
  auto stream = engine->Submit(HeldConstrainedRequest(&slow));
  ASSERT_TRUE(stream.ok());
  bool did_work = false;
  ASSERT_TRUE(engine->Step(&did_work).ok());
  EXPECT_TRUE(did_work);  // its prompt, all but the token that samples
  ASSERT_TRUE(engine->Step(&did_work).ok());
  EXPECT_FALSE(did_work);  // then it waits
  EXPECT_EQ(engine->Stats().constraint_masks_pending, 1);
  engine->Cancel((*stream)->id());
  ASSERT_TRUE(engine->Step(&did_work).ok());
  Output out;
  Collect(**stream, &out);
  EXPECT_EQ(out.finish, FinishReason::kCancelled);
  EXPECT_TRUE(out.tokens.empty());
  const EngineStats stats = engine->Stats();
  EXPECT_EQ(stats.constraint_masks_pending, 0);
  EXPECT_EQ(stats.kv.used_blocks, 0);
  slow->hold = false;  // the helper finishes its job; the engine ignores the mask
  engine.reset();
}

// A row's logits wait for its mask; meanwhile a request served first needs its KV blocks. The
// waiting request is preempted, takes its token when the mask comes, recomputes, and ends with
// the tokens it gets with room to spare.
TEST_F(EngineTest, ARequestWhoseLogitsWaitForItsMaskCanBePreempted) {
  const auto run = [&](int32_t kv_blocks, bool hold) {
    auto backend = MakeBackend(kv_blocks * 4 * 256);
    EngineOptions options;
    options.enable_prefix_caching = false;
    options.scheduler.watermark = 0;
    auto engine = MakeEngine(backend.get(), options);
    std::shared_ptr<SlowConstraint> slow;
    Request constrained = HeldConstrainedRequest(&slow);
    slow->hold = hold;
    Request first;
    first.prompt = Prompt(1, 6);
    first.params = Greedy(40);
    first.priority = 1;
    auto a = engine->Submit(first);
    auto b = engine->Submit(constrained);
    EXPECT_TRUE(a.ok() && b.ok());
    if (!a.ok() || !b.ok()) return std::make_pair(std::vector<Output>{}, int64_t{0});
    for (int step = 0; step < 100 && hold && engine->Stats().preemptions_total == 0; ++step) {
      bool did_work = false;
      EXPECT_TRUE(engine->Step(&did_work).ok());
    }
    slow->hold = false;
    std::vector<Output> out = Drain(*engine, {*a, *b});
    return std::make_pair(out, engine->Stats().preemptions_total);
  };
  const auto [roomy, roomy_preemptions] = run(64, /*hold=*/false);
  const auto [tight, tight_preemptions] = run(12, /*hold=*/true);
  EXPECT_EQ(roomy_preemptions, 0);
  EXPECT_GT(tight_preemptions, 0);
  ASSERT_EQ(roomy.size(), 2u);
  ASSERT_EQ(tight.size(), 2u);
  ASSERT_EQ(roomy[1].tokens.size(), 4u) << roomy[1].error.ToString();
  EXPECT_EQ(tight[0].tokens, roomy[0].tokens);
  EXPECT_EQ(tight[1].tokens, roomy[1].tokens);
  EXPECT_EQ(tight[1].finish, FinishReason::kLength);
}

// Preemption recomputes a constrained request's KV without sampling again: its constraint sees
// each kept token once and the tokens are those of a run without preemption.
TEST_F(EngineTest, PreemptedConstrainedRequestsKeepTheirTokensAndConstraintState) {
  const auto run = [&](int32_t kv_blocks, std::vector<std::shared_ptr<ScriptedConstraint>>* cs,
                       bool slow_masks = false) {
    auto backend = MakeBackend(kv_blocks * 4 * 256);
    EngineOptions options;
    options.enable_prefix_caching = false;
    options.scheduler.watermark = 0;
    auto engine = MakeEngine(backend.get(), options);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < 4; ++i) {
      Request r;
      r.prompt = Prompt(i, 6);
      r.params = Greedy(14);
      std::vector<std::vector<int32_t>> steps(14, std::vector<int32_t>{20, 21, 22, 23, 40, 41});
      // Slow masks come from the helper: rows that sample before theirs is ready wait with
      // their logits, preemptible meanwhile.
      if (slow_masks) {
        cs->push_back(std::make_shared<SlowConstraint>(steps));
      } else {
        cs->push_back(std::make_shared<ScriptedConstraint>(steps));
      }
      r.constraint = cs->back();
      auto s = engine->Submit(r);
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      if (s.ok()) streams.push_back(*s);
    }
    std::vector<Output> out = Drain(*engine, streams);
    return std::make_pair(out, engine->Stats().preemptions_total);
  };
  std::vector<std::shared_ptr<ScriptedConstraint>> roomy_constraints, tight_constraints,
      slow_constraints;
  const auto [roomy, roomy_preemptions] = run(64, &roomy_constraints);
  const auto [tight, tight_preemptions] = run(12, &tight_constraints);
  const auto [slow, slow_preemptions] = run(12, &slow_constraints, /*slow_masks=*/true);
  EXPECT_EQ(roomy_preemptions, 0);
  EXPECT_GT(tight_preemptions, 0);
  EXPECT_GT(slow_preemptions, 0);
  for (size_t i = 0; i < roomy.size(); ++i) {
    ASSERT_EQ(roomy[i].tokens.size(), 14u) << roomy[i].error.ToString();
    EXPECT_EQ(tight[i].tokens, roomy[i].tokens) << "request " << i;
    EXPECT_EQ(slow[i].tokens, roomy[i].tokens) << "request " << i;
    EXPECT_EQ(tight_constraints[i]->fills, 14) << "request " << i;  // one mask per token kept
    EXPECT_EQ(slow_constraints[i]->fills, 14) << "request " << i;
  }
}

// The seam a response cache or router will use: a submitter that wraps the engine sees every
// submit and cancel, and a request through it streams exactly what it would directly.
TEST_F(EngineTest, AWrappingSubmitterServesThroughTheEngine) {
  class Counting final : public RequestSubmitter {
   public:
    explicit Counting(RequestSubmitter* inner) : inner_(inner) {}
    StatusOr<std::shared_ptr<RequestStream>> Submit(Request request) override {
      ++submits;
      return inner_->Submit(std::move(request));
    }
    void Cancel(RequestId id) override {
      ++cancels;
      inner_->Cancel(id);
    }
    int submits = 0;
    int cancels = 0;

   private:
    RequestSubmitter* inner_;
  };
  auto backend = MakeBackend(int64_t{1} << 20);
  auto engine = MakeEngine(backend.get(), {});
  Counting wrapper(engine.get());
  RequestSubmitter& submitter = wrapper;
  Request r;
  r.prompt = Prompt(3, 6);
  r.params = Greedy(5);
  auto kept = submitter.Submit(r);
  ASSERT_TRUE(kept.ok());
  Request other = r;
  other.prompt = Prompt(4, 6);
  auto cancelled = submitter.Submit(other);
  ASSERT_TRUE(cancelled.ok());
  submitter.Cancel((*cancelled)->id());
  std::vector<Output> out = Drain(*engine, {*kept, *cancelled});
  EXPECT_EQ(out[0].tokens, Alone(r.prompt, r.params));
  EXPECT_EQ(out[1].finish, FinishReason::kCancelled);
  EXPECT_EQ(wrapper.submits, 2);
  EXPECT_EQ(wrapper.cancels, 1);
}

TEST_F(EngineTest, AFailingStepFailsOnlyThatStepsRequestsAndFreesTheirBlocks) {
  auto real = MakeBackend(int64_t{1} << 20);
  // One sequence per step: the third step belongs to the first request alone.
  testing::FailingBackend backend(real.get(), {2}, InternalError("the device fell over"));
  EngineOptions options;
  options.scheduler.max_batch_size = 1;
  options.enable_prefix_caching = false;
  auto engine = MakeEngine(&backend, options);
  ASSERT_NE(engine, nullptr);
  const int32_t all_blocks = engine->Stats().kv.num_blocks;
  Request a;
  a.prompt = Prompt(1, 6);
  a.params = Greedy(6);
  Request b;
  b.prompt = Prompt(2, 7);
  b.params = Greedy(6);
  auto sa = engine->Submit(a);
  auto sb = engine->Submit(b);
  ASSERT_TRUE(sa.ok() && sb.ok());

  // Drain expects every step to succeed: step by hand through the failure.
  std::vector<Output> out(2);
  int failed_steps = 0;
  for (int step = 0; step < 1000 && !(out[0].finish && out[1].finish); ++step) {
    bool did_work = false;
    if (!engine->Step(&did_work).ok()) ++failed_steps;
    Collect(**sa, &out[0]);
    Collect(**sb, &out[1]);
  }
  EXPECT_EQ(failed_steps, 1);
  EXPECT_EQ(backend.failed_batch_sizes(), std::vector<int64_t>{1});
  ASSERT_TRUE(out[0].finish.has_value());
  EXPECT_EQ(*out[0].finish, FinishReason::kError);
  EXPECT_EQ(out[0].error.code(), StatusCode::kInternal);
  EXPECT_NE(out[0].error.message().find("the device fell over"), std::string::npos);
  EXPECT_EQ(out[0].tokens.size(), 2u);  // the two steps before the failure

  ASSERT_TRUE(out[1].finish.has_value());
  EXPECT_EQ(*out[1].finish, FinishReason::kLength);
  EXPECT_EQ(out[1].tokens, Alone(b.prompt, b.params));

  const EngineStats stats = engine->Stats();
  EXPECT_EQ(stats.kv.used_blocks, 0);
  EXPECT_EQ(stats.kv.free_blocks, all_blocks);
}

TEST_F(EngineTest, LoopThreadServesConcurrentClientsAndStopCancelsTheRest) {
  auto backend = MakeBackend(int64_t{1} << 20);
  EngineOptions options;
  options.scheduler.max_batched_tokens = 16;
  // Once armed, every step that ran a batch takes 50 ms more, so that the last request is
  // certainly still running when Stop comes (its 54 remaining steps would take 2.7 s).
  std::atomic<bool> slow_steps{false};
  options.step_observer = [&slow_steps](const EngineStats&, bool ran_batch) {
    if (ran_batch && slow_steps.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  };
  auto engine = MakeEngine(backend.get(), options);
  engine->Start();
  constexpr int kClients = 4;
  std::vector<std::vector<int32_t>> got(kClients);
  std::vector<std::optional<FinishReason>> reasons(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      Request r;
      r.prompt = Prompt(c, 4 + c);
      r.params = Greedy(10);
      auto s = engine->Submit(r);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      StreamChunk chunk;
      while ((*s)->Next(&chunk, std::chrono::seconds(60))) {
        got[c].insert(got[c].end(), chunk.token_ids.begin(), chunk.token_ids.end());
        if (chunk.finish_reason) reasons[c] = chunk.finish_reason;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) {
    Request r;
    r.prompt = Prompt(c, 4 + c);
    r.params = Greedy(10);
    EXPECT_EQ(got[c], Alone(r.prompt, r.params)) << "client " << c;
    EXPECT_EQ(reasons[c], FinishReason::kLength);
  }
  // A long request still running when the engine stops ends as cancelled, with the tokens it
  // made so far.
  slow_steps = true;
  Request r;
  r.prompt = Prompt(9, 4);
  r.params = Greedy(55);
  auto s = engine->Submit(r);
  ASSERT_TRUE(s.ok());
  StreamChunk first;
  ASSERT_TRUE((*s)->Next(&first, std::chrono::seconds(60)));  // it is running
  engine->Stop();
  Output out;
  Collect(**s, &out);
  ASSERT_TRUE(out.finish.has_value());
  EXPECT_EQ(*out.finish, FinishReason::kCancelled);
  EXPECT_LT(first.token_ids.size() + out.tokens.size(), 55u);
  EXPECT_EQ(engine->Submit(r).status().code(), StatusCode::kUnavailable);
}

TEST_F(EngineTest, AdaptiveBatchingKeepsItsBudgetInBoundsAndFinishesEveryone) {
  auto backend = MakeBackend(int64_t{1} << 20);
  EngineOptions options;
  options.batching = BatchingMode::kAdaptive;
  options.adaptive.min_budget = 4;
  options.adaptive.max_budget = 32;
  options.adaptive.initial_budget = 8;
  options.adaptive.target_itl_seconds = 10;  // never at risk here: the budget only grows
  auto engine = MakeEngine(backend.get(), options);
  ExpectEveryoneGetsTheirSoloTokens(*engine, 6, 12, 8);
  const int64_t budget = engine->Stats().token_budget;
  EXPECT_GT(budget, 8);  // grew while prompts waited
  EXPECT_LE(budget, 32);
}

TEST_F(EngineTest, AdaptiveBatchingThatMissesItsTargetStillServesDecodesAndPrompts) {
  // Every step misses an impossible target, so the controller wants the smallest budget. The
  // floor keeps one token per running sequence and 8 for waiting prompts: everyone finishes in
  // a bounded number of steps. Without it the budget sits at min_budget = 1 token per step and
  // the 6 x (12 + 8) tokens below take at least 120 steps.
  auto backend = MakeBackend(int64_t{1} << 20);
  EngineOptions options;
  options.batching = BatchingMode::kAdaptive;
  options.adaptive.min_budget = 1;
  options.adaptive.max_budget = 64;
  options.adaptive.initial_budget = 1;
  options.adaptive.target_itl_seconds = 1e-9;
  options.adaptive.min_prefill_tokens = 8;
  auto engine = MakeEngine(backend.get(), options);
  ExpectEveryoneGetsTheirSoloTokens(*engine, 6, 12, 8);
  // 72 prompt tokens at >= 8 a step, then 8 decode steps (plus a few while arrivals trickle in).
  EXPECT_LE(engine->Stats().steps, 40);
}

TEST_F(EngineTest, CreateRejectsInconsistentOptions) {
  auto backend = MakeBackend(int64_t{1} << 20);
  EngineOptions options;
  options.scheduler.max_batched_tokens = 0;
  EXPECT_EQ(Engine::Create(backend.get(), tokenizer_.get(), options).status().code(),
            StatusCode::kInvalidArgument);
  options = {};
  options.scheduler.max_model_len = kContext + 1;
  EXPECT_EQ(Engine::Create(backend.get(), tokenizer_.get(), options).status().code(),
            StatusCode::kInvalidArgument);
  options = {};
  options.batching = BatchingMode::kAdaptive;
  options.adaptive.min_budget = 100;
  options.adaptive.max_budget = 10;
  EXPECT_EQ(Engine::Create(backend.get(), tokenizer_.get(), options).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::engine
