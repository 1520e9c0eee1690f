#include "strata/engine/draft_model_proposer.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "strata/backend/cpu/cpu_backend.h"
#include "strata/engine/generator.h"
#include "strata/engine/self_draft_calibration.h"
#include "strata/model/gguf_file.h"
#include "support/tiny_llama.h"

namespace strata::engine {
namespace {

using namespace strata::testing::tiny_llama;  // NOLINT: the tiny model's constants and builders

class DraftModelProposerTest : public ::testing::Test {
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

  // The greedy continuation of `prompt` by the model itself, `n` tokens.
  static std::vector<int32_t> Greedy(const std::vector<int32_t>& prompt, int32_t n) {
    auto backend = MakeBackendFor(*file_, int64_t{1} << 20);
    auto tokenizer = MakeTokenizer();
    Generator generator(backend.get(), tokenizer.get());
    sampling::SamplingParams p;
    p.temperature = 0;
    p.max_tokens = n;
    p.ignore_eos = true;
    auto result = generator.Generate(prompt, p, nullptr);
    EXPECT_TRUE(result.ok());
    return result.ok() ? result->tokens : std::vector<int32_t>{};
  }

  static std::vector<uint8_t>* bytes_;
  static model::GgufFile* file_;
};

std::vector<uint8_t>* DraftModelProposerTest::bytes_ = nullptr;
model::GgufFile* DraftModelProposerTest::file_ = nullptr;

std::vector<int32_t> Prompt(int i) {
  std::vector<int32_t> p = {1};
  for (int k = 1; k < 9 + i; ++k) p.push_back(3 + (i * 11 + k * 7) % 60);
  return p;
}

TEST_F(DraftModelProposerTest, TheModelAsItsOwnDraftProposesItsGreedyContinuation) {
  auto draft_backend = MakeBackendFor(*file_, int64_t{1} << 20);
  auto proposer = DraftModelProposer::Create(draft_backend.get(), kVocab);
  ASSERT_TRUE(proposer.ok()) << proposer.status().ToString();
  // Two sequences in one step: batched passes, one per draft position.
  const std::vector<int32_t> a = Prompt(0), b = Prompt(3);
  std::vector<int32_t> da, db;
  const std::vector<DraftRequest> requests = {{1, a, 5, &da}, {2, b, 3, &db}};
  (*proposer)->ProposeAll(requests);
  EXPECT_EQ(da, Greedy(a, 5));
  EXPECT_EQ(db, Greedy(b, 3));
  EXPECT_EQ((*proposer)->forward_passes(), 5);  // the catch-up pass, then 4 single tokens
  EXPECT_EQ((*proposer)->tracked_sequences(), 2u);
}

TEST_F(DraftModelProposerTest, KeepsTheKvOfTheSharedPrefixAndRecomputesTheRest) {
  auto draft_backend = MakeBackendFor(*file_, int64_t{1} << 20);
  auto proposer = DraftModelProposer::Create(draft_backend.get(), kVocab);
  ASSERT_TRUE(proposer.ok());
  std::vector<int32_t> tokens = Prompt(1);
  std::vector<int32_t> draft;
  (*proposer)->Propose(7, tokens, 4, &draft);
  const std::vector<int32_t> expected = Greedy(tokens, 12);
  ASSERT_EQ(draft, std::vector<int32_t>(expected.begin(), expected.begin() + 4));
  const int64_t prompt_tokens = static_cast<int64_t>(tokens.size());
  EXPECT_EQ((*proposer)->forward_tokens(), prompt_tokens + 3);

  // Two draft tokens accepted, then a token of the target's own: their KV is kept (the draft
  // ran them), so only the new token runs, then one pass per further draft token.
  tokens.insert(tokens.end(), {draft[0], draft[1], 42});
  draft.clear();
  (*proposer)->Propose(7, tokens, 3, &draft);
  EXPECT_EQ((*proposer)->forward_tokens(), prompt_tokens + 3 + 1 + 2);
  EXPECT_EQ(draft, std::vector<int32_t>(Greedy(tokens, 3)));

  // A sequence that changed earlier (as after a rollback) recomputes from the change.
  tokens.resize(prompt_tokens - 2);
  tokens.push_back(5);
  draft.clear();
  (*proposer)->Propose(7, tokens, 2, &draft);
  EXPECT_EQ(draft, Greedy(tokens, 2));
}

TEST_F(DraftModelProposerTest, ForgetReleasesASequencesBlocksAndAShortPoolDraftsLess) {
  // 256 bytes of KV per token: 4 blocks of 4 tokens.
  auto draft_backend = MakeBackendFor(*file_, 4 * 4 * 256);
  ASSERT_EQ(draft_backend->kv_geometry().num_blocks, 4);
  auto proposer = DraftModelProposer::Create(draft_backend.get(), kVocab);
  ASSERT_TRUE(proposer.ok());
  const std::vector<int32_t> a = Prompt(0);  // 9 tokens + 3 = 12 positions: 3 blocks
  std::vector<int32_t> da;
  (*proposer)->Propose(1, a, 4, &da);
  EXPECT_EQ(da.size(), 4u);
  // A second sequence does not fit beside the first in this step...
  std::vector<int32_t> da2, db;
  const std::vector<DraftRequest> both = {{1, a, 4, &da2}, {2, Prompt(2), 4, &db}};
  (*proposer)->ProposeAll(both);
  EXPECT_EQ(da2, da);
  EXPECT_TRUE(db.empty());
  // ...but alone it pushes the idle first one out.
  db.clear();
  (*proposer)->Propose(2, Prompt(2), 4, &db);
  EXPECT_EQ(db, Greedy(Prompt(2), 4));
  EXPECT_EQ((*proposer)->tracked_sequences(), 1u);
  (*proposer)->Forget(2);
  EXPECT_EQ((*proposer)->tracked_sequences(), 0u);
  // A sequence longer than the draft's context gets nothing.
  std::vector<int32_t> long_prompt(kContext, 5);
  std::vector<int32_t> none;
  (*proposer)->Propose(3, long_prompt, 2, &none);
  EXPECT_TRUE(none.empty());
}

// Self-speculation's draft: the model's first layer and its head, over the same weights.
TEST_F(DraftModelProposerTest, ATruncatedModelIsAValidDraftAndItsCalibrationMeasures) {
  auto full = MakeBackendFor(*file_, int64_t{1} << 20);
  backend::cpu::CpuBackendOptions options;
  options.num_threads = 2;
  options.kv_budget_bytes = int64_t{1} << 20;
  options.block_size = kBlockSize;
  options.max_layers = 1;
  auto truncated = backend::cpu::CpuBackend::Create(*file_, options);
  ASSERT_TRUE(truncated.ok()) << truncated.status().ToString();
  EXPECT_EQ((*truncated)->config().n_layers, 1);
  EXPECT_EQ(full->config().n_layers, kLayers);

  // Its next-token logits are not the full model's (it skips a layer)...
  const std::vector<int32_t> prompt = Prompt(2);
  auto logits = [&](backend::Backend& b) {
    std::vector<kv::BlockId> blocks = {0, 1, 2, 3};
    backend::Batch batch;
    batch.sequences.push_back({prompt, 0, blocks, backend::LogitsWanted::kLast});
    std::vector<float> out;
    EXPECT_TRUE(b.Forward(batch, &out).ok());
    return out;
  };
  EXPECT_NE(logits(**truncated), logits(*full));
  // ...and a proposer over it drafts greedily all the same.
  auto proposer = DraftModelProposer::Create(truncated->get(), kVocab);
  ASSERT_TRUE(proposer.ok());
  std::vector<int32_t> draft;
  (*proposer)->Propose(1, prompt, 3, &draft);
  EXPECT_EQ(draft.size(), 3u);

  const std::vector<int32_t> layers = {1};
  auto make = [&](int32_t k) -> StatusOr<std::unique_ptr<backend::Backend>> {
    backend::cpu::CpuBackendOptions o = options;
    o.max_layers = k;
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<backend::cpu::CpuBackend> b,
                            backend::cpu::CpuBackend::Create(*file_, o));
    return std::unique_ptr<backend::Backend>(std::move(b));
  };
  auto measured = MeasureSelfDrafts(*full, make, layers, prompt, /*continuation=*/12,
                                    /*draft_tokens=*/4);
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  ASSERT_EQ(measured->size(), 1u);
  const SelfDraftCandidate& c = (*measured)[0];
  EXPECT_EQ(c.layers, 1);
  EXPECT_GE(c.agreement, 0.0);
  EXPECT_LE(c.agreement, 1.0);
  EXPECT_GT(c.cost, 0.0);
  EXPECT_GT(c.speedup, 0.0);
  EXPECT_EQ(BestSelfDraft(*measured).layers, 1);
  // A draft as deep as the model is no draft.
  const std::vector<int32_t> too_deep = {kLayers};
  EXPECT_FALSE(MeasureSelfDrafts(*full, make, too_deep, prompt, 4, 4).ok());
}

TEST(SelfDraftCalibration, TheBestCandidateHasTheHighestExpectedSpeedup) {
  const std::vector<SelfDraftCandidate> c = {
      {4, 0.3, 0.25, 1.0}, {8, 0.6, 0.5, 1.3}, {12, 0.8, 0.7, 1.2}};
  EXPECT_EQ(BestSelfDraft(c).layers, 8);
}

TEST_F(DraftModelProposerTest, RefusesADraftWithAnotherVocabularySize) {
  auto draft_backend = MakeBackendFor(*file_, int64_t{1} << 20);
  auto proposer = DraftModelProposer::Create(draft_backend.get(), kVocab + 1);
  ASSERT_FALSE(proposer.ok());
  EXPECT_NE(proposer.status().message().find("vocabulary"), std::string::npos);
}

}  // namespace
}  // namespace strata::engine
