// Speculative decoding in the engine (issue 18): drafts from any proposer, right or wrong,
// never change what a request produces, alone or batched, chunked, preempted or prefix-cached;
// sampled requests keep the target's distribution (a chi-square test on the tiny model, whose
// 63-token vocabulary makes the exact distribution computable).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "strata/backend/cpu/cpu_backend.h"
#include "strata/engine/draft_model_proposer.h"
#include "strata/engine/engine.h"
#include "strata/engine/generator.h"
#include "strata/engine/ngram_proposer.h"
#include "strata/model/gguf_file.h"
#include "support/engine_drain.h"
#include "support/tiny_llama.h"

namespace strata::engine {
namespace {

using namespace strata::testing::tiny_llama;  // NOLINT: the tiny model's constants and builders
using sampling::FinishReason;
using sampling::SamplingParams;
using strata::testing::Drain;
using Output = strata::testing::EngineOutput;

SamplingParams Greedy(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Sampling with every knob that reads the logits or the window: the draws, truncations,
// penalties and log-probabilities must all line up with plain decoding.
SamplingParams Sampled(uint64_t seed, int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 30;
  p.top_p = 0.95f;
  p.min_p = 0.02f;
  p.repetition_penalty = 1.2f;
  p.presence_penalty = 0.3f;
  p.frequency_penalty = 0.2f;
  p.penalty_last_n = 16;
  p.logprobs = 3;
  p.seed = seed;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Prompts that repeat a short motif, so that prompt lookup finds something to propose.
std::vector<int32_t> Prompt(int i, int64_t length) {
  std::vector<int32_t> p = {1};
  for (int64_t k = 1; k < length; ++k) p.push_back(static_cast<int32_t>(3 + (i * 7 + k % 5) % 60));
  return p;
}

// Proposes the continuation a plain run produced for a sequence with the same tokens so far
// (every `corrupt_every`-th proposed token replaced by a wrong one; 0: none), or nothing when
// it knows no such run.
class ScriptedProposer final : public Proposer {
 public:
  explicit ScriptedProposer(int corrupt_every = 0) : corrupt_every_(corrupt_every) {}

  void Add(std::vector<int32_t> sequence) { scripts_.push_back(std::move(sequence)); }

  void Propose(kv::SequenceId /*id*/, std::span<const int32_t> tokens, int32_t max_tokens,
               std::vector<int32_t>* draft) override {
    for (const std::vector<int32_t>& s : scripts_) {
      if (s.size() <= tokens.size() || !std::equal(tokens.begin(), tokens.end(), s.begin())) {
        continue;
      }
      for (size_t i = tokens.size(); i < s.size() && draft->size() < size_t(max_tokens); ++i) {
        int32_t t = s[i];
        if (corrupt_every_ > 0 && ++proposed_ % corrupt_every_ == 0) t = 3 + (t + 1) % 60;
        draft->push_back(t);
      }
      return;
    }
  }

 private:
  int corrupt_every_;
  int64_t proposed_ = 0;
  std::vector<std::vector<int32_t>> scripts_;
};

// Proposes random tokens: nearly every one is rejected.
class RandomProposer final : public Proposer {
 public:
  void Propose(kv::SequenceId /*id*/, std::span<const int32_t> /*tokens*/, int32_t max_tokens,
               std::vector<int32_t>* draft) override {
    std::uniform_int_distribution<int32_t> token(3, static_cast<int32_t>(kVocab) - 1);
    for (int32_t i = 0; i < max_tokens; ++i) draft->push_back(token(rng_));
  }

 private:
  std::mt19937 rng_{7};
};

// Always proposes the same tokens.
class FixedProposer final : public Proposer {
 public:
  explicit FixedProposer(std::vector<int32_t> tokens) : tokens_(std::move(tokens)) {}
  void Propose(kv::SequenceId /*id*/, std::span<const int32_t> /*tokens*/, int32_t max_tokens,
               std::vector<int32_t>* draft) override {
    for (size_t i = 0; i < tokens_.size() && i < size_t(max_tokens); ++i) {
      draft->push_back(tokens_[i]);
    }
  }

 private:
  std::vector<int32_t> tokens_;
};

SpeculativeOptions Speculate(std::shared_ptr<Proposer> proposer, int32_t max_draft = 4) {
  SpeculativeOptions s;
  s.proposer = std::move(proposer);
  s.proposer_name = "test";
  s.policy.max_draft_tokens = max_draft;
  s.policy.adaptive = false;  // drafts every step: the most verification to get wrong
  return s;
}

class SpeculativeEngineTest : public ::testing::Test {
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

  std::unique_ptr<Engine> MakeEngine(backend::Backend* backend, const EngineOptions& options) {
    auto engine = Engine::Create(backend, tokenizer_.get(), options);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    return engine.ok() ? std::move(*engine) : nullptr;
  }

  // Submits every request to a fresh engine with `options` on `backend` and drains it.
  std::vector<Output> Run(backend::Backend* backend, const EngineOptions& options,
                          const std::vector<Request>& requests, EngineStats* stats = nullptr) {
    auto engine = MakeEngine(backend, options);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const Request& r : requests) {
      auto s = engine->Submit(r);
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      if (!s.ok()) return {};
      streams.push_back(*s);
    }
    std::vector<Output> out = Drain(*engine, streams);
    if (stats != nullptr) *stats = engine->Stats();
    EXPECT_EQ(engine->Stats().kv.used_blocks, 0);
    return out;
  }

  static std::vector<uint8_t>* bytes_;
  static model::GgufFile* file_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
};

std::vector<uint8_t>* SpeculativeEngineTest::bytes_ = nullptr;
model::GgufFile* SpeculativeEngineTest::file_ = nullptr;

// Every proposer, right or wrong, leaves greedy outputs as plain decoding makes them, in
// batches with chunked prefill under a small and a large budget.
TEST_F(SpeculativeEngineTest, GreedyOutputsDoNotChangeWhateverTheDrafts) {
  auto backend = MakeBackend(int64_t{1} << 20);
  std::vector<Request> requests;
  for (int i = 0; i < 8; ++i) {
    Request r;
    r.prompt = Prompt(i, 5 + 3 * i);
    r.params = Greedy(10 + i);
    requests.push_back(r);
  }
  for (int64_t budget : {7, 64}) {
    EngineOptions plain;
    plain.scheduler.max_batched_tokens = budget;
    plain.scheduler.long_prefill_chunk = 5;
    EngineStats plain_stats;
    const std::vector<Output> expected = Run(backend.get(), plain, requests, &plain_stats);

    auto exact = std::make_shared<ScriptedProposer>();
    auto corrupt = std::make_shared<ScriptedProposer>(3);
    for (size_t i = 0; i < requests.size(); ++i) {
      std::vector<int32_t> full = requests[i].prompt;
      full.insert(full.end(), expected[i].tokens.begin(), expected[i].tokens.end());
      exact->Add(full);
      corrupt->Add(full);
    }
    const std::vector<std::pair<std::string, std::shared_ptr<Proposer>>> proposers = {
        {"exact", exact},
        {"corrupt", corrupt},
        {"random", std::make_shared<RandomProposer>()},
        {"ngram", std::make_shared<NgramProposer>(NgramProposerOptions{1, 3})}};
    for (const auto& [name, proposer] : proposers) {
      EngineOptions options = plain;
      options.speculative = Speculate(proposer);
      EngineStats stats;
      const std::vector<Output> out = Run(backend.get(), options, requests, &stats);
      ASSERT_EQ(out.size(), requests.size());
      for (size_t i = 0; i < requests.size(); ++i) {
        EXPECT_EQ(out[i].tokens, expected[i].tokens)
            << name << " proposer, request " << i << ", budget " << budget;
        EXPECT_EQ(out[i].finish, FinishReason::kLength);
        EXPECT_EQ(out[i].usage.completion_tokens, requests[i].params.max_tokens);
      }
      EXPECT_GT(stats.speculative_verifications_total, 0) << name;
      EXPECT_GT(stats.speculative_proposed_tokens_total, 0) << name;
      EXPECT_EQ(stats.generated_tokens_total, 8 * 10 + 28) << name;
      int64_t by_length = 0;
      for (int64_t n : stats.speculative_accepted_lengths) by_length += n;
      EXPECT_EQ(by_length, stats.speculative_verifications_total) << name;
      if (name == "exact") {
        EXPECT_EQ(stats.speculative_accepted_tokens_total, stats.speculative_proposed_tokens_total);
        // Several tokens a step: that is the point.
        EXPECT_LT(stats.steps, plain_stats.steps);
      } else if (name == "corrupt") {
        EXPECT_GT(stats.speculative_accepted_tokens_total, 0);
        EXPECT_LT(stats.speculative_accepted_tokens_total, stats.speculative_proposed_tokens_total);
      }
    }
  }
}

// A seeded sampled request draws the same tokens, with the same log-probabilities, whether its
// tokens came through drafts or one by one: each row is sampled in order with the request's
// sampler, whose window takes every kept token and whose generator gives one draw per row.
TEST_F(SpeculativeEngineTest, SeededSamplingGivesThePlainTokensAndLogprobs) {
  auto backend = MakeBackend(int64_t{1} << 20);
  std::vector<Request> requests;
  for (int i = 0; i < 6; ++i) {
    Request r;
    r.prompt = Prompt(i, 6 + 2 * i);
    r.params = Sampled(100 + static_cast<uint64_t>(i), 20);
    requests.push_back(r);
  }
  EngineOptions plain;
  plain.scheduler.max_batched_tokens = 16;
  const std::vector<Output> expected = Run(backend.get(), plain, requests);
  auto exact = std::make_shared<ScriptedProposer>();
  auto corrupt = std::make_shared<ScriptedProposer>(2);
  for (size_t i = 0; i < requests.size(); ++i) {
    std::vector<int32_t> full = requests[i].prompt;
    full.insert(full.end(), expected[i].tokens.begin(), expected[i].tokens.end());
    exact->Add(full);
    corrupt->Add(full);
  }
  for (const std::shared_ptr<Proposer>& proposer :
       {std::shared_ptr<Proposer>(exact), std::shared_ptr<Proposer>(corrupt),
        std::shared_ptr<Proposer>(std::make_shared<RandomProposer>())}) {
    EngineOptions options = plain;
    options.speculative = Speculate(proposer, 5);
    EngineStats stats;
    const std::vector<Output> out = Run(backend.get(), options, requests, &stats);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(out[i].tokens, expected[i].tokens) << "request " << i;
      ASSERT_EQ(out[i].logprobs.size(), expected[i].logprobs.size());
      for (size_t t = 0; t < out[i].logprobs.size(); ++t) {
        EXPECT_EQ(out[i].logprobs[t].chosen.token, expected[i].logprobs[t].chosen.token);
        EXPECT_EQ(out[i].logprobs[t].chosen.logprob, expected[i].logprobs[t].chosen.logprob);
        ASSERT_EQ(out[i].logprobs[t].top.size(), 3u);
      }
    }
    EXPECT_GT(stats.speculative_proposed_tokens_total, 0);
  }
}

// Allows the tokens of one set at every step: a format with infinitely many outputs.
class TokenSetConstraint final : public TokenConstraint {
 public:
  explicit TokenSetConstraint(std::vector<int32_t> ids) : ids_(std::move(ids)) {}
  void FillAllowed(std::span<uint32_t> allowed) override {
    for (const int32_t id : ids_) allowed[id / 32] |= 1u << (id % 32);
  }
  bool Accept(int32_t token) override {
    ++accepted;
    return std::find(ids_.begin(), ids_.end(), token) != ids_.end();
  }
  // With slow_masks, every other mask is "not cached": it comes from the engine's mask helper.
  bool AllowedIsCheap() override { return !slow_masks || (++asked % 2) == 0; }
  int accepted = 0;
  bool slow_masks = false;
  int asked = 0;

