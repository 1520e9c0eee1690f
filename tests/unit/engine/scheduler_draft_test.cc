// Scheduler support for speculative drafts: SetDraft/DraftRoom, drafts scheduled whole or
// trimmed to the step, dropped instead of preempting anyone, lost on preemption, resolved with
// their KV rolled back, and kept out of the prefix cache until accepted.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "strata/engine/scheduler.h"

namespace strata::engine {
namespace {

std::vector<int32_t> Prompt(kv::SequenceId id, int64_t n) {
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < n; ++i) tokens.push_back(static_cast<int32_t>(1000 + id * 100 + i));
  return tokens;
}

SchedulerConfig Config(int64_t budget) {
  SchedulerConfig c;
  c.max_batched_tokens = budget;
  c.watermark = 0.0;
  c.max_model_len = 4096;
  return c;
}

kv::KvCacheManagerOptions Cache(int32_t num_blocks, bool prefix_caching = false) {
  kv::KvCacheManagerOptions o;
  o.num_blocks = num_blocks;
  o.block_size = 4;
  o.enable_prefix_caching = prefix_caching;
  return o;
}

// Runs the prompt of sequence `id` and appends `first` as its first generated token: the
// sequence is then about to decode.
void StartDecoding(Scheduler& scheduler, kv::SequenceId id, int64_t prompt_len, int64_t max_tokens,
                   int32_t first = 7) {
  ASSERT_TRUE(
      scheduler.Add(std::make_unique<Sequence>(id, Prompt(id, prompt_len), max_tokens)).ok());
  const SchedulerOutput out = scheduler.Schedule();
  scheduler.OnStepDone(out);
  for (const ScheduledSequence& s : out.scheduled) {
    if (s.samples) scheduler.AppendToken(s.seq->id, s.seq->id == id ? first : 7);
  }
}

TEST(SchedulerDraft, RoomLeavesSpaceForTheTokenAfterTheDraft) {
  kv::KvCacheManager kv(Cache(64));
  Scheduler scheduler(Config(64), &kv);
  ASSERT_TRUE(scheduler.Add(std::make_unique<Sequence>(1, Prompt(1, 5), 6)).ok());
  EXPECT_EQ(scheduler.DraftRoom(1), 0);  // waiting
  const SchedulerOutput out = scheduler.Schedule();
  EXPECT_EQ(scheduler.DraftRoom(1), 0);  // its prompt is not computed yet
  scheduler.OnStepDone(out);
  scheduler.AppendToken(1, 7);
  // One token generated of 6: a draft of 4 and the token after it reach 6.
  EXPECT_EQ(scheduler.DraftRoom(1), 4);
  scheduler.SetDraft(1, std::vector<int32_t>{8, 9});
  EXPECT_EQ(scheduler.DraftRoom(1), 0);  // it holds one
  EXPECT_EQ(scheduler.Find(1)->num_generated(), 1);
  EXPECT_EQ(scheduler.Find(1)->num_draft_tokens, 2);
}

TEST(SchedulerDraft, ADraftRunsWithTheLastTokenAndKeepsEveryLogitsRow) {
  kv::KvCacheManager kv(Cache(64));
  Scheduler scheduler(Config(64), &kv);
  StartDecoding(scheduler, 1, 5, 10);
  scheduler.SetDraft(1, std::vector<int32_t>{8, 9, 10});
  const SchedulerOutput out = scheduler.Schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].start_pos, 5);
  EXPECT_EQ(out.scheduled[0].num_tokens, 4);
  EXPECT_EQ(out.scheduled[0].num_draft, 3);
  EXPECT_TRUE(out.scheduled[0].samples);
  const backend::Batch batch = MakeBatch(out, kv);
  EXPECT_EQ(batch.sequences[0].logits, backend::LogitsWanted::kAll);
  EXPECT_EQ(
      std::vector<int32_t>(batch.sequences[0].tokens.begin(), batch.sequences[0].tokens.end()),
      (std::vector<int32_t>{7, 8, 9, 10}));
  scheduler.OnStepDone(out);

  // Two of three accepted: the third and its KV go; the token sampled after them is appended.
  scheduler.ResolveDraft(1, 2);
  const Sequence* seq = scheduler.Find(1);
  EXPECT_EQ(seq->num_draft_tokens, 0);
  EXPECT_EQ(seq->tokens.size(), 8u);  // 5 prompt, 7, 8, 9
  EXPECT_EQ(seq->num_computed_tokens, 8);
  EXPECT_EQ(kv.Blocks(1).size(), 2u);
  scheduler.AppendToken(1, 42);
  EXPECT_EQ(seq->num_generated(), 4);
  const SchedulerOutput next = scheduler.Schedule();
  ASSERT_EQ(next.scheduled.size(), 1u);
  EXPECT_EQ(next.scheduled[0].start_pos, 8);
  EXPECT_EQ(next.scheduled[0].num_tokens, 1);
  EXPECT_EQ(next.scheduled[0].num_draft, 0);
  EXPECT_EQ(MakeBatch(next, kv).sequences[0].logits, backend::LogitsWanted::kLast);
}

