#include "strata/grammar/compiled_grammar.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adaptive_token_mask.h"
#include "byte_automaton.h"

namespace strata::grammar {

CompiledGrammar::~CompiledGrammar() = default;

StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Compile(
    const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
    const CompileOptions& options) {
  if (!vocabulary) return InvalidArgumentError("compile: no token vocabulary");
  // Hand-built grammars may be larger than the front ends allow; only structure is checked.
  Limits limits;
  limits.max_rules = 1 << 24;
  limits.max_elements = int64_t{1} << 40;
  STRATA_RETURN_IF_ERROR(ValidateGrammar(grammar, limits));
  std::shared_ptr<CompiledGrammar> g(new CompiledGrammar());
  g->grammar_ = grammar;
  g->vocabulary_ = std::move(vocabulary);
  g->automaton_ = std::make_unique<internal::ByteAutomaton>(internal::LowerToBytes(grammar));
  g->options_ = options;
  return std::shared_ptr<const CompiledGrammar>(std::move(g));
}

int32_t CompiledGrammar::num_states() const {
  return static_cast<int32_t>(automaton_->states.size());
}

std::shared_ptr<const internal::AdaptiveTokenMask> CompiledGrammar::PositionMask(
    const std::vector<int32_t>& states) const {
  const std::string key(reinterpret_cast<const char*>(states.data()),
                        states.size() * sizeof(int32_t));
  {
    std::lock_guard<std::mutex> lock(position_mu_);
    auto it = positions_.find(key);
    if (it != positions_.end()) return it->second;
  }
  // Computed outside the lock: two threads may both compute one entry; the first one stored
  // wins, which costs time but never correctness.
  auto entry = std::make_shared<const internal::AdaptiveTokenMask>(
      internal::ComputeAdaptiveTokenMask(*automaton_, *vocabulary_, states));
  std::lock_guard<std::mutex> lock(position_mu_);
  auto it = positions_.find(key);
  if (it != positions_.end()) return it->second;
  const size_t bytes = entry->MemoryBytes() + key.size() * 2 + 64;
  if (position_bytes_ + bytes > options_.position_cache_bytes) {
    positions_.clear();
    position_bytes_ = 0;
    position_entries_ = 0;
  }
  positions_.emplace(key, entry);
  position_bytes_ += bytes;
  ++position_entries_;
  return entry;
}

bool CompiledGrammar::HasPositionMask(const std::vector<int32_t>& states) const {
  const std::string key(reinterpret_cast<const char*>(states.data()),
                        states.size() * sizeof(int32_t));
  std::lock_guard<std::mutex> lock(position_mu_);
  return positions_.count(key) > 0;
}

bool CompiledGrammar::HasMask(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mask_mu_);
  return mask_index_.count(key) > 0;
}

bool CompiledGrammar::LookupMask(const std::string& key, uint32_t* mask) const {
  std::lock_guard<std::mutex> lock(mask_mu_);
  auto it = mask_index_.find(key);
  if (it == mask_index_.end()) {
    ++mask_misses_;
    return false;
  }
  ++mask_hits_;
  mask_lru_.splice(mask_lru_.begin(), mask_lru_, it->second);
  const std::vector<uint32_t>& m = it->second->mask;
  std::memcpy(mask, m.data(), m.size() * sizeof(uint32_t));
  return true;
}

void CompiledGrammar::StoreMask(const std::string& key, const uint32_t* mask) const {
  const size_t words = vocabulary_->bitmask_words();
  const size_t bytes = words * sizeof(uint32_t) + key.size() * 2 + 64;
  if (bytes > options_.mask_cache_bytes) return;
  std::lock_guard<std::mutex> lock(mask_mu_);
  if (mask_index_.count(key)) return;
  while (!mask_lru_.empty() && mask_bytes_ + bytes > options_.mask_cache_bytes) {
    MaskEntry& last = mask_lru_.back();
    mask_bytes_ -= last.mask.size() * sizeof(uint32_t) + last.key.size() * 2 + 64;
    mask_index_.erase(last.key);
    mask_lru_.pop_back();
  }
  mask_lru_.push_front(MaskEntry{key, std::vector<uint32_t>(mask, mask + words)});
  mask_index_[key] = mask_lru_.begin();
  mask_bytes_ += bytes;
}

CompiledGrammar::CacheStats CompiledGrammar::cache_stats() const {
  CacheStats s;
  {
    std::lock_guard<std::mutex> lock(position_mu_);
    s.position_entries = position_entries_;
    s.position_bytes = position_bytes_;
  }
  std::lock_guard<std::mutex> lock(mask_mu_);
  s.mask_entries = static_cast<int64_t>(mask_lru_.size());
  s.mask_bytes = mask_bytes_;
  s.mask_hits = mask_hits_;
  s.mask_misses = mask_misses_;
  return s;
}

}  // namespace strata::grammar