 private:
  std::vector<int32_t> ids_;
};

// Constrained requests decode speculatively with the plain tokens: drafts the constraint does
// not allow are rejected, and the constraint sees exactly the tokens kept.
TEST_F(SpeculativeEngineTest, ConstrainedRequestsGiveThePlainTokensWithDrafts) {
  auto backend = MakeBackend(int64_t{1} << 20);
  const std::vector<int32_t> allowed = {5, 9, 12, 17, 23, 30, 41};
  const auto requests = [&](std::vector<std::shared_ptr<TokenSetConstraint>>* constraints) {
    std::vector<Request> out;
    for (int i = 0; i < 4; ++i) {
      Request r;
      r.prompt = Prompt(i, 6 + 2 * i);
      r.params = i % 2 == 0 ? Sampled(200 + static_cast<uint64_t>(i), 16) : Greedy(16);
      constraints->push_back(std::make_shared<TokenSetConstraint>(allowed));
      r.constraint = constraints->back();
      out.push_back(r);
    }
    return out;
  };
  std::vector<std::shared_ptr<TokenSetConstraint>> plain_constraints;
  const std::vector<Request> plain_requests = requests(&plain_constraints);
  const std::vector<Output> expected = Run(backend.get(), EngineOptions{}, plain_requests);
  auto exact = std::make_shared<ScriptedProposer>();
  for (size_t i = 0; i < plain_requests.size(); ++i) {
    ASSERT_EQ(expected[i].tokens.size(), 16u) << expected[i].error.ToString();
    for (const int32_t t : expected[i].tokens) {
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end());
    }
    std::vector<int32_t> full = plain_requests[i].prompt;
    full.insert(full.end(), expected[i].tokens.begin(), expected[i].tokens.end());
    exact->Add(full);
  }
  for (const bool slow_masks : {false, true}) {
    for (const std::shared_ptr<Proposer>& proposer :
         {std::shared_ptr<Proposer>(exact),
          std::shared_ptr<Proposer>(std::make_shared<RandomProposer>())}) {
      EngineOptions options;
      options.speculative = Speculate(proposer, 4);
      std::vector<std::shared_ptr<TokenSetConstraint>> constraints;
      std::vector<Request> constrained = requests(&constraints);
      for (const auto& c : constraints) c->slow_masks = slow_masks;
      EngineStats stats;
      const std::vector<Output> out = Run(backend.get(), options, constrained, &stats);
      for (size_t i = 0; i < out.size(); ++i) {
        EXPECT_EQ(out[i].tokens, expected[i].tokens) << "request " << i << " slow " << slow_masks;
        EXPECT_EQ(constraints[i]->accepted, 16) << "request " << i;  // the kept tokens only
      }
      EXPECT_GT(stats.speculative_proposed_tokens_total, 0);
      EXPECT_EQ(stats.constraint_masks_off_thread_total > 0, slow_masks);
    }
  }
}

// A stop token or the max_tokens limit inside an accepted draft ends the request there: the
// draft's tokens after it are never streamed.
TEST_F(SpeculativeEngineTest, AStopInsideADraftEndsTheRequestThere) {
  auto backend = MakeBackend(int64_t{1} << 20);
  Request r;
  r.prompt = Prompt(2, 7);
  r.params = Greedy(16);
  const std::vector<Output> expected = Run(backend.get(), {}, {r});
  auto exact = std::make_shared<ScriptedProposer>();
  std::vector<int32_t> full = r.prompt;
  full.insert(full.end(), expected[0].tokens.begin(), expected[0].tokens.end());
  exact->Add(full);
  EngineOptions options;
  options.speculative = Speculate(exact, 8);

  // The first occurrence of the 6th token stops the request.
  const int32_t stop = expected[0].tokens[5];
  const auto first = std::find(expected[0].tokens.begin(), expected[0].tokens.end(), stop);
  const std::vector<int32_t> kept(expected[0].tokens.begin(), first + 1);
  Request stopped = r;
  stopped.params.stop_token_ids = {stop};
  std::vector<Output> out = Run(backend.get(), options, {stopped});
  EXPECT_EQ(out[0].tokens, kept);
  EXPECT_EQ(out[0].finish, FinishReason::kStop);

  Request shorter = r;
  shorter.params.max_tokens = 7;
  out = Run(backend.get(), options, {shorter});
  EXPECT_EQ(out[0].tokens,
            std::vector<int32_t>(expected[0].tokens.begin(), expected[0].tokens.begin() + 7));
  EXPECT_EQ(out[0].finish, FinishReason::kLength);
}

// A cache too small for everyone: drafts are dropped rather than anyone preempted for them,
// preempted sequences lose theirs, and every output is still the plain one.
TEST_F(SpeculativeEngineTest, PreemptionWithDraftsGivesThePlainTokens) {
  // 256 bytes of KV per token (engine_test.cc): 12 blocks of 4 tokens.
  auto backend = MakeBackend(12 * 4 * 256);
  ASSERT_EQ(backend->kv_geometry().num_blocks, 12);
  std::vector<Request> requests;
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.prompt = Prompt(i, 6);
    r.params = Greedy(14);
    requests.push_back(r);
  }
  EngineOptions plain;
  plain.enable_prefix_caching = false;
  plain.scheduler.watermark = 0;
  const std::vector<Output> expected = Run(backend.get(), plain, requests);
  auto exact = std::make_shared<ScriptedProposer>();
  for (size_t i = 0; i < requests.size(); ++i) {
    std::vector<int32_t> full = requests[i].prompt;
    full.insert(full.end(), expected[i].tokens.begin(), expected[i].tokens.end());
    exact->Add(full);
  }
  EngineOptions options = plain;
  options.speculative = Speculate(exact, 6);
  EngineStats stats;
  const std::vector<Output> out = Run(backend.get(), options, requests, &stats);
  EXPECT_GT(stats.preemptions_total, 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(out[i].tokens, expected[i].tokens) << "request " << i;
  }
  EXPECT_EQ(stats.kv.free_blocks, 12);
}

