#include "strata/kv/kv_cache_manager.h"

#include <algorithm>
#include <cstddef>

#include "strata/common/check.h"

namespace strata::kv {

KvCacheManager::KvCacheManager(const KvCacheManagerOptions& options)
    : options_(options), pool_(options.num_blocks) {
  STRATA_CHECK(options.block_size > 0);
  const auto n = static_cast<std::size_t>(options.num_blocks);
  block_info_.resize(n);
  if (options_.enable_prefix_caching) {
    // Sized once so that registering a block never rehashes or grows the token store.
    cached_.reserve(n);
    block_tokens_.resize(n * static_cast<std::size_t>(options.block_size));
  }
}

int32_t KvCacheManager::block_size() const { return options_.block_size; }
int32_t KvCacheManager::num_blocks() const { return pool_.num_blocks(); }
int32_t KvCacheManager::num_free_blocks() const { return pool_.num_free(); }

BlockHash KvCacheManager::FindPrefix(std::span<const int32_t> tokens, std::vector<BlockId>* hits,
                                     std::vector<BlockHash>* hashes) const {
  if (!options_.enable_prefix_caching || tokens.empty()) return kRootBlockHash;
  const auto block_size = static_cast<std::size_t>(options_.block_size);
  // The block holding the last token is never taken: its logits must come out of a forward.
  const std::size_t max_blocks = (tokens.size() - 1) / block_size;
  BlockHash last_hash = kRootBlockHash;
  BlockId parent = -1;
  for (std::size_t i = 0; i < max_blocks; ++i) {
    const std::span<const int32_t> block_tokens = tokens.subspan(i * block_size, block_size);
    const BlockHash hash = Hash(last_hash, block_tokens);
    const auto found = cached_.find(hash);
    if (found == cached_.end() || !Matches(found->second, parent, block_tokens)) break;
    hits->push_back(found->second);
    if (hashes != nullptr) hashes->push_back(hash);
    last_hash = hash;
    parent = found->second;
  }
  return last_hash;
}

KvCacheManager::PrefixProbe KvCacheManager::ProbePrefix(std::span<const int32_t> tokens) const {
  std::vector<BlockId> hits;
  FindPrefix(tokens, &hits);
  PrefixProbe probe;
  probe.hit_tokens = static_cast<int64_t>(hits.size()) * options_.block_size;
  for (const BlockId block : hits) probe.free_hit_blocks += pool_.ref_count(block) == 0 ? 1 : 0;
  return probe;
}

int64_t KvCacheManager::StartSequence(SequenceId id, std::span<const int32_t> tokens) {
  const auto [it, inserted] = sequences_.try_emplace(id, options_.block_size);
  STRATA_CHECK(inserted);  // id already live
  SequenceState& seq = it->second;
  if (!options_.enable_prefix_caching || tokens.empty()) return 0;

  prefix_queries_ += static_cast<int64_t>((tokens.size() - 1) / options_.block_size);
  std::vector<BlockId>& hits = new_blocks_;  // scratch
  hits.clear();
  std::vector<BlockHash> hashes;
  const BlockHash last_hash = FindPrefix(tokens, &hits, &hashes);
  for (size_t i = 0; i < hits.size(); ++i) {
    const BlockId hit = hits[i];
    if (pool_.ref_count(hit) == 0) {
      pool_.Reclaim(hit);
    } else {
      pool_.AddRef(hit);
    }
    seq.table.Append(std::span<const BlockId>(&hit, 1));
    ++seq.num_hashed_blocks;
    seq.parent = hit;
    seq.parent_generation = block_info_[hit].generation;
    seq.chain.push_back({hashes[i], hit, seq.parent_generation});
  }
  seq.last_hash = last_hash;
  const int64_t hit_tokens = static_cast<int64_t>(seq.num_hashed_blocks) * options_.block_size;
  prefix_hits_ += seq.num_hashed_blocks;
  prefix_hit_tokens_ += hit_tokens;
  return hit_tokens;
}

bool KvCacheManager::Reserve(SequenceId id, int64_t total_tokens) {
  SequenceState& seq = Live(id);
  const int32_t needed = seq.table.BlocksNeeded(total_tokens);
  if (needed == 0) return true;
  new_blocks_.clear();
  if (!pool_.Allocate(needed, &new_blocks_)) return false;
  // These blocks get new contents: whatever they cached is gone (this is the LRU eviction).
  for (const BlockId block : new_blocks_) {
    ++block_info_[block].generation;
    if (block_info_[block].registered) Unregister(block);
  }
  seq.table.Append(new_blocks_);
  return true;
}

int32_t KvCacheManager::BlocksNeeded(SequenceId id, int64_t total_tokens) const {
  return Live(id).table.BlocksNeeded(total_tokens);
}

void KvCacheManager::CommitComputed(SequenceId id, std::span<const int32_t> tokens,
                                    int64_t num_computed) {
  SequenceState& seq = Live(id);
  STRATA_CHECK(num_computed >= 0 && num_computed <= static_cast<int64_t>(tokens.size()));
  STRATA_CHECK(num_computed <= seq.table.capacity());  // KV written only into reserved blocks
  if (!options_.enable_prefix_caching) return;
  RegisterFullBlocks(&seq, tokens, num_computed / options_.block_size);
}

bool KvCacheManager::Truncate(SequenceId id, int64_t num_tokens) {
  SequenceState& seq = Live(id);
  STRATA_CHECK(num_tokens >= 0 && num_tokens <= seq.table.capacity());
  const int64_t block_size = options_.block_size;
  const auto keep = static_cast<int32_t>((num_tokens + block_size - 1) / block_size);
  const auto first_changed = static_cast<int32_t>(num_tokens / block_size);
  if (first_changed < keep) {
    // The cut passes through this block: its positions from the cut on will be rewritten.
    const BlockId partial = seq.table.blocks()[first_changed];
    if (pool_.ref_count(partial) > 1) return false;
    if (block_info_[partial].registered) Unregister(partial);
  }
  if (seq.num_hashed_blocks >= first_changed) {
    // Whatever stopped the chain (a collision, an evicted parent) lay at or after the cut; the
    // next CommitComputed checks the rewritten blocks afresh.
    seq.caching = true;
  }
  if (seq.num_hashed_blocks > first_changed) {
    seq.num_hashed_blocks = first_changed;
    seq.chain.resize(static_cast<size_t>(first_changed));
    if (seq.chain.empty()) {
      seq.last_hash = kRootBlockHash;
      seq.parent = -1;
      seq.parent_generation = 0;
    } else {
      seq.last_hash = seq.chain.back().hash;
      seq.parent = seq.chain.back().node;
      seq.parent_generation = seq.chain.back().generation;
    }
  }
  seq.table.TruncateTo(keep, &pool_);
  return true;
}

void KvCacheManager::FreeSequence(SequenceId id) {
  const auto it = sequences_.find(id);
  STRATA_CHECK(it != sequences_.end());  // unknown or already freed
  it->second.table.ReleaseAll(&pool_);
  sequences_.erase(it);
}

bool KvCacheManager::IsLive(SequenceId id) const { return sequences_.contains(id); }

std::span<const BlockId> KvCacheManager::Blocks(SequenceId id) const {
  return Live(id).table.blocks();
}

KvCacheStats KvCacheManager::Stats() const {
  KvCacheStats stats;
  stats.num_blocks = pool_.num_blocks();
  stats.free_blocks = pool_.num_free();
  stats.used_blocks = stats.num_blocks - stats.free_blocks;
  stats.cached_blocks = static_cast<int32_t>(cached_.size());
  stats.prefix_queries = prefix_queries_;
  stats.prefix_hits = prefix_hits_;
  stats.prefix_hit_tokens = prefix_hit_tokens_;
  return stats;
}

KvCacheManager::SequenceState& KvCacheManager::Live(SequenceId id) {
  const auto it = sequences_.find(id);
  STRATA_CHECK(it != sequences_.end());  // not a live sequence
  return it->second;
}

const KvCacheManager::SequenceState& KvCacheManager::Live(SequenceId id) const {
  const auto it = sequences_.find(id);
  STRATA_CHECK(it != sequences_.end());  // not a live sequence
  return it->second;
}

BlockHash KvCacheManager::Hash(BlockHash parent, std::span<const int32_t> tokens) const {
  if (options_.hash_for_testing != nullptr) {
    return options_.hash_for_testing(parent, options_.salt, tokens);
  }
  return HashBlockTokens(parent, options_.salt, tokens);
}

bool KvCacheManager::Matches(BlockId id, BlockId parent, std::span<const int32_t> tokens) const {
  const CachedBlock& info = block_info_[id];
  if (!info.registered || info.parent != parent) return false;
  if (parent >= 0 && info.parent_generation != block_info_[parent].generation) return false;
  const auto block_size = static_cast<std::size_t>(options_.block_size);
  const auto stored = block_tokens_.begin() + static_cast<std::ptrdiff_t>(id * block_size);
  return std::equal(tokens.begin(), tokens.end(), stored);
}

bool KvCacheManager::IsStale(BlockId id) const {
  const CachedBlock& info = block_info_[id];
  return info.parent >= 0 && block_info_[info.parent].generation != info.parent_generation;
}

void KvCacheManager::Register(BlockId id, BlockHash hash, BlockId parent,
                              uint64_t parent_generation, std::span<const int32_t> tokens) {
  CachedBlock& info = block_info_[id];
  STRATA_CHECK(!info.registered);
  STRATA_CHECK(tokens.size() == static_cast<std::size_t>(options_.block_size));
  const bool inserted = cached_.emplace(hash, id).second;
  STRATA_CHECK(inserted);
  info.registered = true;
  info.hash = hash;
  info.parent = parent;
  info.parent_generation = parent_generation;
  std::copy(tokens.begin(), tokens.end(),
            block_tokens_.begin() + static_cast<std::ptrdiff_t>(id * tokens.size()));
}

void KvCacheManager::Unregister(BlockId id) {
  CachedBlock& info = block_info_[id];
  STRATA_CHECK(info.registered);
  const auto it = cached_.find(info.hash);
  STRATA_CHECK(it != cached_.end() && it->second == id);
  cached_.erase(it);
  info.registered = false;
}

void KvCacheManager::RegisterFullBlocks(SequenceState* seq, std::span<const int32_t> tokens,
                                        int64_t num_full) {
  const auto block_size = static_cast<std::size_t>(options_.block_size);
  while (seq->caching && seq->num_hashed_blocks < num_full) {
    // The parent is this sequence's own block or a hit unless an identical block registered by
    // another sequence stood in for it; that one may have been reallocated since.
    if (seq->parent >= 0 && block_info_[seq->parent].generation != seq->parent_generation) {
      seq->caching = false;
      break;
    }
    const auto index = static_cast<std::size_t>(seq->num_hashed_blocks);
    const std::span<const int32_t> block_tokens = tokens.subspan(index * block_size, block_size);
    const BlockHash hash = Hash(seq->last_hash, block_tokens);
    BlockId node = seq->table.blocks()[index];
    const auto found = cached_.find(hash);
    if (found == cached_.end()) {
      Register(node, hash, seq->parent, seq->parent_generation, block_tokens);
    } else if (IsStale(found->second)) {
      // A leftover whose chain was evicted under it: no lookup can reach it, so it yields.
      Unregister(found->second);
      Register(node, hash, seq->parent, seq->parent_generation, block_tokens);
    } else if (Matches(found->second, seq->parent, block_tokens)) {
      // Computed twice (both sequences missed): the first registered stays the cached one, this
      // sequence keeps its own copy, and its later blocks chain on the cached one.
      node = found->second;
    } else {
      // A hash collision with another chain: a miss; the blocks after this one are not cached.
      seq->caching = false;
      break;
    }
    ++seq->num_hashed_blocks;
    seq->last_hash = hash;
    seq->parent = node;
    seq->parent_generation = block_info_[node].generation;
    seq->chain.push_back({hash, node, seq->parent_generation});
  }
}

}  // namespace strata::kv