TEST(SchedulerDraft, AShortBudgetTrimsTheDraftAndNoBudgetDropsIt) {
  kv::KvCacheManager kv(Cache(64));
  Scheduler scheduler(Config(5), &kv);
  StartDecoding(scheduler, 1, 4, 20);
  StartDecoding(scheduler, 2, 4, 20);
  scheduler.SetDraft(1, std::vector<int32_t>{8, 9, 10, 11, 12, 13});
  scheduler.SetDraft(2, std::vector<int32_t>{8, 9});
  // Sequence 1 comes first and takes 5 tokens: itself and 4 of its 6; sequence 2 gets none
  // and loses its draft.
  const SchedulerOutput out = scheduler.Schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].seq->id, 1);
  EXPECT_EQ(out.scheduled[0].num_tokens, 5);
  EXPECT_EQ(out.scheduled[0].num_draft, 4);
  EXPECT_EQ(scheduler.Find(1)->num_tokens(), 4 + 2 + 4);  // two generated tokens so far
  EXPECT_EQ(scheduler.Find(2)->num_draft_tokens, 0);
  EXPECT_EQ(scheduler.Find(2)->num_tokens(), 4 + 1);
  EXPECT_LE(out.num_scheduled_tokens, 5);
}

TEST(SchedulerDraft, NoOneIsPreemptedForADraft) {
  // 3 blocks of 4: sequence 1 holds 2 (prompt 4, two tokens generated, 5 computed), sequence
  // 2 holds 1 (prompt 3 and one token generated, 3 computed).
  kv::KvCacheManager kv(Cache(3));
  Scheduler scheduler(Config(64), &kv);
  StartDecoding(scheduler, 1, 4, 8);
  StartDecoding(scheduler, 2, 3, 8);
  ASSERT_EQ(kv.num_free_blocks(), 0);
  // Sequence 1's draft of 4 would need a third block: the draft goes, nobody is preempted.
  scheduler.SetDraft(1, std::vector<int32_t>{8, 9, 10, 11});
  const SchedulerOutput out = scheduler.Schedule();
  EXPECT_TRUE(out.preempted.empty());
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].num_draft, 0);
  EXPECT_EQ(out.scheduled[0].num_tokens, 1);
  EXPECT_EQ(scheduler.Find(1)->num_draft_tokens, 0);
}

TEST(SchedulerDraft, APreemptedSequenceLosesItsDraft) {
  // 4 blocks of 4. Sequence 1 (prompt 7 + 1) holds 2, sequence 2 (prompt 7 + 1) holds 2.
  kv::KvCacheManager kv(Cache(4));
  Scheduler scheduler(Config(64), &kv);
  StartDecoding(scheduler, 1, 7, 9);
  StartDecoding(scheduler, 2, 7, 9);
  ASSERT_EQ(kv.num_free_blocks(), 0);
  // Sequence 1 needs a third block for its 9th token: sequence 2, the last, is preempted.
  scheduler.SetDraft(2, std::vector<int32_t>{8});
  const SchedulerOutput out = scheduler.Schedule();
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], 2);
  const Sequence* seq = scheduler.Find(2);
  EXPECT_EQ(seq->num_draft_tokens, 0);
  EXPECT_EQ(seq->num_tokens(), 8);  // prompt and its generated token, no draft
  EXPECT_EQ(seq->num_computed_tokens, 0);
}

TEST(SchedulerDraft, DraftsEnterThePrefixCacheOnlyOnceAccepted) {
  kv::KvCacheManager kv(Cache(64, /*prefix_caching=*/true));
  Scheduler scheduler(Config(64), &kv);
  StartDecoding(scheduler, 1, 6, 20);  // tokens 0..5 prompt, 6 the first generated
  // A draft that fills the second block (positions 7..10 of 0..); nothing beyond the first
  // block may be cached before it is verified.
  scheduler.SetDraft(1, std::vector<int32_t>{8, 9, 10, 11});
  SchedulerOutput out = scheduler.Schedule();
  scheduler.OnStepDone(out);
  EXPECT_EQ(kv.Stats().cached_blocks, 1);  // block 0 (positions 0..3) only
  scheduler.ResolveDraft(1, 1);            // keeps 8 (position 7): block 1 is full now
  EXPECT_EQ(kv.Stats().cached_blocks, 2);
  scheduler.AppendToken(1, 50);
  // The second sequence's prompt repeats the accepted tokens: a hit on both blocks.
  std::vector<int32_t> prompt = scheduler.Find(1)->tokens;
  prompt.push_back(60);
  ASSERT_TRUE(scheduler.Add(std::make_unique<Sequence>(2, prompt, 4)).ok());
  out = scheduler.Schedule();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[1].seq->num_cached_tokens, 8);
}

}  // namespace
}  // namespace strata::engine