// Accepted draft tokens enter the prefix cache like any generated token (and rejected ones
// never do): a later request that continues the first one's text reuses its blocks and still
// gets the plain tokens.
TEST_F(SpeculativeEngineTest, AcceptedDraftsAreCachedAndReusable) {
  auto backend = MakeBackend(int64_t{1} << 20);
  Request first;
  first.prompt = Prompt(4, 6);
  first.params = Greedy(20);
  const std::vector<Output> plain_first = Run(backend.get(), {}, {first});
  auto corrupt = std::make_shared<ScriptedProposer>(4);
  std::vector<int32_t> full = first.prompt;
  full.insert(full.end(), plain_first[0].tokens.begin(), plain_first[0].tokens.end());
  corrupt->Add(full);

  Request second;
  second.prompt.assign(full.begin(), full.begin() + 22);  // 5 full blocks of 4, then 2 tokens
  second.params = Greedy(8);
  const std::vector<Output> plain_second = Run(backend.get(), {}, {second});

  EngineOptions options;
  options.speculative = Speculate(corrupt, 4);
  auto engine = MakeEngine(backend.get(), options);
  auto s1 = engine->Submit(first);
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(Drain(*engine, {*s1})[0].tokens, plain_first[0].tokens);
  EXPECT_GT(engine->Stats().speculative_accepted_tokens_total, 0);
  auto s2 = engine->Submit(second);
  ASSERT_TRUE(s2.ok());
  const std::vector<Output> out = Drain(*engine, {*s2});
  EXPECT_EQ(out[0].tokens, plain_second[0].tokens);
  EXPECT_EQ(out[0].usage.cached_prompt_tokens, 20);
}

