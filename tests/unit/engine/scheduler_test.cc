#include "strata/engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace strata::engine {
namespace {

// What the fake backend "samples" for the token at `pos` of sequence `id`: a function of both,
// so a recomputed or reordered sequence that came out wrong shows in its tokens.
int32_t FakeToken(kv::SequenceId id, int64_t pos) {
  return static_cast<int32_t>((id * 7919 + pos * 31) % 50000) + 1;
}

// A prompt of `n` tokens that no other id's prompt shares.
std::vector<int32_t> Prompt(kv::SequenceId id, int64_t n) {
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < n; ++i) tokens.push_back(static_cast<int32_t>(100000 + id * 5000 + i));
  return tokens;
}

struct Slice {
  kv::SequenceId id;
  int64_t start;
  int64_t n;
  bool samples;
  bool operator==(const Slice&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Slice& s) {
  return os << "{id " << s.id << ", start " << s.start << ", n " << s.n
            << (s.samples ? ", samples}" : "}");
}

struct Step {
  std::vector<Slice> scheduled;
  std::vector<kv::SequenceId> preempted;
  int64_t num_tokens = 0;
};

SchedulerConfig Config(int64_t budget, int32_t max_batch_size = 64, double watermark = 0.0,
                       int64_t long_prefill_chunk = 0, int64_t max_model_len = 4096) {
  SchedulerConfig c;
  c.max_batched_tokens = budget;
  c.max_batch_size = max_batch_size;
  c.watermark = watermark;
  c.max_model_len = max_model_len;
  c.long_prefill_chunk = long_prefill_chunk;
  return c;
}

kv::KvCacheManagerOptions Cache(int32_t num_blocks, int32_t block_size = 16,
                                bool prefix_caching = false) {
  kv::KvCacheManagerOptions o;
  o.num_blocks = num_blocks;
  o.block_size = block_size;
  o.enable_prefix_caching = prefix_caching;
  return o;
}

// The scheduler over a fake backend: a step schedules, "runs" the forward, appends
// FakeToken for every sampling chunk and finishes a sequence at its max_tokens.
class Harness {
 public:
  Harness(const SchedulerConfig& config, const kv::KvCacheManagerOptions& cache)
      : kv_(cache), scheduler_(config, &kv_) {}

  Status Add(kv::SequenceId id, std::vector<int32_t> prompt, int64_t max_tokens,
             int32_t priority = 0) {
    return scheduler_.Add(std::make_unique<Sequence>(id, std::move(prompt), max_tokens, priority));
  }
  void AddOk(kv::SequenceId id, int64_t prompt_len, int64_t max_tokens, int32_t priority = 0) {
    ASSERT_TRUE(Add(id, Prompt(id, prompt_len), max_tokens, priority).ok());
  }
  void AddBackgroundOk(kv::SequenceId id, int64_t prompt_len, int64_t max_tokens,
                       int32_t priority = 0) {
    ASSERT_TRUE(scheduler_
                    .Add(std::make_unique<Sequence>(id, Prompt(id, prompt_len), max_tokens,
                                                    priority, /*background=*/true))
                    .ok());
  }

  Step Run() {
    const SchedulerOutput out = scheduler_.Schedule();
    Step step;
    for (const ScheduledSequence& s : out.scheduled) {
      step.scheduled.push_back({s.seq->id, s.start_pos, s.num_tokens, s.samples});
    }
    step.preempted = out.preempted;
    step.num_tokens = out.num_scheduled_tokens;
    scheduler_.OnStepDone(out);
    for (const Slice& s : step.scheduled) {
      if (!s.samples) continue;
      const Sequence* seq = scheduler_.Find(s.id);
      scheduler_.AppendToken(s.id, FakeToken(s.id, seq->num_tokens()));
      if (seq->num_generated() == seq->max_tokens) finished_.push_back(scheduler_.Finish(s.id));
    }
    return step;
  }

  // Steps until idle (at most `max_steps`), returning every step.
  std::vector<Step> Drain(int max_steps = 10000) {
    std::vector<Step> steps;
    while (!scheduler_.idle() && static_cast<int>(steps.size()) < max_steps) {
      steps.push_back(Run());
    }
    return steps;
  }

  const Sequence* Finished(kv::SequenceId id) const {
    for (const auto& seq : finished_) {
      if (seq->id == id) return seq.get();
    }
    return nullptr;
  }

  kv::KvCacheManager& kv() { return kv_; }
  Scheduler& scheduler() { return scheduler_; }

 private:
  kv::KvCacheManager kv_;
  Scheduler scheduler_;
  std::vector<std::unique_ptr<Sequence>> finished_;
};

TEST(Scheduler, ChunksALongPromptUnderTheTokenBudget) {
  Harness h(Config(/*budget=*/256), Cache(/*num_blocks=*/100));
  h.AddOk(1, /*prompt_len=*/1000, /*max_tokens=*/4);
  const std::vector<Step> steps = h.Drain();
  ASSERT_EQ(steps.size(), 7u);
  EXPECT_EQ(steps[0].scheduled, (std::vector<Slice>{{1, 0, 256, false}}));
  EXPECT_EQ(steps[1].scheduled, (std::vector<Slice>{{1, 256, 256, false}}));
  EXPECT_EQ(steps[2].scheduled, (std::vector<Slice>{{1, 512, 256, false}}));
  EXPECT_EQ(steps[3].scheduled, (std::vector<Slice>{{1, 768, 232, true}}));
  EXPECT_EQ(steps[4].scheduled, (std::vector<Slice>{{1, 1000, 1, true}}));
  EXPECT_EQ(steps[5].scheduled, (std::vector<Slice>{{1, 1001, 1, true}}));
  EXPECT_EQ(steps[6].scheduled, (std::vector<Slice>{{1, 1002, 1, true}}));
  const Sequence* seq = h.Finished(1);
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->num_tokens(), 1004);
  EXPECT_EQ(seq->status, SequenceStatus::kFinished);
  EXPECT_EQ(h.kv().num_free_blocks(), 100);
}

