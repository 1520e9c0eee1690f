#include "strata/kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <random>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "strata/kv/block_hash.h"

namespace strata::kv {
namespace {

using Tokens = std::vector<int32_t>;

// n consecutive token ids from `first`.
Tokens Range(int32_t first, int32_t n) {
  Tokens tokens(static_cast<std::size_t>(n));
  for (int32_t i = 0; i < n; ++i) tokens[static_cast<std::size_t>(i)] = first + i;
  return tokens;
}

Tokens Concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

KvCacheManagerOptions Options(int32_t num_blocks, int32_t block_size = 4) {
  KvCacheManagerOptions options;
  options.num_blocks = num_blocks;
  options.block_size = block_size;
  return options;
}

// What the engine does for a new prompt: look it up, make room, compute the rest, commit.
// Returns the cached prefix length.
int64_t Prefill(KvCacheManager* kv, SequenceId id, const Tokens& tokens) {
  const int64_t cached = kv->StartSequence(id, tokens);
  EXPECT_TRUE(kv->Reserve(id, static_cast<int64_t>(tokens.size())));
  kv->CommitComputed(id, tokens, static_cast<int64_t>(tokens.size()));
  return cached;
}

std::vector<BlockId> BlocksOf(const KvCacheManager& kv, SequenceId id) {
  const std::span<const BlockId> blocks = kv.Blocks(id);
  return {blocks.begin(), blocks.end()};
}

std::vector<BlockId> Head(const std::vector<BlockId>& blocks, std::size_t n) {
  return {blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(n)};
}

TEST(KvCacheBlockHash, IsDeterministicAndDependsOnParentSaltTokensAndOrder) {
  const Tokens tokens = Range(100, 16);
  const BlockHash h = HashBlockTokens(kRootBlockHash, 7, tokens);
  EXPECT_EQ(h, HashBlockTokens(kRootBlockHash, 7, tokens));
  EXPECT_NE(h, HashBlockTokens(kRootBlockHash + 1, 7, tokens));
  EXPECT_NE(h, HashBlockTokens(kRootBlockHash, 8, tokens));
  Tokens swapped = tokens;
  std::swap(swapped[3], swapped[4]);
  EXPECT_NE(h, HashBlockTokens(kRootBlockHash, 7, swapped));
  Tokens shorter(tokens.begin(), tokens.end() - 1);
  EXPECT_NE(h, HashBlockTokens(kRootBlockHash, 7, shorter));
  Tokens negative = tokens;
  negative[15] = -tokens[15];
  EXPECT_NE(h, HashBlockTokens(kRootBlockHash, 7, negative));
}

TEST(KvCacheBlockHash, SingleTokenChangesGiveDistinctHashes) {
  // Every one-token edit of a block (position x value) must land on its own hash.
  const Tokens base = Range(0, 16);
  std::set<BlockHash> seen = {HashBlockTokens(kRootBlockHash, 0, base)};
  int edits = 0;
  for (std::size_t pos = 0; pos < base.size(); ++pos) {
    for (int32_t value = 1000; value < 1064; ++value) {
      Tokens edited = base;
      edited[pos] = value;
      seen.insert(HashBlockTokens(kRootBlockHash, 0, edited));
      ++edits;
    }
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(edits) + 1);
}

TEST(KvCacheManager, StartsWithEveryBlockFreeAndNothingCached) {
  KvCacheManager kv(Options(6));
  EXPECT_EQ(kv.num_blocks(), 6);
  EXPECT_EQ(kv.block_size(), 4);
  EXPECT_EQ(kv.num_free_blocks(), 6);
  const KvCacheStats stats = kv.Stats();
  EXPECT_EQ(stats.num_blocks, 6);
  EXPECT_EQ(stats.used_blocks, 0);
  EXPECT_EQ(stats.free_blocks, 6);
  EXPECT_EQ(stats.cached_blocks, 0);
  EXPECT_EQ(stats.prefix_queries, 0);
  EXPECT_FALSE(kv.IsLive(1));
}

TEST(KvCacheManager, ReserveIsAllOrNothing) {
  KvCacheManager kv(Options(4));
  EXPECT_EQ(kv.StartSequence(1, Range(0, 12)), 0);
  ASSERT_TRUE(kv.Reserve(1, 12));
  EXPECT_EQ(kv.Blocks(1).size(), 3u);
  EXPECT_EQ(kv.StartSequence(2, Range(50, 8)), 0);
  EXPECT_EQ(kv.BlocksNeeded(2, 8), 2);
  EXPECT_FALSE(kv.Reserve(2, 8));  // 2 needed, 1 free: nothing taken
  EXPECT_TRUE(kv.Blocks(2).empty());
  EXPECT_EQ(kv.num_free_blocks(), 1);
  EXPECT_TRUE(kv.Reserve(2, 4));
  EXPECT_EQ(kv.num_free_blocks(), 0);
  EXPECT_FALSE(kv.Reserve(2, 5));
  EXPECT_EQ(kv.Blocks(2).size(), 1u);
}

TEST(KvCacheManager, ReserveAllocatesOnlyTheMissingBlocks) {
  KvCacheManager kv(Options(8));
  kv.StartSequence(1, Range(0, 3));
  EXPECT_EQ(kv.BlocksNeeded(1, 0), 0);
  EXPECT_EQ(kv.BlocksNeeded(1, 1), 1);
  EXPECT_EQ(kv.BlocksNeeded(1, 4), 1);
  EXPECT_EQ(kv.BlocksNeeded(1, 5), 2);
  ASSERT_TRUE(kv.Reserve(1, 5));
  const std::vector<BlockId> before = BlocksOf(kv, 1);
  EXPECT_EQ(kv.BlocksNeeded(1, 8), 0);
  EXPECT_EQ(kv.BlocksNeeded(1, 9), 1);
  ASSERT_TRUE(kv.Reserve(1, 3));  // already fits: no-op
  ASSERT_TRUE(kv.Reserve(1, 9));
  const std::vector<BlockId> after = BlocksOf(kv, 1);
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(Head(after, 2), before);  // existing blocks keep their positions
  EXPECT_EQ(kv.num_free_blocks(), 5);
}

TEST(KvCacheManager, FreeSequenceReturnsEveryBlock) {
  KvCacheManager kv(Options(16));
  Prefill(&kv, 1, Range(0, 10));
  Prefill(&kv, 2, Range(0, 13));  // shares two blocks with 1
  Prefill(&kv, 3, Range(500, 7));
  kv.StartSequence(4, Range(900, 5));  // never reserved
  EXPECT_LT(kv.num_free_blocks(), 16);
  for (SequenceId id : {2, 4, 1, 3}) {
    kv.FreeSequence(id);
    EXPECT_FALSE(kv.IsLive(id));
  }
  EXPECT_EQ(kv.num_free_blocks(), 16);
  EXPECT_EQ(kv.Stats().used_blocks, 0);
  EXPECT_EQ(kv.Stats().free_blocks, 16);
}

TEST(KvCacheManager, SecondSequenceWithSamePromptHitsAllFullBlocksButTheLastToken) {
  KvCacheManager kv(Options(16));
  const Tokens prompt = Range(0, 10);  // blocks [0,4) [4,8) full, [8,10) partial
  EXPECT_EQ(Prefill(&kv, 1, prompt), 0);
  EXPECT_EQ(kv.StartSequence(2, prompt), 8);

  // A prompt of whole blocks recomputes its last block: its last token needs logits.
  const Tokens whole = Range(100, 12);
  EXPECT_EQ(Prefill(&kv, 3, whole), 0);
  EXPECT_EQ(kv.StartSequence(4, whole), 8);
  const Tokens one_block = Range(200, 4);
  EXPECT_EQ(Prefill(&kv, 5, one_block), 0);
  EXPECT_EQ(kv.StartSequence(6, one_block), 0);
}

TEST(KvCacheManager, ProbeSeesTheHitWithoutTakingOrCountingIt) {
  KvCacheManager kv(Options(16));
  const Tokens prompt = Range(0, 10);
  EXPECT_EQ(kv.ProbePrefix(prompt).hit_tokens, 0);
  Prefill(&kv, 1, prompt);
  const KvCacheStats before = kv.Stats();
  // Live sequence 1 holds the blocks: a hit on them takes no free block.
  KvCacheManager::PrefixProbe probe = kv.ProbePrefix(prompt);
  EXPECT_EQ(probe.hit_tokens, 8);
  EXPECT_EQ(probe.free_hit_blocks, 0);
  kv.FreeSequence(1);
  // Freed but cached: both hit blocks are now free ones that a start would reclaim.
  probe = kv.ProbePrefix(prompt);
  EXPECT_EQ(probe.hit_tokens, 8);
  EXPECT_EQ(probe.free_hit_blocks, 2);
  EXPECT_EQ(kv.ProbePrefix(Concat(Range(0, 4), Range(50, 6))).hit_tokens, 4);
  // Probing changed nothing: no lookup counted, every block still free.
  const KvCacheStats after = kv.Stats();
  EXPECT_EQ(after.prefix_queries, before.prefix_queries);
  EXPECT_EQ(after.prefix_hits, before.prefix_hits);
  EXPECT_EQ(after.free_blocks, 16);
  // And the start finds what the probe said.
  EXPECT_EQ(kv.StartSequence(2, prompt), 8);
  EXPECT_EQ(kv.Stats().free_blocks, 14);
}

TEST(KvCacheManager, EmptyAndOneTokenPromptsHitNothing) {
  KvCacheManager kv(Options(4));
  EXPECT_EQ(kv.StartSequence(1, Tokens{}), 0);
  EXPECT_TRUE(kv.IsLive(1));
  EXPECT_TRUE(kv.Blocks(1).empty());
  Prefill(&kv, 2, Range(7, 4));
  EXPECT_EQ(kv.StartSequence(3, Range(7, 1)), 0);
  EXPECT_EQ(kv.Stats().prefix_queries, 0);
}

TEST(KvCacheManager, PartialBlockIsNeverShared) {
  KvCacheManager kv(Options(16));
  const Tokens prompt = Range(0, 6);
  Prefill(&kv, 1, prompt);
  EXPECT_EQ(kv.Stats().cached_blocks, 1);  // [4,6) is not full
  // A longer prompt starting with the same 6 tokens reuses only the full block.
  const Tokens longer = Concat(prompt, Range(6, 7));
  EXPECT_EQ(Prefill(&kv, 2, longer), 4);
  const std::vector<BlockId> a = BlocksOf(kv, 1);
  const std::vector<BlockId> b = BlocksOf(kv, 2);
  EXPECT_EQ(a[0], b[0]);
  EXPECT_NE(a[1], b[1]);
  // Once sequence 1 fills its second block by decoding, that block is cached too.
  Tokens decoded = Concat(prompt, {60, 61});
  ASSERT_TRUE(kv.Reserve(1, 8));
  kv.CommitComputed(1, decoded, 8);
  EXPECT_EQ(kv.StartSequence(3, Concat(decoded, {1})), 8);
  EXPECT_EQ(BlocksOf(kv, 3), Head(a, 2));
}

TEST(KvCacheManager, HitBlocksAreSharedWithALiveSequence) {
  KvCacheManager kv(Options(10));
  const Tokens prompt = Range(0, 12);
  Prefill(&kv, 1, prompt);
  EXPECT_EQ(kv.Stats().used_blocks, 3);
  EXPECT_EQ(kv.StartSequence(2, prompt), 8);
  // Taking the hits allocated nothing: both blocks are now referenced twice.
  EXPECT_EQ(kv.Stats().used_blocks, 3);
  EXPECT_EQ(kv.num_free_blocks(), 7);
  EXPECT_EQ(BlocksOf(kv, 2), Head(BlocksOf(kv, 1), 2));
  ASSERT_TRUE(kv.Reserve(2, 12));
  EXPECT_EQ(kv.Stats().used_blocks, 4);
  // Freeing the first keeps the shared blocks in use: only its own last block comes back.
  kv.FreeSequence(1);
  EXPECT_EQ(kv.Stats().used_blocks, 3);
  EXPECT_EQ(kv.num_free_blocks(), 7);
  kv.FreeSequence(2);
  EXPECT_EQ(kv.num_free_blocks(), 10);
}

TEST(KvCacheManager, HitBlocksAreReclaimedFromTheFreeListAfterTheFirstIsFreed) {
  KvCacheManager kv(Options(10));
  const Tokens prompt = Range(0, 12);
  Prefill(&kv, 1, prompt);
  const std::vector<BlockId> first = BlocksOf(kv, 1);
  kv.FreeSequence(1);
  EXPECT_EQ(kv.num_free_blocks(), 10);
  EXPECT_EQ(kv.Stats().cached_blocks, 3);  // free, but still cached
  EXPECT_EQ(kv.StartSequence(2, prompt), 8);
  EXPECT_EQ(BlocksOf(kv, 2), Head(first, 2));
  EXPECT_EQ(kv.num_free_blocks(), 8);  // reclaimed, not allocated
  EXPECT_EQ(kv.Stats().used_blocks, 2);
  kv.FreeSequence(2);
  EXPECT_EQ(kv.num_free_blocks(), 10);
}

TEST(KvCacheManager, CachedFreeBlockIsEvictedOnceReallocated) {
  KvCacheManager kv(Options(4));
  const Tokens prompt = Range(0, 9);
  Prefill(&kv, 1, prompt);
  kv.FreeSequence(1);
  EXPECT_EQ(kv.Stats().cached_blocks, 2);
  // Another sequence takes every block for new contents: the hashes go with them.
  kv.StartSequence(2, Range(1000, 16));
  ASSERT_TRUE(kv.Reserve(2, 16));
  EXPECT_EQ(kv.Stats().cached_blocks, 0);
  kv.FreeSequence(2);
  EXPECT_EQ(kv.StartSequence(3, prompt), 0);
}

TEST(KvCacheManager, EvictionIsLeastRecentlyUsedAcrossSequences) {
  KvCacheManager kv(Options(6));
  const Tokens older = Range(0, 9);     // 3 blocks, 2 cached
  const Tokens newer = Range(1000, 9);  // 3 blocks, 2 cached
  Prefill(&kv, 1, older);
  kv.FreeSequence(1);
  Prefill(&kv, 2, newer);
  kv.FreeSequence(2);
  EXPECT_EQ(kv.Stats().cached_blocks, 4);
  // Three new blocks come from the prefix freed longest ago.
  kv.StartSequence(3, Range(5000, 12));
  ASSERT_TRUE(kv.Reserve(3, 12));
  EXPECT_EQ(kv.Stats().cached_blocks, 2);
  EXPECT_EQ(kv.StartSequence(4, older), 0);
  EXPECT_EQ(kv.StartSequence(5, newer), 8);
}

TEST(KvCacheManager, ReusedPrefixIsRefreshedInLruOrder) {
  KvCacheManager kv(Options(6));
  const Tokens a = Range(0, 9);
  const Tokens b = Range(1000, 9);
  Prefill(&kv, 1, a);
  kv.FreeSequence(1);
  Prefill(&kv, 2, b);
  kv.FreeSequence(2);
  // Using `a` again makes it the most recently freed: `b` is evicted first now.
  EXPECT_EQ(Prefill(&kv, 3, a), 8);
  kv.FreeSequence(3);
  kv.StartSequence(4, Range(5000, 12));
  ASSERT_TRUE(kv.Reserve(4, 12));
  EXPECT_EQ(kv.StartSequence(5, b), 0);
  EXPECT_EQ(kv.StartSequence(6, a), 8);
}

TEST(KvCacheManager, TailBlocksOfAFreedSequenceAreEvictedBeforeItsHead) {
  KvCacheManager kv(Options(8));
  const Tokens prompt = Range(0, 13);  // blocks 0..2 full and cached, block 3 partial
  Prefill(&kv, 1, prompt);
  kv.FreeSequence(1);
  EXPECT_EQ(kv.Stats().cached_blocks, 3);
  kv.StartSequence(2, Range(1000, 24));
  ASSERT_TRUE(kv.Reserve(2, 20));  // the 4 never-used blocks, then the partial tail block
  EXPECT_EQ(kv.Stats().cached_blocks, 3);
  ASSERT_TRUE(kv.Reserve(2, 24));  // then the last full block of the prompt
  EXPECT_EQ(kv.Stats().cached_blocks, 2);
  EXPECT_EQ(kv.StartSequence(3, prompt), 8);  // the head survives
}

// Records every (salt, hash) the managers compute.
std::vector<std::pair<uint64_t, BlockHash>> g_hashes;
BlockHash RecordingHash(BlockHash parent, uint64_t salt, std::span<const int32_t> tokens) {
  const BlockHash hash = HashBlockTokens(parent, salt, tokens);
  g_hashes.emplace_back(salt, hash);
  return hash;
}

TEST(KvCacheManager, DifferentSaltGivesNoHit) {
  // Two caches of the same prompt under different salts (two models or adapters) key every
  // block differently, so no lookup under one salt can find the other's blocks.
  const Tokens prompt = Range(0, 13);
  g_hashes.clear();
  std::set<BlockHash> keys[2];
  for (int i = 0; i < 2; ++i) {
    KvCacheManagerOptions options = Options(8);
    options.salt = 0x1234 + static_cast<uint64_t>(i);
    options.hash_for_testing = RecordingHash;
    KvCacheManager kv(options);
    EXPECT_EQ(Prefill(&kv, 1, prompt), 0);
    EXPECT_EQ(kv.StartSequence(2, prompt), 12);  // the same salt hits
    for (const auto& [salt, hash] : g_hashes) {
      EXPECT_EQ(salt, options.salt);
      keys[i].insert(hash);
    }
    g_hashes.clear();
  }
  EXPECT_EQ(keys[0].size(), 3u);
  EXPECT_EQ(keys[1].size(), 3u);
  for (BlockHash key : keys[0]) EXPECT_FALSE(keys[1].contains(key));
}

TEST(KvCacheManager, PrefixCachingOffNeverHits) {
  KvCacheManagerOptions options = Options(8);
  options.enable_prefix_caching = false;
  KvCacheManager kv(options);
  const Tokens prompt = Range(0, 13);
  EXPECT_EQ(Prefill(&kv, 1, prompt), 0);
  EXPECT_EQ(Prefill(&kv, 2, prompt), 0);
  EXPECT_NE(kv.Blocks(1)[0], kv.Blocks(2)[0]);
  kv.FreeSequence(1);
  EXPECT_EQ(kv.StartSequence(3, prompt), 0);
  const KvCacheStats stats = kv.Stats();
  EXPECT_EQ(stats.cached_blocks, 0);
  EXPECT_EQ(stats.prefix_queries, 0);
  EXPECT_EQ(stats.prefix_hits, 0);
}

TEST(KvCacheManager, TokenDifferingInBlockKHitsOnlyTheBlocksBeforeK) {
  KvCacheManager kv(Options(64));
  const Tokens prompt = Range(0, 21);  // 5 full blocks + 1 token
  Prefill(&kv, 0, prompt);
  for (int32_t k = 0; k < 5; ++k) {
    for (int32_t slot : {0, 3}) {
      Tokens edited = prompt;
      edited[static_cast<std::size_t>(4 * k + slot)] = 9999;
      const SequenceId id = 1 + 10 * k + slot;
      EXPECT_EQ(kv.StartSequence(id, edited), 4 * k) << "k=" << k << " slot=" << slot;
      kv.FreeSequence(id);
    }
  }
}

// Every block of every chain lands on the same hash.
BlockHash ConstantHash(BlockHash, uint64_t, std::span<const int32_t>) { return 42; }

TEST(KvCacheManager, HashCollisionIsAMissNotAWrongHit) {
  KvCacheManagerOptions options = Options(16);
  options.hash_for_testing = ConstantHash;
  KvCacheManager kv(options);
  const Tokens a = Range(0, 9);
  Prefill(&kv, 1, a);
  // Block 1 of `a` collides with its block 0: only block 0 is cached.
  EXPECT_EQ(kv.Stats().cached_blocks, 1);
  EXPECT_EQ(Prefill(&kv, 2, Range(100, 9)), 0);  // same hash, other tokens
  EXPECT_EQ(kv.Stats().cached_blocks, 1);
  EXPECT_EQ(kv.StartSequence(3, a), 4);
  EXPECT_EQ(kv.Blocks(3)[0], kv.Blocks(1)[0]);
}

// Ignores the parent: equal blocks at different depths or after different prefixes collide.
BlockHash ParentBlindHash(BlockHash, uint64_t salt, std::span<const int32_t> tokens) {
  return HashBlockTokens(kRootBlockHash, salt, tokens);
}

TEST(KvCacheManager, CollidingChainWithEqualBlockTokensIsAMiss) {
  KvCacheManagerOptions options = Options(16);
  options.hash_for_testing = ParentBlindHash;
  KvCacheManager kv(options);
  const Tokens x = Range(0, 4);
  const Tokens y = Range(100, 4);
  const Tokens z = Range(200, 4);
  Prefill(&kv, 1, Concat(Concat(x, y), {7}));  // caches x, then y after x
  // y at depth 0 has the hash and tokens of the cached y, but not its prefix.
  EXPECT_EQ(kv.StartSequence(2, Concat(y, {7})), 0);
  // y after z: z misses, so y is not even looked up; z's own y is then refused (collision).
  EXPECT_EQ(Prefill(&kv, 3, Concat(Concat(z, y), {7})), 0);
  EXPECT_EQ(kv.StartSequence(4, Concat(Concat(z, y), {8})), 4);
  EXPECT_EQ(kv.StartSequence(5, Concat(Concat(x, y), {8})), 8);
}

TEST(KvCacheManager, SameBlockComputedTwiceKeepsTheFirstAndBothSequencesIntact) {
  KvCacheManager kv(Options(16));
  const Tokens prompt = Range(0, 8);
  // Both start before either has committed: both miss and compute the same two blocks.
  EXPECT_EQ(kv.StartSequence(1, prompt), 0);
  EXPECT_EQ(kv.StartSequence(2, prompt), 0);
  ASSERT_TRUE(kv.Reserve(1, 8));
  ASSERT_TRUE(kv.Reserve(2, 8));
  const std::vector<BlockId> first = BlocksOf(kv, 1);
  const std::vector<BlockId> second = BlocksOf(kv, 2);
  kv.CommitComputed(1, prompt, 8);
  kv.CommitComputed(2, prompt, 8);
  EXPECT_EQ(kv.Stats().cached_blocks, 2);
  EXPECT_EQ(BlocksOf(kv, 2), second);  // its own copy stays its own
  EXPECT_EQ(kv.Stats().used_blocks, 4);
  // Sequence 2 goes on to a block of its own: that one is cached, chained on the first copy.
  const Tokens continued = Concat(prompt, Range(50, 4));
  ASSERT_TRUE(kv.Reserve(2, 12));
  kv.CommitComputed(2, continued, 12);
  EXPECT_EQ(kv.Stats().cached_blocks, 3);
  EXPECT_EQ(kv.StartSequence(3, Concat(continued, {1})), 12);
  const std::vector<BlockId> third = BlocksOf(kv, 3);
  EXPECT_EQ(Head(third, 2), first);
  EXPECT_EQ(third[2], kv.Blocks(2)[2]);
}

TEST(KvCacheManager, BlockChainedOnAnEvictedCopyIsReplacedWhenRecomputed) {
  KvCacheManager kv(Options(8));
  const Tokens prompt = Range(0, 8);
  const Tokens continued = Concat(prompt, Range(50, 4));
  kv.StartSequence(1, prompt);
  kv.StartSequence(2, prompt);
  ASSERT_TRUE(kv.Reserve(1, 8));
  ASSERT_TRUE(kv.Reserve(2, 12));
  kv.CommitComputed(1, prompt, 8);
  kv.CommitComputed(2, continued, 12);  // its third block is cached after sequence 1's blocks
  EXPECT_EQ(kv.Stats().cached_blocks, 3);
  // Sequence 1's blocks go, and are reallocated: the chain under sequence 2's block is gone.
  kv.FreeSequence(1);
  kv.StartSequence(3, Range(1000, 20));
  ASSERT_TRUE(kv.Reserve(3, 20));
  EXPECT_EQ(kv.StartSequence(4, Concat(continued, {1})), 0);
  kv.FreeSequence(3);
  kv.FreeSequence(4);
  // Recomputing the whole chain caches it again, the third block included.
  EXPECT_EQ(Prefill(&kv, 5, Concat(continued, {1})), 0);
  EXPECT_EQ(kv.StartSequence(6, Concat(continued, {2})), 12);
  EXPECT_EQ(Head(BlocksOf(kv, 6), 3), Head(BlocksOf(kv, 5), 3));
  EXPECT_EQ(BlocksOf(kv, 2).size(), 3u);  // untouched throughout
}

TEST(KvCacheManager, CommitComputedCachesOnlyComputedFullBlocks) {
  KvCacheManager kv(Options(8));
  const Tokens prompt = Range(0, 13);
  kv.StartSequence(1, prompt);
  ASSERT_TRUE(kv.Reserve(1, 13));
  const int expected[] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3};
  for (int64_t computed = 0; computed <= 13; ++computed) {  // a chunked prefill, 1 token a step
    kv.CommitComputed(1, prompt, computed);
    EXPECT_EQ(kv.Stats().cached_blocks, expected[computed]) << computed;
  }
  kv.CommitComputed(1, prompt, 13);  // repeating is harmless
  EXPECT_EQ(kv.Stats().cached_blocks, 3);
  EXPECT_EQ(kv.StartSequence(2, Concat(prompt, {1})), 12);
}

TEST(KvCacheManager, DecodedTokensAreCachedForALaterTurn) {
  KvCacheManager kv(Options(8));
  Tokens tokens = Range(0, 5);
  Prefill(&kv, 1, tokens);
  for (int32_t step = 0; step < 8; ++step) {  // decode 8 tokens one by one
    tokens.push_back(300 + step);
    ASSERT_TRUE(kv.Reserve(1, static_cast<int64_t>(tokens.size())));
    kv.CommitComputed(1, tokens, static_cast<int64_t>(tokens.size()));
  }
  const std::vector<BlockId> blocks = BlocksOf(kv, 1);
  kv.FreeSequence(1);
  // The next turn sends the whole conversation back plus a new message.
  EXPECT_EQ(kv.StartSequence(2, Concat(tokens, Range(900, 3))), 12);
  EXPECT_EQ(BlocksOf(kv, 2), Head(blocks, 3));
}

TEST(KvCacheManager, PreemptedSequenceRestartsFromItsCachedBlocks) {
  KvCacheManager kv(Options(8));
  Tokens tokens = Range(0, 10);
  Prefill(&kv, 1, tokens);
  tokens.push_back(77);
  ASSERT_TRUE(kv.Reserve(1, 11));
  kv.CommitComputed(1, tokens, 11);
  kv.FreeSequence(1);                         // preempted
  EXPECT_EQ(kv.StartSequence(1, tokens), 8);  // the same id may start again
}

TEST(KvCacheManager, StatsCountLookupsHitsAndBlocks) {
  KvCacheManager kv(Options(16));
  const Tokens prompt = Range(0, 14);  // 3 full blocks + 2 tokens: 3 blocks looked up
  Prefill(&kv, 1, prompt);
  KvCacheStats stats = kv.Stats();
  EXPECT_EQ(stats.prefix_queries, 3);
  EXPECT_EQ(stats.prefix_hits, 0);
  EXPECT_EQ(stats.prefix_hit_tokens, 0);
  EXPECT_EQ(stats.cached_blocks, 3);
  EXPECT_EQ(stats.used_blocks, 4);
  EXPECT_EQ(stats.free_blocks, 12);

  Tokens edited = prompt;
  edited[9] = -1;  // differs in block 2
  kv.StartSequence(2, edited);
  kv.StartSequence(3, Range(0, 12));  // 2 blocks looked up, both hit
  stats = kv.Stats();
  EXPECT_EQ(stats.prefix_queries, 3 + 3 + 2);
  EXPECT_EQ(stats.prefix_hits, 2 + 2);
  EXPECT_EQ(stats.prefix_hit_tokens, 16);
  EXPECT_EQ(stats.used_blocks, 4);  // hits share, they allocate nothing
  EXPECT_EQ(stats.free_blocks, 12);

  kv.FreeSequence(1);
  kv.FreeSequence(2);
  kv.FreeSequence(3);
  stats = kv.Stats();
  EXPECT_EQ(stats.used_blocks, 0);
  EXPECT_EQ(stats.free_blocks, 16);
  EXPECT_EQ(stats.cached_blocks, 3);  // free and still cached
}

TEST(KvCacheManager, TruncateDropsTheCutBlockFromTheCacheAndFreesTheTail) {
  KvCacheManager kv(Options(16));
  const Tokens a = Range(100, 12);  // three full blocks of 4
  Prefill(&kv, 1, a);
  const std::vector<BlockId> blocks = BlocksOf(kv, 1);
  ASSERT_EQ(blocks.size(), 3u);
  const int32_t free_before = kv.num_free_blocks();

  ASSERT_TRUE(kv.Truncate(1, 6));  // through block 1: positions 6 and 7 will be rewritten
  EXPECT_EQ(BlocksOf(kv, 1), Head(blocks, 2));
  EXPECT_EQ(kv.num_free_blocks(), free_before + 1);
  // From the cut on, the block is no longer cached for its old tokens (another sequence may
  // look it up before this one writes the new ones); block 0 still is.
  EXPECT_EQ(kv.StartSequence(2, Concat(a, {1})), 4);
  EXPECT_EQ(BlocksOf(kv, 2), Head(blocks, 1));
  Tokens rewritten(a.begin(), a.begin() + 6);
  rewritten.push_back(7);
  rewritten.push_back(8);
  ASSERT_TRUE(kv.Reserve(1, 8));
  kv.CommitComputed(1, rewritten, 8);
  // The new contents are cached under their own chain.
  EXPECT_EQ(kv.StartSequence(3, Concat(rewritten, {1})), 8);
  EXPECT_EQ(BlocksOf(kv, 3), Head(blocks, 2));
}

TEST(KvCacheManager, TruncateOnABlockBoundaryKeepsTheChainForTheNextBlocks) {
  KvCacheManager kv(Options(16));
  Prefill(&kv, 1, Range(100, 12));
  ASSERT_TRUE(kv.Truncate(1, 8));
  const Tokens next = Concat(Range(100, 8), Range(500, 4));
  ASSERT_TRUE(kv.Reserve(1, 12));
  kv.CommitComputed(1, next, 12);
  EXPECT_EQ(kv.StartSequence(2, Concat(next, {1})), 12);
  EXPECT_EQ(BlocksOf(kv, 2), BlocksOf(kv, 1));
}

TEST(KvCacheManager, TruncateRefusesToCutThroughASharedBlockAndChangesNothing) {
  KvCacheManager kv(Options(16));
  const Tokens prompt = Range(100, 9);
  Prefill(&kv, 1, prompt);
  ASSERT_EQ(Prefill(&kv, 2, prompt), 8);  // shares blocks 0 and 1
  const std::vector<BlockId> before = BlocksOf(kv, 2);
  const int32_t free_before = kv.num_free_blocks();
  EXPECT_FALSE(kv.Truncate(2, 6));
  EXPECT_EQ(BlocksOf(kv, 2), before);
  EXPECT_EQ(kv.num_free_blocks(), free_before);
  EXPECT_TRUE(kv.Truncate(2, 8));  // on the boundary: the shared blocks stay as they are
  EXPECT_EQ(BlocksOf(kv, 2), Head(before, 2));
  kv.FreeSequence(1);
  kv.FreeSequence(2);
  EXPECT_EQ(kv.num_free_blocks(), 16);
}

TEST(KvCacheManagerDeathTest, MisuseIsAProgrammerError) {
  KvCacheManager kv(Options(4));
  const Tokens prompt = Range(0, 6);
  kv.StartSequence(1, prompt);
  EXPECT_DEATH(kv.StartSequence(1, prompt), "inserted");
  EXPECT_DEATH((void)kv.Reserve(2, 4), "sequences_");
  EXPECT_DEATH(kv.BlocksNeeded(2, 4), "sequences_");
  EXPECT_DEATH(kv.Blocks(2), "sequences_");
  EXPECT_DEATH(kv.FreeSequence(2), "sequences_");
  EXPECT_DEATH(kv.CommitComputed(1, prompt, 1), "capacity");  // no block reserved yet
  ASSERT_TRUE(kv.Reserve(1, 6));
  EXPECT_DEATH(kv.CommitComputed(1, prompt, 7), "num_computed");
  EXPECT_DEATH((void)kv.Reserve(1, -1), "total_tokens");
  kv.FreeSequence(1);
  EXPECT_DEATH(kv.FreeSequence(1), "sequences_");  // twice
}

// Random starts, chunked prefills, decodes, preemptions and frees over a small pool with shared
// prefixes. For every block the test keeps what its KV was computed from (the writer's tokens from
// position 0 to the last one written into it: a position's KV depends on its whole prefix), and
// checks that each hit hands out blocks computed from exactly the prompt's prefix, that no block
// is written while another sequence holds it, and that the counts add up.
TEST(KvCacheManager, RandomOperationsKeepHitsCorrectAndReturnEveryBlock) {
  constexpr int32_t kBlocks = 24;
  constexpr int32_t kBlockSize = 4;
  constexpr int kOps = 4000;
  for (const bool collide : {false, true}) {
    SCOPED_TRACE(collide ? "parent-blind hash" : "real hash");
    KvCacheManagerOptions options = Options(kBlocks, kBlockSize);
    if (collide) options.hash_for_testing = ParentBlindHash;
    KvCacheManager kv(options);
    std::mt19937 rng(collide ? 7 : 1234);
    auto uniform = [&rng](int lo, int hi) {
      return std::uniform_int_distribution<int>(lo, hi)(rng);
    };

    // Few bases over a tiny alphabet, so prompts share prefixes and blocks repeat.
    std::vector<Tokens> bases(3);
    for (Tokens& base : bases) {
      for (int i = 0; i < 24; ++i) base.push_back(uniform(0, 2));
    }
    struct Live {
      Tokens tokens;
      int64_t computed = 0;
    };
    std::map<SequenceId, Live> live;
    std::vector<Tokens> shadow(kBlocks);  // block -> the tokens its KV was computed from
    SequenceId next_id = 0;
    int64_t hit_tokens = 0;
    int truncations = 0;

    auto held_elsewhere = [&](SequenceId self, BlockId block) {
      for (const auto& [id, seq] : live) {
        if (id == self) continue;
        for (BlockId b : kv.Blocks(id)) {
          if (b == block) return true;
        }
      }
      return false;
    };

    for (int op = 0; op < kOps; ++op) {
      const int kind = uniform(0, 9);
      if (live.empty() || (kind < 3 && live.size() < 6)) {
        Tokens prompt = bases[static_cast<std::size_t>(uniform(0, 2))];
        prompt.resize(static_cast<std::size_t>(uniform(1, 24)));
        for (int extra = uniform(0, 5); extra > 0; --extra) prompt.push_back(uniform(0, 2));
        const SequenceId id = next_id++;
        const int64_t cached = kv.StartSequence(id, prompt);
        ASSERT_EQ(cached % kBlockSize, 0);
        ASSERT_LT(cached, static_cast<int64_t>(prompt.size()));
        const std::span<const BlockId> blocks = kv.Blocks(id);
        ASSERT_EQ(static_cast<int64_t>(blocks.size()) * kBlockSize, cached);
        for (std::size_t j = 0; j < blocks.size(); ++j) {
          const Tokens prefix(prompt.begin(),
                              prompt.begin() + static_cast<std::ptrdiff_t>((j + 1) * kBlockSize));
          ASSERT_EQ(shadow[blocks[j]], prefix) << "hit block " << blocks[j] << " at " << j;
        }
        hit_tokens += cached;
        live[id] = Live{prompt, cached};
        continue;
      }
      auto it = live.begin();
      std::advance(it, uniform(0, static_cast<int>(live.size()) - 1));
      const SequenceId id = it->first;
      Live& seq = it->second;
      if (kind == 9) {  // finish or cancel
        kv.FreeSequence(id);
        live.erase(it);
        continue;
      }
      if (kind == 8 && uniform(0, 1) == 0) {  // roll back (rejected speculative tokens)
        const int64_t n = uniform(0, static_cast<int>(seq.computed));
        const int64_t partial = n / kBlockSize;
        const bool cuts_a_block = n % kBlockSize != 0;
        const std::vector<BlockId> before = BlocksOf(kv, id);
        const int32_t free_before = kv.num_free_blocks();
        ++truncations;
        if (!kv.Truncate(id, n)) {
          ASSERT_TRUE(cuts_a_block && held_elsewhere(id, before[partial]))
              << "refused a cut through an unshared block";
          ASSERT_EQ(BlocksOf(kv, id), before);
          continue;
        }
        const std::size_t keep = static_cast<std::size_t>((n + kBlockSize - 1) / kBlockSize);
        ASSERT_EQ(BlocksOf(kv, id), Head(before, keep));
        std::set<BlockId> dropped_free;  // dropped blocks no other sequence holds
        for (std::size_t j = keep; j < before.size(); ++j) {
          if (!held_elsewhere(id, before[j])) dropped_free.insert(before[j]);
        }
        ASSERT_EQ(kv.num_free_blocks(), free_before + static_cast<int32_t>(dropped_free.size()));
        seq.tokens.resize(static_cast<std::size_t>(n));
        seq.computed = n;
        if (n == 0) {  // nothing left to compute from: end it
          kv.FreeSequence(id);
          live.erase(it);
        }
        continue;
      }
      // One forward: a prefill chunk, or a decode step that first appends the sampled token.
      if (seq.computed == static_cast<int64_t>(seq.tokens.size())) {
        seq.tokens.push_back(uniform(0, 2));
      }
      const int64_t chunk =
          std::min<int64_t>(uniform(1, 9), static_cast<int64_t>(seq.tokens.size()) - seq.computed);
      const int64_t end = seq.computed + chunk;
      const int32_t needed = kv.BlocksNeeded(id, end);
      const int32_t free_before = kv.num_free_blocks();
      if (!kv.Reserve(id, end)) {  // does not fit: preempt it
        ASSERT_GT(needed, free_before);
        ASSERT_EQ(kv.num_free_blocks(), free_before);
        kv.FreeSequence(id);
        live.erase(it);
        continue;
      }
      ASSERT_EQ(kv.num_free_blocks(), free_before - needed);
      const std::span<const BlockId> blocks = kv.Blocks(id);
      for (int64_t p = seq.computed; p < end; ++p) {
        const BlockId block = blocks[p / kBlockSize];
        ASSERT_FALSE(held_elsewhere(id, block)) << "writing into shared block " << block;
        shadow[block].assign(seq.tokens.begin(), seq.tokens.begin() + p + 1);
      }
      seq.computed = end;
      kv.CommitComputed(id, seq.tokens, seq.computed);

      // Used blocks are exactly the distinct blocks live sequences hold.
      std::set<BlockId> held;
      for (const auto& [other, unused] : live) {
        for (BlockId b : kv.Blocks(other)) held.insert(b);
      }
      const KvCacheStats stats = kv.Stats();
      ASSERT_EQ(stats.used_blocks, static_cast<int32_t>(held.size()));
      ASSERT_EQ(stats.used_blocks + stats.free_blocks, kBlocks);
      ASSERT_LE(stats.cached_blocks, kBlocks);
    }
    for (const auto& [id, unused] : live) kv.FreeSequence(id);
    const KvCacheStats stats = kv.Stats();
    EXPECT_EQ(stats.free_blocks, kBlocks);
    EXPECT_EQ(stats.used_blocks, 0);
    EXPECT_EQ(stats.prefix_hit_tokens, hit_tokens);
    EXPECT_GT(stats.prefix_hits, 50);  // the test exercised sharing
    EXPECT_GT(truncations, 100);       // and rollbacks
  }
}

}  // namespace
}  // namespace strata::kv