// A draft model with the target's vocabulary: the target itself (every greedy draft token
// accepted) and another model of the same shape (most rejected) leave outputs as they are.
TEST_F(SpeculativeEngineTest, DraftModelSpeculationGivesThePlainTokens) {
  auto backend = MakeBackend(int64_t{1} << 20);
  const std::vector<uint8_t> other_bytes = BuildModel(/*seed=*/77);
  auto other_file = model::GgufFile::Parse(MappedFile::FromBytes(other_bytes));
  ASSERT_TRUE(other_file.ok());
  std::vector<Request> requests;
  for (int i = 0; i < 6; ++i) {
    Request r;
    r.prompt = Prompt(i, 4 + 3 * i);
    r.params = i % 2 == 0 ? Greedy(14) : Sampled(7 + static_cast<uint64_t>(i), 14);
    requests.push_back(r);
  }
  EngineOptions plain;
  plain.scheduler.max_batched_tokens = 24;
  const std::vector<Output> expected = Run(backend.get(), plain, requests);
  double same_rate = 0;
  for (bool same : {true, false}) {
    auto draft_backend =
        same ? MakeBackend(int64_t{1} << 20) : MakeBackendFor(*other_file, 1 << 20);
    auto proposer = DraftModelProposer::Create(draft_backend.get(), kVocab);
    ASSERT_TRUE(proposer.ok());
    DraftModelProposer* raw = proposer->get();
    EngineOptions options = plain;
    options.speculative = Speculate(std::shared_ptr<Proposer>(std::move(*proposer)), 4);
    EngineStats stats;
    const std::vector<Output> out = Run(backend.get(), options, requests, &stats);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(out[i].tokens, expected[i].tokens) << (same ? "same" : "other") << " " << i;
    }
    EXPECT_GT(stats.speculative_proposed_tokens_total, 0);
    EXPECT_EQ(raw->tracked_sequences(), 0u) << "every ended request was forgotten";
    const double rate = static_cast<double>(stats.speculative_accepted_tokens_total) /
                        static_cast<double>(stats.speculative_proposed_tokens_total);
    if (same) {
      same_rate = rate;
    } else {
      EXPECT_LT(rate, same_rate) << "the target drafts for itself better than another model";
    }
  }
}