TEST(Scheduler, RunningDecodeGetsOneTokenPerStepBesideAChunkedPrefill) {
  Harness h(Config(/*budget=*/512, 64, 0.0, /*long_prefill_chunk=*/256), Cache(100));
  h.AddOk(1, 10, /*max_tokens=*/100);
  Step first = h.Run();
  EXPECT_EQ(first.scheduled, (std::vector<Slice>{{1, 0, 10, true}}));
  h.AddOk(2, 1000, 1);
  const int64_t chunks[] = {256, 256, 256, 232};
  int64_t start = 0;
  for (int i = 0; i < 4; ++i) {
    const Step step = h.Run();
    const bool last = i == 3;
    EXPECT_EQ(step.scheduled,
              (std::vector<Slice>{{1, 10 + i, 1, true}, {2, start, chunks[i], last}}))
        << "step " << i;
    EXPECT_EQ(step.num_tokens, 1 + chunks[i]);
    start += chunks[i];
  }
  EXPECT_NE(h.Finished(2), nullptr);
  EXPECT_EQ(h.scheduler().Find(1)->num_tokens(), 15);
}

TEST(Scheduler, PrefillTakesWhatTheRunningDecodesLeaveOfTheBudget) {
  Harness h(Config(/*budget=*/256), Cache(100));
  h.AddOk(1, 10, 100);
  h.Run();
  h.AddOk(2, 1000, 1);
  const int64_t chunks[] = {255, 255, 255, 235};
  int64_t start = 0;
  for (int i = 0; i < 4; ++i) {
    const Step step = h.Run();
    EXPECT_EQ(step.scheduled,
              (std::vector<Slice>{{1, 10 + i, 1, true}, {2, start, chunks[i], i == 3}}))
        << "step " << i;
    EXPECT_EQ(step.num_tokens, 1 + chunks[i]);
    start += chunks[i];
  }
}

TEST(Scheduler, CapsRunningSequencesAtMaxBatchSize) {
  Harness h(Config(/*budget=*/512, /*max_batch_size=*/3), Cache(100));
  for (kv::SequenceId id = 0; id < 5; ++id) h.AddOk(id, 8, /*max_tokens=*/3);
  const std::vector<Step> steps = h.Drain();
  ASSERT_EQ(steps.size(), 6u);
  for (const Step& step : steps) EXPECT_LE(step.scheduled.size(), 3u);
  EXPECT_EQ(steps[0].scheduled,
            (std::vector<Slice>{{0, 0, 8, true}, {1, 0, 8, true}, {2, 0, 8, true}}));
  EXPECT_EQ(steps[1].scheduled,
            (std::vector<Slice>{{0, 8, 1, true}, {1, 8, 1, true}, {2, 8, 1, true}}));
  EXPECT_EQ(steps[2].scheduled.size(), 3u);
  // 0..2 finished after step 3: 3 and 4 take their places.
  EXPECT_EQ(steps[3].scheduled, (std::vector<Slice>{{3, 0, 8, true}, {4, 0, 8, true}}));
}

TEST(Scheduler, NeverSchedulesMoreThanTheBudget) {
  Harness h(Config(/*budget=*/20), Cache(100));
  for (kv::SequenceId id = 0; id < 6; ++id) h.AddOk(id, 7, 5);
  // 7 + 7 + 6 (the third prompt chunked), then the rest.
  const Step first = h.Run();
  EXPECT_EQ(first.scheduled,
            (std::vector<Slice>{{0, 0, 7, true}, {1, 0, 7, true}, {2, 0, 6, false}}));
  for (const Step& step : h.Drain()) EXPECT_LE(step.num_tokens, 20);
}

TEST(Scheduler, AdmitsHigherPriorityFirstAndFcfsWithinAPriority) {
  Harness h(Config(512, /*max_batch_size=*/1), Cache(100));
  h.AddOk(1, 4, 1, /*priority=*/0);
  h.AddOk(2, 4, 1, /*priority=*/5);
  h.AddOk(3, 4, 1, /*priority=*/0);
  h.AddOk(4, 4, 1, /*priority=*/5);
  h.AddOk(5, 4, 1, /*priority=*/-1);
  std::vector<kv::SequenceId> order;
  for (const Step& step : h.Drain()) {
    ASSERT_EQ(step.scheduled.size(), 1u);
    order.push_back(step.scheduled[0].id);
  }
  EXPECT_EQ(order, (std::vector<kv::SequenceId>{2, 4, 1, 3, 5}));
}

TEST(Scheduler, ServesRunningSequencesInPriorityOrderWhenTheBudgetIsShort) {
  Harness h(Config(512), Cache(100));
  h.AddOk(1, 4, 100, 0);
  h.AddOk(2, 4, 100, 1);
  h.AddOk(3, 4, 100, 0);
  h.Run();
  h.scheduler().SetTokenBudget(2);
  const Step step = h.Run();
  EXPECT_EQ(step.scheduled, (std::vector<Slice>{{2, 4, 1, true}, {1, 4, 1, true}}));
  EXPECT_EQ(h.scheduler().Stats().num_pending_tokens, 1);  // 3's token waits
  EXPECT_EQ(h.scheduler().Stats().token_budget, 2);
}

TEST(Scheduler, BackgroundWorkTakesAtMostItsBudgetWhileOthersAreHeld) {
  Harness h(Config(512), Cache(100));
  h.scheduler().SetBackgroundBudget({/*tokens=*/3, /*sample_cost=*/0});
  h.AddBackgroundOk(1, 8, 4);
  h.AddOk(2, 4, 3);
  h.AddBackgroundOk(3, 8, 4);
  // The foreground prompt first, then 3 tokens of the first background prompt; the second
  // background sequence gets nothing and stays waiting.
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{2, 0, 4, true}, {1, 0, 3, false}}));
  EXPECT_EQ(h.scheduler().num_waiting(), 1);
  EXPECT_EQ(h.scheduler().Stats().num_pending_tokens, 0);  // held back, not waiting for budget
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{2, 4, 1, true}, {1, 3, 3, false}}));
  EXPECT_EQ(h.Run().scheduled,
            (std::vector<Slice>{{2, 5, 1, true}, {1, 6, 2, true}, {3, 0, 1, false}}));
  // Foreground finished (3 tokens): background sequences share the whole budget.
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{1, 8, 1, true}, {3, 1, 7, true}}));
}

