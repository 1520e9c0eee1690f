// Speculative decoding on the CUDA backend: the engine's drafted chunks (several tokens, every
// logits row back to the host, rows sampled in order there) beside plain decode rows (sampled
// on the device, replayed as graphs) give every request the tokens the plain engine gives it on
// the same device, greedy and seeded. Skipped without a device.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "strata/backend/cuda/cuda_backend.h"
#include "strata/engine/draft_model_proposer.h"
#include "strata/engine/engine.h"
#include "strata/engine/ngram_proposer.h"
#include "support/engine_drain.h"
#include "support/tiny_llama.h"
#include "unit/backend_cuda/synthetic_model.h"

namespace strata::backend::cuda {
namespace {

std::vector<strata::testing::EngineOutput> RunAll(Backend* backend,
                                                  const tokenizer::Tokenizer* tokenizer,
                                                  const engine::EngineOptions& options,
                                                  const std::vector<engine::Request>& requests) {
  auto engine = engine::Engine::Create(backend, tokenizer, options);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  if (!engine.ok()) return {};
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (const engine::Request& r : requests) {
    auto s = (*engine)->Submit(r);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return {};
    streams.push_back(*s);
  }
  return strata::testing::Drain(**engine, streams);
}

TEST(CudaSpeculativeEngine, DraftsLeaveGreedyAndSeededOutputsUnchanged) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  testing::SyntheticSpec spec;
  spec.vocab = strata::testing::tiny_llama::kVocab;  // the tiny tokenizer's
  auto m = testing::OpenSyntheticModel(spec);
  ASSERT_NE(m, nullptr);
  CudaBackendOptions options;
  options.kv_budget_bytes = int64_t{32} << 20;
  options.block_size = 4;
  auto created = CudaBackend::Create(*m->file, options);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto tokenizer = strata::testing::tiny_llama::MakeTokenizer();
  ASSERT_NE(tokenizer, nullptr);

  std::vector<engine::Request> requests;
  for (int i = 0; i < 12; ++i) {
    engine::Request r;
    r.prompt = {1};
    // A repeating motif, so that prompt lookup finds drafts.
    for (int k = 1; k < 10 + i; ++k) r.prompt.push_back(3 + (i * 7 + k % 4) % 60);
    r.params.max_tokens = 24;
    r.params.ignore_eos = true;
    if (i % 2 == 0) {
      r.params.temperature = 0;
    } else {
      r.params.temperature = 0.8f;
      r.params.top_k = 20;
      r.params.seed = 100 + static_cast<uint64_t>(i);
    }
    requests.push_back(r);
  }
  engine::EngineOptions plain;
  plain.scheduler.max_batched_tokens = 64;
  const auto expected = RunAll(created->get(), tokenizer.get(), plain, requests);
  ASSERT_EQ(expected.size(), requests.size());

  engine::EngineOptions speculative = plain;
  speculative.speculative.proposer =
      std::make_shared<engine::NgramProposer>(engine::NgramProposerOptions{1, 3});
  speculative.speculative.proposer_name = "ngram";
  speculative.speculative.policy.max_draft_tokens = 4;
  speculative.speculative.policy.adaptive = false;
  const auto got = RunAll(created->get(), tokenizer.get(), speculative, requests);
  ASSERT_EQ(got.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].tokens, expected[i].tokens) << "request " << i;
  }
}

// Self-speculation on the device: the model's first layer and head (a truncated CudaBackend)
// draft through the draft-model proposer; outputs stay the plain ones.
TEST(CudaSpeculativeEngine, SelfSpeculationLeavesOutputsUnchanged) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  testing::SyntheticSpec spec;
  spec.vocab = strata::testing::tiny_llama::kVocab;
  auto m = testing::OpenSyntheticModel(spec);
  ASSERT_NE(m, nullptr);
  CudaBackendOptions options;
  options.kv_budget_bytes = int64_t{32} << 20;
  options.block_size = 4;
  auto target = CudaBackend::Create(*m->file, options);
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  options.max_layers = 1;
  auto draft = CudaBackend::Create(*m->file, options);
  ASSERT_TRUE(draft.ok()) << draft.status().ToString();
  EXPECT_EQ((*draft)->config().n_layers, 1);
  auto tokenizer = strata::testing::tiny_llama::MakeTokenizer();
  std::vector<engine::Request> requests;
  for (int i = 0; i < 6; ++i) {
    engine::Request r;
    r.prompt = {1};
    for (int k = 1; k < 8 + i; ++k) r.prompt.push_back(3 + (i * 5 + k * 3) % 60);
    r.params.max_tokens = 20;
    r.params.ignore_eos = true;
    r.params.temperature = 0;
    requests.push_back(r);
  }
  const auto expected = RunAll(target->get(), tokenizer.get(), {}, requests);
  auto proposer = engine::DraftModelProposer::Create(draft->get(), spec.vocab);
  ASSERT_TRUE(proposer.ok()) << proposer.status().ToString();
  engine::EngineOptions speculative;
  speculative.speculative.proposer = std::shared_ptr<engine::Proposer>(std::move(*proposer));
  speculative.speculative.proposer_name = "self";
  speculative.speculative.policy.max_draft_tokens = 3;
  speculative.speculative.policy.adaptive = false;
  const auto got = RunAll(target->get(), tokenizer.get(), speculative, requests);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].tokens, expected[i].tokens) << "request " << i;
  }
}

}  // namespace
}  // namespace strata::backend::cuda