// Self-speculation: the target's first layer and head draft; outputs stay the plain ones.
TEST_F(SpeculativeEngineTest, SelfSpeculationGivesThePlainTokens) {
  auto backend = MakeBackend(int64_t{1} << 20);
  std::vector<Request> requests;
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.prompt = Prompt(i, 5 + 2 * i);
    r.params = i % 2 == 0 ? Greedy(16) : Sampled(3 + static_cast<uint64_t>(i), 16);
    requests.push_back(r);
  }
  const std::vector<Output> expected = Run(backend.get(), {}, requests);
  backend::cpu::CpuBackendOptions o;
  o.num_threads = 2;
  o.kv_budget_bytes = int64_t{1} << 20;
  o.block_size = kBlockSize;
  o.max_layers = 1;
  auto truncated = backend::cpu::CpuBackend::Create(*file_, o);
  ASSERT_TRUE(truncated.ok());
  auto proposer = DraftModelProposer::Create(truncated->get(), kVocab);
  ASSERT_TRUE(proposer.ok());
  EngineOptions options;
  options.speculative = Speculate(std::shared_ptr<Proposer>(std::move(*proposer)), 3);
  EngineStats stats;
  const std::vector<Output> out = Run(backend.get(), options, requests, &stats);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(out[i].tokens, expected[i].tokens) << "request " << i;
  }
  EXPECT_GT(stats.speculative_proposed_tokens_total, 0);
}