TEST(Scheduler, ABackgroundChunkThatSamplesPaysItsSampleCost) {
  Harness h(Config(512), Cache(100));
  h.scheduler().SetBackgroundBudget({/*tokens=*/4, /*sample_cost=*/3});
  h.AddOk(1, 2, 10);
  h.AddBackgroundOk(2, 3, 2);
  // The whole 3-token prompt would sample and cost 6: it stops one token short (cost 2).
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{1, 0, 2, true}, {2, 0, 2, false}}));
  // Its last prompt token samples: 1 + 3 fits the 4.
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{1, 2, 1, true}, {2, 2, 1, true}}));
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{1, 3, 1, true}, {2, 3, 1, true}}));
}

TEST(Scheduler, BackgroundWorkComesAfterHigherPriorityAndIsPreemptedFirst) {
  // 4 blocks of 4 tokens: a background sequence of priority 9 and a foreground one of priority
  // 0, each with a 4-token prompt; the foreground sequence is served first and, when blocks run
  // out, the background one is the victim.
  Harness h(Config(512), Cache(/*num_blocks=*/4, /*block_size=*/4));
  h.AddBackgroundOk(1, 4, 8, /*priority=*/9);
  h.AddOk(2, 4, 8, /*priority=*/0);
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{2, 0, 4, true}, {1, 0, 4, true}}));
  for (int i = 0; i < 4; ++i) h.Run();  // positions 4..7: both hold 2 blocks
  EXPECT_EQ(h.kv().num_free_blocks(), 0);
  const Step step = h.Run();  // position 8: 2 needs a third block
  EXPECT_EQ(step.preempted, (std::vector<kv::SequenceId>{1}));
  EXPECT_EQ(step.scheduled, (std::vector<Slice>{{2, 8, 1, true}}));
}

TEST(Scheduler, PreemptsTheLowestPriorityLatestArrivalWhenBlocksRunOut) {
  // 6 blocks of 4 tokens; three 4-token prompts. Each sequence holds 2 blocks from its 5th
  // token on; the 9th token needs a third block.
  Harness h(Config(512), Cache(/*num_blocks=*/6, /*block_size=*/4));
  h.AddOk(1, 4, 20, /*priority=*/0);
  h.AddOk(2, 4, 20, /*priority=*/1);
  h.AddOk(3, 4, 20, /*priority=*/0);
  const Step first = h.Run();
  EXPECT_EQ(first.scheduled,
            (std::vector<Slice>{{2, 0, 4, true}, {1, 0, 4, true}, {3, 0, 4, true}}));
  for (int i = 0; i < 4; ++i) {
    const Step step = h.Run();  // positions 4..7
    EXPECT_TRUE(step.preempted.empty());
    EXPECT_EQ(step.scheduled.size(), 3u);
  }
  EXPECT_EQ(h.kv().num_free_blocks(), 0);
  const Step step = h.Run();  // position 8: 2 needs a block first
  EXPECT_EQ(step.preempted, (std::vector<kv::SequenceId>{3}));
  EXPECT_EQ(step.scheduled, (std::vector<Slice>{{2, 8, 1, true}, {1, 8, 1, true}}));
  const Sequence* victim = h.scheduler().Find(3);
  ASSERT_NE(victim, nullptr);
  EXPECT_EQ(victim->status, SequenceStatus::kWaiting);
  EXPECT_EQ(victim->num_computed_tokens, 0);
  EXPECT_EQ(victim->num_preemptions, 1);
  EXPECT_EQ(victim->num_tokens(), 9);  // its output stays
  EXPECT_EQ(h.scheduler().Stats().num_preemptions, 1);
  EXPECT_FALSE(h.kv().IsLive(3));
}

TEST(Scheduler, PreemptsTheAskingSequenceWhenItIsTheLast) {
  Harness h(Config(512), Cache(/*num_blocks=*/4, /*block_size=*/4));
  h.AddOk(1, 8, /*max_tokens=*/4, /*priority=*/1);
  h.AddOk(2, 4, /*max_tokens=*/6, /*priority=*/0);
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{1, 0, 8, true}, {2, 0, 4, true}}));
  const Step step = h.Run();  // 1 takes the last block; 2 needs one and is the victim
  EXPECT_EQ(step.scheduled, (std::vector<Slice>{{1, 8, 1, true}}));
  EXPECT_EQ(step.preempted, (std::vector<kv::SequenceId>{2}));
}

TEST(Scheduler, PreemptedSequenceRecomputesPromptAndOutputThenContinues) {
  Harness h(Config(512), Cache(/*num_blocks=*/4, /*block_size=*/4));
  h.AddOk(1, 8, /*max_tokens=*/4, /*priority=*/1);
  h.AddOk(2, 4, /*max_tokens=*/6, /*priority=*/0);
  h.Run();
  EXPECT_EQ(h.Run().preempted, (std::vector<kv::SequenceId>{2}));
  // 2 needs 2 blocks for its 5 tokens; 1 leaves only 1 free until it finishes.
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{1, 9, 1, true}}));
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{1, 10, 1, true}}));
  ASSERT_NE(h.Finished(1), nullptr);
  // Recompute: the prompt and the token generated before the preemption, in one chunk that
  // samples the next token.
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{2, 0, 5, true}}));
  const std::vector<Step> rest = h.Drain();
  ASSERT_EQ(rest.size(), 4u);
  for (size_t i = 0; i < rest.size(); ++i) {
    EXPECT_EQ(rest[i].scheduled, (std::vector<Slice>{{2, static_cast<int64_t>(5 + i), 1, true}}));
  }
  const Sequence* seq = h.Finished(2);
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->num_preemptions, 1);
  ASSERT_EQ(seq->num_tokens(), 10);
  for (int64_t pos = 4; pos < 10; ++pos) EXPECT_EQ(seq->tokens[pos], FakeToken(2, pos));
  EXPECT_EQ(h.kv().num_free_blocks(), 4);
}

TEST(Scheduler, AdmitsNothingInAStepThatPreempted) {
  Harness h(Config(512), Cache(/*num_blocks=*/5, /*block_size=*/4));
  h.AddOk(1, 8, 10, /*priority=*/1);
  h.AddOk(2, 8, 10, /*priority=*/0);
  h.Run();  // 4 of 5 blocks taken
  h.AddOk(3, 2, 10, /*priority=*/1);
  const Step step = h.Run();  // 1 takes the last block, 2 preempts itself: 2 blocks free
  EXPECT_EQ(step.preempted, (std::vector<kv::SequenceId>{2}));
  EXPECT_EQ(step.scheduled, (std::vector<Slice>{{1, 8, 1, true}}));
  EXPECT_EQ(h.kv().num_free_blocks(), 2);
  EXPECT_EQ(h.scheduler().Find(3)->status, SequenceStatus::kWaiting);
  // The next step admits 3 (priority 1, ahead of 2 in the queue).
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{1, 9, 1, true}, {3, 0, 2, true}}));
}