// Cancelling requests while they hold drafts frees every block, theirs and the draft model's.
TEST_F(SpeculativeEngineTest, CancellingDraftedRequestsFreesEverything) {
  auto backend = MakeBackend(int64_t{1} << 20);
  auto draft_backend = MakeBackend(int64_t{1} << 20);
  auto proposer = DraftModelProposer::Create(draft_backend.get(), kVocab);
  ASSERT_TRUE(proposer.ok());
  DraftModelProposer* raw = proposer->get();
  EngineOptions options;
  options.speculative = Speculate(std::shared_ptr<Proposer>(std::move(*proposer)), 4);
  auto engine = MakeEngine(backend.get(), options);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 3; ++i) {
    Request r;
    r.prompt = Prompt(i, 6);
    r.params = Greedy(40);
    auto s = engine->Submit(r);
    ASSERT_TRUE(s.ok());
    streams.push_back(*s);
  }
  // A few steps in: prompts done, drafts verified.
  for (int step = 0; step < 4; ++step) {
    bool did_work = false;
    ASSERT_TRUE(engine->Step(&did_work).ok());
  }
  EXPECT_GT(engine->Stats().speculative_verifications_total, 0);
  EXPECT_EQ(raw->tracked_sequences(), 3u);
  for (const auto& s : streams) engine->Cancel(s->id());
  const std::vector<Output> out = Drain(*engine, streams);
  for (const Output& o : out) EXPECT_EQ(o.finish, FinishReason::kCancelled);
  EXPECT_EQ(engine->Stats().kv.used_blocks, 0);
  EXPECT_EQ(raw->tracked_sequences(), 0u);
}

TEST_F(SpeculativeEngineTest, ARequestThatOptsOutGetsNoDrafts) {
  auto backend = MakeBackend(int64_t{1} << 20);
  Request r;
  r.prompt = Prompt(1, 8);
  r.params = Greedy(12);
  r.speculative = false;
  EngineOptions options;
  options.speculative = Speculate(std::make_shared<RandomProposer>());
  EngineStats stats;
  const std::vector<Output> out = Run(backend.get(), options, {r}, &stats);
  EXPECT_EQ(out[0].tokens.size(), 12u);
  EXPECT_EQ(stats.speculative_proposed_tokens_total, 0);
  EXPECT_EQ(stats.steps, 1 + 11);  // the prompt, then one token a step
}

// Probabilities of the next token after `tokens` at temperature 1 (no truncation, no
// penalties), from one forward of the backend.
std::vector<double> NextTokenProbabilities(backend::Backend& backend,
                                           const std::vector<int32_t>& tokens) {
  const backend::KvGeometry g = backend.kv_geometry();
  std::vector<kv::BlockId> blocks;
  for (int32_t b = 0; b * g.block_size < static_cast<int32_t>(tokens.size()); ++b) {
    blocks.push_back(b);
  }
  backend::Batch batch;
  batch.sequences.push_back({tokens, 0, blocks, backend::LogitsWanted::kLast});
  std::vector<float> logits;
  EXPECT_TRUE(backend.Forward(batch, &logits).ok());
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += p[i] = std::exp(logits[i] - max);
  for (double& x : p) x /= total;
  return p;
}

// Pearson's statistic of `counts` against `expected` probabilities, tokens expected fewer than
// 5 times pooled into one bin; *df receives the degrees of freedom.
double ChiSquare(const std::vector<int64_t>& counts, const std::vector<double>& expected, int64_t n,
                 int* df) {
  double stat = 0, pooled_expected = 0;
  int64_t pooled = 0;
  int bins = 0;
  for (size_t t = 0; t < counts.size(); ++t) {
    const double e = expected[t] * static_cast<double>(n);
    if (e < 5) {
      pooled_expected += e;
      pooled += counts[t];
      continue;
    }
    stat += (counts[t] - e) * (counts[t] - e) / e;
    ++bins;
  }
  if (pooled_expected > 0) {
    stat += (pooled - pooled_expected) * (pooled - pooled_expected) / pooled_expected;
    ++bins;
  }
  *df = bins - 1;
  return stat;
}

// The 0.999 quantile of chi-square with `df` degrees of freedom (Wilson-Hilferty).
double ChiSquareCritical(int df) {
  const double k = df;
  const double z = 3.0902;  // the standard normal's 0.999 quantile
  const double c = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
  return k * c * c * c;
}