TEST(Scheduler, WaitingHeadIsNotOvertakenBySmallerLaterRequests) {
  Harness h(Config(512), Cache(/*num_blocks=*/6, /*block_size=*/4));
  h.AddOk(1, 16, 8);  // 4 blocks, 5 from its 17th token
  h.Run();
  h.AddOk(2, 8, 2);  // needs 2 blocks (+1 for its output): must wait for 1
  h.AddOk(3, 1, 2);  // would fit, but arrived after 2
  for (int i = 0; i < 3; ++i) {
    const Step step = h.Run();
    EXPECT_EQ(step.scheduled.size(), 1u);
    EXPECT_EQ(step.scheduled[0].id, 1);
  }
}

TEST(Scheduler, APausedSequenceRunsItsPromptButNotTheChunkThatSamples) {
  Harness h(Config(512), Cache(/*num_blocks=*/64, /*block_size=*/4));
  h.AddOk(1, 6, 4);
  h.AddOk(2, 5, 4);
  ASSERT_TRUE(h.scheduler().SetPaused(1, true));  // waiting, at the head of the queue
  Step step = h.Run();
  ASSERT_EQ(step.scheduled.size(), 2u);
  EXPECT_EQ(step.scheduled[0].id, 1);
  EXPECT_EQ(step.scheduled[0].n, 5);  // one short of its prompt
  EXPECT_FALSE(step.scheduled[0].samples);
  EXPECT_EQ(step.scheduled[1].id, 2);
  EXPECT_TRUE(step.scheduled[1].samples);
  step = h.Run();  // 1 waits with only its sampling token left; 2 decodes
  ASSERT_EQ(step.scheduled.size(), 1u);
  EXPECT_EQ(step.scheduled[0].id, 2);
  EXPECT_EQ(h.scheduler().Stats().num_pending_tokens, 0);  // waiting on the engine, not room
  ASSERT_TRUE(h.scheduler().SetPaused(1, false));
  step = h.Run();
  ASSERT_EQ(step.scheduled.size(), 2u);
  EXPECT_EQ(step.scheduled[0].id, 1);
  EXPECT_EQ(step.scheduled[0].start, 5);
  EXPECT_TRUE(step.scheduled[0].samples);
  // A decoding sequence paused keeps its KV and gets no step until it is taken back.
  ASSERT_TRUE(h.scheduler().SetPaused(2, true));
  const int64_t computed = h.scheduler().Find(2)->num_computed_tokens;
  for (int i = 0; i < 2; ++i) {
    step = h.Run();
    ASSERT_EQ(step.scheduled.size(), 1u);
    EXPECT_EQ(step.scheduled[0].id, 1);
  }
  EXPECT_EQ(h.scheduler().Find(2)->num_computed_tokens, computed);
  ASSERT_TRUE(h.scheduler().SetPaused(2, false));
  h.Drain();
  ASSERT_NE(h.Finished(1), nullptr);
  ASSERT_NE(h.Finished(2), nullptr);
  EXPECT_EQ(h.Finished(1)->num_generated(), 4);
  EXPECT_EQ(h.Finished(2)->num_generated(), 4);
  EXPECT_FALSE(h.scheduler().SetPaused(99, true));  // not held
}

TEST(Scheduler, APausedSequenceWithOnlyItsSamplingTokenLeftLetsTheNextStart) {
  Harness h(Config(512), Cache(/*num_blocks=*/64, /*block_size=*/4));
  h.AddOk(1, 1, 4);  // a one-token prompt: its only chunk samples
  h.AddOk(2, 5, 4);
  ASSERT_TRUE(h.scheduler().SetPaused(1, true));
  const Step step = h.Run();
  ASSERT_EQ(step.scheduled.size(), 1u);
  EXPECT_EQ(step.scheduled[0].id, 2);
  EXPECT_EQ(h.scheduler().num_waiting(), 1);
}

// What the engine does when a chunk's token mask is not ready at sampling: the chunk runs, the
// sequence is paused with every token computed, and its token comes later.
SchedulerOutput StepDeferring(Scheduler& scheduler, kv::SequenceId deferred) {
  SchedulerOutput out = scheduler.Schedule();
  scheduler.OnStepDone(out);
  for (const ScheduledSequence& s : out.scheduled) {
    if (!s.samples) continue;
    if (s.seq->id == deferred) {
      EXPECT_TRUE(scheduler.SetPaused(deferred, true));
      continue;
    }
    scheduler.AppendToken(s.seq->id, FakeToken(s.seq->id, s.seq->num_tokens()));
  }
  return out;
}

TEST(Scheduler, APausedSequenceTakesItsTokenAfterItsSamplingStepEvenIfPreemptedMeanwhile) {
  Harness h(Config(512), Cache(/*num_blocks=*/4, /*block_size=*/4));
  h.AddOk(2, 4, 12, /*priority=*/1);  // served first, grows until it needs 1's blocks
  h.AddOk(1, 6, 4);
  SchedulerOutput out = StepDeferring(h.scheduler(), 1);
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_TRUE(out.scheduled[1].samples);
  EXPECT_EQ(h.scheduler().Find(1)->num_uncomputed(), 0);
  // 1 sits out with its KV while its token is sampled; 2 decodes until it takes 1's blocks.
  bool preempted = false;
  for (int i = 0; i < 8 && !preempted; ++i) {
    out = StepDeferring(h.scheduler(), 1);
    ASSERT_EQ(out.scheduled.size(), 1u);
    EXPECT_EQ(out.scheduled[0].seq->id, 2);
    preempted = out.preempted == std::vector<kv::SequenceId>{1};
  }
  ASSERT_TRUE(preempted);
  EXPECT_EQ(h.scheduler().Find(1)->status, SequenceStatus::kWaiting);
  // The late token goes in while waiting; taken back, 1 recomputes its tokens with it.
  const int32_t late = FakeToken(1, 6);
  h.scheduler().AppendToken(1, late);
  ASSERT_TRUE(h.scheduler().SetPaused(1, false));
  h.Drain();
  const Sequence* one = h.Finished(1);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->tokens[6], late);
  EXPECT_EQ(one->num_generated(), 4);
  EXPECT_EQ(one->num_preemptions, 1);
  ASSERT_NE(h.Finished(2), nullptr);
  EXPECT_EQ(h.kv().num_free_blocks(), 4);
}