// Sampling at temperature 1 with a fixed one-token draft, verified at the second token: the
// second and third tokens' distributions over 4000 fixed seeds match the model's exact ones
// (computed from its logits), and a wrong reference is rejected by the same test.
TEST_F(SpeculativeEngineTest, SampledTokensFollowTheTargetDistribution) {
  auto backend = MakeBackend(int64_t{1} << 20);
  auto reference = MakeBackend(int64_t{1} << 20);
  const std::vector<int32_t> prompt = Prompt(3, 5);
  const size_t vocab = static_cast<size_t>(kVocab);

  // p1 = P(t1), p2 = P(t2) = sum p1(a) P(t2 | a), p3 = P(t3) = sum p1(a) P(b | a) P(t3 | a b).
  const std::vector<double> p1 = NextTokenProbabilities(*reference, prompt);
  std::vector<double> p2(vocab, 0.0), p3(vocab, 0.0);
  for (size_t a = 0; a < vocab; ++a) {
    if (p1[a] < 1e-9) continue;
    std::vector<int32_t> with_a = prompt;
    with_a.push_back(static_cast<int32_t>(a));
    const std::vector<double> q = NextTokenProbabilities(*reference, with_a);
    for (size_t b = 0; b < vocab; ++b) {
      p2[b] += p1[a] * q[b];
      if (p1[a] * q[b] < 1e-9) continue;
      std::vector<int32_t> with_ab = with_a;
      with_ab.push_back(static_cast<int32_t>(b));
      const std::vector<double> r = NextTokenProbabilities(*reference, with_ab);
      for (size_t c = 0; c < vocab; ++c) p3[c] += p1[a] * q[b] * r[c];
    }
  }
  double total2 = 0, total3 = 0;
  for (size_t t = 0; t < vocab; ++t) total2 += p2[t], total3 += p3[t];
  EXPECT_NEAR(total2, 1.0, 1e-6);
  EXPECT_NEAR(total3, 1.0, 1e-6);
  // The draft: the likeliest second token, so that it is accepted often.
  const auto likeliest = static_cast<int32_t>(std::max_element(p2.begin(), p2.end()) - p2.begin());

  EngineOptions options;
  options.scheduler.max_batched_tokens = 256;
  options.speculative = Speculate(std::make_shared<FixedProposer>(std::vector<int32_t>{likeliest}));
  constexpr int64_t kSamples = 4000;
  std::vector<Request> requests;
  for (int64_t s = 0; s < kSamples; ++s) {
    Request r;
    r.prompt = prompt;
    r.params.temperature = 1.0f;
    r.params.penalty_last_n = 0;
    r.params.max_tokens = 3;
    r.params.ignore_eos = true;
    r.params.seed = static_cast<uint64_t>(s) * 7919 + 1;
    requests.push_back(r);
  }
  EngineStats stats;
  std::vector<int64_t> c2(vocab, 0), c3(vocab, 0);
  for (size_t begin = 0; begin < requests.size(); begin += 64) {
    const size_t end = std::min(begin + 64, requests.size());
    const std::vector<Request> chunk(requests.begin() + static_cast<ptrdiff_t>(begin),
                                     requests.begin() + static_cast<ptrdiff_t>(end));
    EngineStats chunk_stats;
    for (const Output& o : Run(backend.get(), options, chunk, &chunk_stats)) {
      ASSERT_EQ(o.tokens.size(), 3u);
      ++c2[static_cast<size_t>(o.tokens[1])];
      ++c3[static_cast<size_t>(o.tokens[2])];
    }
    stats.speculative_verifications_total += chunk_stats.speculative_verifications_total;
    stats.speculative_accepted_tokens_total += chunk_stats.speculative_accepted_tokens_total;
  }
  EXPECT_EQ(stats.speculative_verifications_total, kSamples);
  // The draft is accepted about as often as the target picks it.
  EXPECT_NEAR(static_cast<double>(stats.speculative_accepted_tokens_total) / kSamples,
              p2[static_cast<size_t>(likeliest)], 0.03);
  int df = 0;
  const double x2 = ChiSquare(c2, p2, kSamples, &df);
  EXPECT_LT(x2, ChiSquareCritical(df)) << "second token, df " << df;
  const double x3 = ChiSquare(c3, p3, kSamples, &df);
  EXPECT_LT(x3, ChiSquareCritical(df)) << "third token, df " << df;
  // The test has power: the first token's distribution is not the second's.
  const double wrong = ChiSquare(c2, p1, kSamples, &df);
  EXPECT_GT(wrong, ChiSquareCritical(df));
}

}  // namespace
}  // namespace strata::engine