TEST(Scheduler, APausedSequencePreemptedWhileItsTokenIsSampledCanFinish) {
  Harness h(Config(512), Cache(/*num_blocks=*/4, /*block_size=*/4));
  h.AddOk(2, 4, 12, /*priority=*/1);
  h.AddOk(1, 6, 4);
  StepDeferring(h.scheduler(), 1);
  while (h.scheduler().Find(1)->status == SequenceStatus::kRunning) {
    ASSERT_FALSE(StepDeferring(h.scheduler(), 1).scheduled.empty());
  }
  // Its late token was its last (a stop token, say): it ends from the waiting queue.
  h.scheduler().AppendToken(1, FakeToken(1, 6));
  std::unique_ptr<Sequence> one = h.scheduler().Finish(1);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->status, SequenceStatus::kFinished);
  EXPECT_EQ(h.scheduler().num_waiting(), 0);
  EXPECT_EQ(h.scheduler().Find(1), nullptr);
  h.Drain();
  ASSERT_NE(h.Finished(2), nullptr);
  EXPECT_TRUE(h.scheduler().idle());
  EXPECT_EQ(h.kv().num_free_blocks(), 4);
}

TEST(Scheduler, PrefixCacheHitReducesTheTokensScheduled) {
  Harness h(Config(512), Cache(/*num_blocks=*/64, /*block_size=*/16, /*prefix_caching=*/true));
  std::vector<int32_t> prompt = Prompt(1, 40);
  ASSERT_TRUE(h.Add(1, prompt, 1).ok());
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{1, 0, 40, true}}));
  ASSERT_NE(h.Finished(1), nullptr);

  // The same prompt: its two full blocks are cached (the last token's block is recomputed).
  ASSERT_TRUE(h.Add(2, prompt, 1).ok());
  // The first block only, then a different tail.
  std::vector<int32_t> partial(prompt.begin(), prompt.begin() + 20);
  partial.push_back(7);
  ASSERT_TRUE(h.Add(3, partial, 1).ok());
  const Step step = h.Run();
  EXPECT_EQ(step.scheduled, (std::vector<Slice>{{2, 32, 8, true}, {3, 16, 5, true}}));
  EXPECT_EQ(step.num_tokens, 13);
  EXPECT_EQ(h.Finished(2)->num_cached_tokens, 32);
  EXPECT_EQ(h.Finished(3)->num_cached_tokens, 16);
  EXPECT_EQ(h.kv().Stats().prefix_hit_tokens, 48);
  EXPECT_EQ(h.kv().num_free_blocks(), 64);
}

// Admission is decided on a probe of the prefix cache: a waiting sequence held back, step
// after step, neither counts lookups nor takes (and moves) its hit blocks.
TEST(Scheduler, HeldBackSequenceLeavesThePrefixCacheUntouched) {
  // 20 blocks of 4 tokens; while anything runs, admission keeps 10 free.
  Harness h(Config(512, 64, /*watermark=*/0.5),
            Cache(/*num_blocks=*/20, /*block_size=*/4, /*prefix_caching=*/true));
  const std::vector<int32_t> prompt = Prompt(1, 9);  // 2 full blocks + 1 token
  ASSERT_TRUE(h.Add(1, prompt, 1).ok());
  h.Run();
  ASSERT_NE(h.Finished(1), nullptr);
  EXPECT_EQ(h.kv().Stats().cached_blocks, 2);
  h.AddOk(2, 32, /*max_tokens=*/3);  // 8 blocks: 12 free after it
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{2, 0, 32, true}}));
  // Sequence 3 hits the 2 cached (free) blocks and needs 1 more: 12 - 3 < 10, held back.
  ASSERT_TRUE(h.Add(3, prompt, 1).ok());
  const kv::KvCacheStats before = h.kv().Stats();
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{2, 32 + i, 1, true}}));
    EXPECT_EQ(h.kv().Stats().prefix_queries, before.prefix_queries) << "step " << i;
    EXPECT_EQ(h.kv().Stats().prefix_hits, before.prefix_hits) << "step " << i;
    EXPECT_EQ(h.kv().ProbePrefix(prompt).hit_tokens, 8) << "step " << i;
  }
  // Sequence 2 finished: 3 starts with its hit, counted once.
  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{3, 8, 1, true}}));
  EXPECT_EQ(h.kv().Stats().prefix_hits, before.prefix_hits + 2);
  EXPECT_EQ(h.kv().Stats().prefix_queries, before.prefix_queries + 2);
  EXPECT_EQ(h.kv().num_free_blocks(), 20);
}

TEST(Scheduler, RejectsARequestThatCanNeverFit) {
  Harness h(Config(512, 64, 0.0, 0, /*max_model_len=*/1024), Cache(/*num_blocks=*/10));
  Status s = h.Add(1, Prompt(1, 1000), 100);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt (1000 tokens) + max_tokens (100)"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("context of 1024 tokens"), std::string::npos) << s.message();

  // 150 + 20 - 1 = 169 tokens of KV: 11 blocks of 16.
  s = h.Add(2, Prompt(2, 150), 20);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("need 11 KV cache blocks of 16 tokens, but the whole cache holds 10"),
            std::string::npos)
      << s.message();

  s = h.Add(3, {}, 10);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt must not be empty"), std::string::npos) << s.message();

  s = h.Add(4, Prompt(4, 10), 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_tokens must be at least 1, got 0"), std::string::npos)
      << s.message();

  EXPECT_TRUE(h.scheduler().idle());
  EXPECT_EQ(h.scheduler().Find(1), nullptr);
}

TEST(Scheduler, RequestNeedingTheWholeCacheRunsDespiteTheWatermark) {
  // 150 + 11 - 1 = 160 tokens: exactly the 10 blocks. The watermark (2 blocks) would hold it
  // back forever; it applies only while others run.
  Harness h(Config(512, 64, /*watermark=*/0.2), Cache(/*num_blocks=*/10));
  h.AddOk(1, 150, 11);
  const std::vector<Step> steps = h.Drain();
  ASSERT_EQ(steps.size(), 11u);
  EXPECT_NE(h.Finished(1), nullptr);
  EXPECT_EQ(h.kv().num_free_blocks(), 10);
}

TEST(Scheduler, WatermarkHoldsBackAdmissionWhileOthersRun) {
  for (const double watermark : {0.0, 0.1}) {
    // 100 blocks of 4 tokens; the watermark 0.1 keeps 10 free.
    Harness h(Config(512, 64, watermark), Cache(/*num_blocks=*/100, /*block_size=*/4));
    h.AddOk(1, 200, /*max_tokens=*/2);  // 50 blocks, 51 for its second step
    h.Run();
    h.AddOk(2, 164, 1);  // 41 blocks: 49 - 41 = 8 free after it
    const Step second = h.Run();
    if (watermark == 0.0) {
      EXPECT_EQ(second.scheduled, (std::vector<Slice>{{1, 200, 1, true}, {2, 0, 164, true}}));
    } else {
      EXPECT_EQ(second.scheduled, (std::vector<Slice>{{1, 200, 1, true}}));
      EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{2, 0, 164, true}}));  // 1 finished
    }
  }
}

TEST(Scheduler, CancelFreesBlocksOfRunningAndWaitingSequences) {
  Harness h(Config(512, /*max_batch_size=*/1), Cache(/*num_blocks=*/20));
  h.AddOk(1, 40, 100);
  h.AddOk(2, 40, 100);
  h.Run();
  EXPECT_EQ(h.kv().num_free_blocks(), 17);
  EXPECT_EQ(h.scheduler().Find(2)->status, SequenceStatus::kWaiting);

  EXPECT_TRUE(h.scheduler().Cancel(1));
  EXPECT_EQ(h.kv().num_free_blocks(), 20);
  EXPECT_FALSE(h.kv().IsLive(1));
  EXPECT_EQ(h.scheduler().Find(1), nullptr);
  EXPECT_FALSE(h.scheduler().Cancel(1));  // already gone: a normal race

  EXPECT_EQ(h.Run().scheduled, (std::vector<Slice>{{2, 0, 40, true}}));
  EXPECT_TRUE(h.scheduler().Cancel(2));
  EXPECT_TRUE(h.scheduler().idle());
  EXPECT_EQ(h.kv().num_free_blocks(), 20);
  EXPECT_TRUE(h.Run().scheduled.empty());

  h.AddOk(3, 4, 10);
  EXPECT_TRUE(h.scheduler().Cancel(3));  // while waiting
  EXPECT_TRUE(h.scheduler().idle());
  EXPECT_FALSE(h.scheduler().Cancel(99));  // never added
}

TEST(Scheduler, MakeBatchSlicesTokensAndBlocks) {
  kv::KvCacheManager kv(Cache(/*num_blocks=*/20, /*block_size=*/4));
  Scheduler scheduler(Config(/*budget=*/10), &kv);
  ASSERT_TRUE(scheduler.Add(std::make_unique<Sequence>(1, Prompt(1, 3), 5)).ok());
  ASSERT_TRUE(scheduler.Add(std::make_unique<Sequence>(2, Prompt(2, 30), 5)).ok());
  const SchedulerOutput out = scheduler.Schedule();
  const backend::Batch batch = MakeBatch(out, kv);
  ASSERT_EQ(batch.sequences.size(), 2u);

  const backend::SequenceSlice& a = batch.sequences[0];
  EXPECT_EQ(std::vector<int32_t>(a.tokens.begin(), a.tokens.end()), Prompt(1, 3));
  EXPECT_EQ(a.start_pos, 0);
  EXPECT_EQ(a.logits, backend::LogitsWanted::kLast);
  EXPECT_EQ(a.block_ids.size(), 1u);

  const backend::SequenceSlice& b = batch.sequences[1];  // a 7-token chunk of 30
  const std::vector<int32_t> prompt = Prompt(2, 30);
  EXPECT_EQ(std::vector<int32_t>(b.tokens.begin(), b.tokens.end()),
            std::vector<int32_t>(prompt.begin(), prompt.begin() + 7));
  EXPECT_EQ(b.logits, backend::LogitsWanted::kNone);
  EXPECT_EQ(b.block_ids.size(), 2u);
  const std::span<const kv::BlockId> blocks = kv.Blocks(2);
  EXPECT_TRUE(std::equal(b.block_ids.begin(), b.block_ids.end(), blocks.begin(), blocks.end()));
  scheduler.OnStepDone(out);

  // The chunk after: positions 7.. of the same sequence.
  scheduler.AppendToken(1, 42);
  const SchedulerOutput next = scheduler.Schedule();
  const backend::Batch next_batch = MakeBatch(next, kv);
  ASSERT_EQ(next_batch.sequences.size(), 2u);
  EXPECT_EQ(next_batch.sequences[0].tokens.size(), 1u);
  EXPECT_EQ(next_batch.sequences[0].tokens[0], 42);
  EXPECT_EQ(next_batch.sequences[0].start_pos, 3);
  EXPECT_EQ(next_batch.sequences[1].start_pos, 7);
  EXPECT_EQ(next_batch.sequences[1].tokens.size(), 9u);
  EXPECT_EQ(next_batch.sequences[1].tokens[0], prompt[7]);
}

TEST(Scheduler, StatsDescribeTheLastStep) {
  Harness h(Config(/*budget=*/100, /*max_batch_size=*/2), Cache(/*num_blocks=*/50));
  h.AddOk(1, 150, 5);
  h.AddOk(2, 10, 5);
  h.AddOk(3, 10, 5);
  h.Run();  // 1's first chunk takes the whole budget
  SchedulerStats stats = h.scheduler().Stats();
  EXPECT_EQ(stats.num_running, 1);
  EXPECT_EQ(stats.num_waiting, 2);
  EXPECT_EQ(stats.num_scheduled_sequences, 1);
  EXPECT_EQ(stats.num_scheduled_tokens, 100);
  EXPECT_EQ(stats.num_pending_tokens, 50);
  EXPECT_EQ(stats.token_budget, 100);
  EXPECT_EQ(stats.num_preemptions, 0);
  EXPECT_EQ(stats.kv.num_blocks, 50);
  EXPECT_EQ(stats.kv.used_blocks, 7);

  h.Run();  // 1's last chunk and 2; 3 waits for the batch-size cap
  stats = h.scheduler().Stats();
  EXPECT_EQ(stats.num_running, 2);
  EXPECT_EQ(stats.num_waiting, 1);
  EXPECT_EQ(stats.num_scheduled_sequences, 2);
  EXPECT_EQ(stats.num_scheduled_tokens, 60);
  EXPECT_EQ(stats.num_pending_tokens, 0);
  EXPECT_EQ(stats.kv.used_blocks, 10 + 1);
}

TEST(SchedulerConfig, ValidateNamesTheBadField) {
  EXPECT_TRUE(Config(512).Validate().ok());
  SchedulerConfig c = Config(512);
  c.max_model_len = 0;
  EXPECT_NE(c.Validate().message().find("max_model_len"), std::string::npos);
  c = Config(0);
  EXPECT_NE(c.Validate().message().find("max_batched_tokens must be at least 1, got 0"),
            std::string::npos);
  c = Config(512, 0);
  EXPECT_NE(c.Validate().message().find("max_batch_size"), std::string::npos);
  c = Config(512, 64, 1.0);
  EXPECT_NE(c.Validate().message().find("watermark"), std::string::npos);
  c = Config(512, 64, 0.0, -1);
  EXPECT_NE(c.Validate().message().find("long_prefill_chunk"), std::string::npos);
}

// ---- Randomized property test --------------------------------------------------------------

enum class Outcome { kLive, kFinished, kCancelled, kRejected };

class SchedulerProperty : public testing::TestWithParam<uint64_t> {};

// Thousands of steps of random arrivals (shared prefixes included), prompt lengths, max_tokens,
// priorities, early stops, cancellations and budget changes over a small KV pool. Checks every
// step's output against the contract, then that every request ended and every block came back.
TEST_P(SchedulerProperty, EveryRequestEndsWithinBudgetAndEveryBlockComesBack) {
  std::mt19937_64 rng(GetParam());
  auto uniform = [&rng](int64_t lo, int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto chance = [&rng](double p) { return std::bernoulli_distribution(p)(rng); };

  const int32_t block_size = static_cast<int32_t>(std::vector<int64_t>{1, 4, 16}[uniform(0, 2)]);
  // A small pool (64..640 tokens of KV) against prompts of up to 320 tokens: preemption is
  // common.
  const int32_t num_blocks =
      std::max<int32_t>(2, static_cast<int32_t>(uniform(64, 640)) / block_size);
  const bool prefix_caching = chance(0.7);
  SchedulerConfig config = Config(/*budget=*/uniform(1, 300), static_cast<int32_t>(uniform(1, 12)),
                                  std::vector<double>{0.0, 0.05, 0.2}[uniform(0, 2)],
                                  chance(0.5) ? 0 : uniform(1, 64), /*max_model_len=*/300);
  SCOPED_TRACE(testing::Message() << "block_size " << block_size << " num_blocks " << num_blocks
                                  << " prefix_caching " << prefix_caching << " budget "
                                  << config.max_batched_tokens << " batch " << config.max_batch_size
                                  << " watermark " << config.watermark << " chunk "
                                  << config.long_prefill_chunk);
  kv::KvCacheManager kv(Cache(num_blocks, block_size, prefix_caching));
  Scheduler scheduler(config, &kv);

  // A few shared prefixes so that prompts hit the prefix cache.
  std::vector<std::vector<int32_t>> prefixes(3);
  for (auto& prefix : prefixes) {
    for (int64_t i = 0, n = uniform(1, 120); i < n; ++i) {
      prefix.push_back(static_cast<int32_t>(uniform(1, 50)));
    }
  }

  std::map<kv::SequenceId, Outcome> outcomes;
  std::set<kv::SequenceId> background;  // ids added as background work
  kv::SequenceId next_id = 0;
  int64_t steps_with_preemption = 0;
  int64_t rollbacks = 0;
  constexpr int kArrivalSteps = 3000;
  constexpr int kMaxSteps = 100000;

  for (int step = 0; step < kMaxSteps; ++step) {
    const bool arriving = step < kArrivalSteps;
    if (!arriving && scheduler.idle()) break;
    // Arrivals.
    if (arriving && chance(0.3)) {
      for (int64_t k = uniform(1, 3); k > 0; --k) {
        const kv::SequenceId id = next_id++;
        std::vector<int32_t> prompt;
        if (chance(0.5)) prompt = prefixes[uniform(0, 2)];
        for (int64_t n = uniform(prompt.empty() ? 1 : 0, 200); n > 0; --n) {
          prompt.push_back(static_cast<int32_t>(uniform(1, 50)));
        }
        if (chance(0.01)) prompt.clear();
        const int64_t max_tokens = uniform(chance(0.01) ? 0 : 1, 64);
        const int64_t prompt_len = static_cast<int64_t>(prompt.size());
        const bool fits = prompt_len > 0 && max_tokens >= 1 &&
                          prompt_len + max_tokens <= config.max_model_len &&
                          (prompt_len + max_tokens - 1 + block_size - 1) / block_size <= num_blocks;
        const bool is_background = chance(0.25);
        if (is_background) background.insert(id);
        const Status status = scheduler.Add(std::make_unique<Sequence>(
            id, std::move(prompt), max_tokens, static_cast<int32_t>(uniform(0, 2)), is_background));
        ASSERT_EQ(status.ok(), fits) << status.ToString();
        if (!fits) {
          ASSERT_EQ(status.code(), StatusCode::kInvalidArgument);
          outcomes[id] = Outcome::kRejected;
        } else {
          outcomes[id] = Outcome::kLive;
        }
      }
    }
    // Cancellations (some of ids already ended: must answer false).
    if (next_id > 0 && chance(0.05)) {
      const kv::SequenceId id = uniform(0, next_id - 1);
      const bool cancelled = scheduler.Cancel(id);
      ASSERT_EQ(cancelled, outcomes[id] == Outcome::kLive) << "id " << id;
      if (cancelled) {
        outcomes[id] = Outcome::kCancelled;
        ASSERT_FALSE(kv.IsLive(id));
      }
    }
    if (chance(0.01)) scheduler.SetTokenBudget(uniform(1, 300));
    if (chance(0.02)) {
      const int64_t sample_cost = uniform(0, 5);
      scheduler.SetBackgroundBudget({uniform(1 + sample_cost, 40), sample_cost});
    }

    const bool was_idle = scheduler.idle();
    bool foreground_held = false;
    for (const auto& [id, outcome] : outcomes) {
      foreground_held |= outcome == Outcome::kLive && !background.contains(id);
    }
    const int64_t budget = scheduler.token_budget();
    const SchedulerOutput out = scheduler.Schedule();

    // Liveness: work present means something is scheduled.
    ASSERT_EQ(out.scheduled.empty(), was_idle) << "step " << step;
    ASSERT_LE(out.num_scheduled_tokens, budget);
    ASSERT_LE(static_cast<int32_t>(out.scheduled.size()), config.max_batch_size);
    ASSERT_LE(scheduler.num_running(), config.max_batch_size);
    int64_t sum = 0;
    int64_t background_cost = 0;
    std::set<kv::SequenceId> seen;
    for (const ScheduledSequence& s : out.scheduled) {
      const Sequence& seq = *s.seq;
      ASSERT_TRUE(seen.insert(seq.id).second);
      ASSERT_EQ(seq.background, background.contains(seq.id));
      if (seq.background) {
        background_cost +=
            s.num_tokens + (s.samples ? scheduler.background_budget().sample_cost : 0);
      }
      ASSERT_EQ(seq.status, SequenceStatus::kRunning);
      ASSERT_EQ(s.start_pos, seq.num_computed_tokens);
      ASSERT_GE(s.num_tokens, 1);
      if (config.long_prefill_chunk > 0) {
        ASSERT_LE(s.num_tokens, config.long_prefill_chunk);
      }
      ASSERT_LE(s.start_pos + s.num_tokens, seq.num_tokens());
      ASSERT_EQ(s.samples, s.start_pos + s.num_tokens == seq.num_tokens());
      ASSERT_GE(static_cast<int64_t>(kv.Blocks(seq.id).size()) * block_size,
                s.start_pos + s.num_tokens);
      sum += s.num_tokens;
    }
    ASSERT_EQ(sum, out.num_scheduled_tokens);
    if (foreground_held) {
      ASSERT_LE(background_cost, scheduler.background_budget().tokens) << "step " << step;
    }
    if (!out.preempted.empty()) {
      ++steps_with_preemption;
      // Victims come last in service order: after everyone scheduled (no admissions).
      for (const kv::SequenceId id : out.preempted) {
        ASSERT_FALSE(seen.contains(id));
        const Sequence* victim = scheduler.Find(id);
        ASSERT_NE(victim, nullptr);
        ASSERT_EQ(victim->status, SequenceStatus::kWaiting);
        ASSERT_FALSE(kv.IsLive(id));
        for (const ScheduledSequence& s : out.scheduled) {
          // Background work is preempted before any other sequence.
          if (s.seq->background != victim->background) {
            ASSERT_TRUE(victim->background);
            continue;
          }
          ASSERT_TRUE(s.seq->priority > victim->priority ||
                      (s.seq->priority == victim->priority && s.seq->arrival < victim->arrival));
        }
      }
    }
    const backend::Batch batch = MakeBatch(out, kv);
    ASSERT_EQ(batch.sequences.size(), out.scheduled.size());

    // Fake forward, sample, stop checks.
    scheduler.OnStepDone(out);
    for (const ScheduledSequence& s : out.scheduled) {
      if (!s.samples) continue;
      const Sequence* seq = s.seq;
      const kv::SequenceId id = seq->id;
      if (seq->num_generated() >= 1 && chance(0.1)) {
        // Speculation's bookkeeping: roll back some generated tokens (rejected), then append
        // several at once (accepted), which the next steps compute as one multi-token chunk.
        const int64_t back = 1 + static_cast<int64_t>(rng() % seq->num_generated());
        const int64_t keep = seq->num_tokens() - back;
        const int32_t blocks_before = static_cast<int32_t>(kv.Blocks(id).size());
        if (scheduler.Rollback(id, keep)) {
          ++rollbacks;
          ASSERT_EQ(seq->num_tokens(), keep);
          ASSERT_EQ(seq->num_computed_tokens, keep);
          ASSERT_EQ(static_cast<int64_t>(kv.Blocks(id).size()),
                    (keep + block_size - 1) / block_size);
          ASSERT_LE(static_cast<int32_t>(kv.Blocks(id).size()), blocks_before);
        }
        const int64_t room = seq->max_tokens - seq->num_generated();
        const int64_t n = std::min<int64_t>(room, 1 + static_cast<int64_t>(rng() % 3));
        std::vector<int32_t> run;
        for (int64_t k = 0; k < n; ++k) run.push_back(FakeToken(id, seq->num_tokens() + k));
        scheduler.AppendTokens(id, run);
      } else {
        scheduler.AppendToken(id, FakeToken(id, seq->num_tokens()));
      }
      if (seq->num_generated() == seq->max_tokens || chance(0.02)) {
        const std::unique_ptr<Sequence> done = scheduler.Finish(id);
        ASSERT_FALSE(kv.IsLive(id));
        for (int64_t pos = done->prompt_len; pos < done->num_tokens(); ++pos) {
          ASSERT_EQ(done->tokens[pos], FakeToken(id, pos)) << "id " << id << " pos " << pos;
        }
        ASSERT_LE(done->num_generated(), done->max_tokens);
        outcomes[id] = Outcome::kFinished;
      }
    }
  }

  EXPECT_TRUE(scheduler.idle());
  for (const auto& [id, outcome] : outcomes) EXPECT_NE(outcome, Outcome::kLive) << "id " << id;
  EXPECT_EQ(kv.num_free_blocks(), num_blocks);
  EXPECT_EQ(kv.Stats().used_blocks, 0);
  EXPECT_GT(next_id, 500);
  EXPECT_GT(rollbacks, 20);
  RecordProperty("preempting_steps", std::to_string(steps_with_preemption));
}

INSTANTIATE_TEST_SUITE_P(Seeds, SchedulerProperty, testing::Range<uint64_t>(1, 33));

}  // namespace
}  // namespace strata::engine
