// A grammar compiled against one vocabulary: the byte-level automaton plus the token-mask caches
// that every request's GrammarMatcher shares.
//
// Compile() lowers code-point classes to UTF-8 byte ranges (so characters split across tokens
// just work) and rejects left recursion. Token data per automaton position is computed lazily,
// the first time a matcher stands there, following XGrammar's adaptive token-mask cache
// (Dong et al. 2024, §3.1): the tokens a position accepts whatever lies below it on the stack
// are cached; the few that need the rest of the stack are checked at run time. Whole masks are
// cached too, keyed by the full stack set, so a configuration seen before costs a copy.
//
// Thread safety: Compile may run on any thread. A CompiledGrammar is shared (via shared_ptr) by
// matchers on different threads; its caches are guarded by mutexes and bounded:
//   - position cache: at most CompileOptions::position_cache_bytes; when full it is cleared
//     (entries in use stay alive through their shared_ptr) and rebuilt on demand;
//   - mask cache: at most CompileOptions::mask_cache_bytes of masks, least recently used first
//     out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "strata/common/status.h"
#include "strata/grammar/grammar.h"
#include "strata/grammar/token_vocabulary.h"

namespace strata::grammar {

namespace internal {
struct ByteAutomaton;
struct AdaptiveTokenMask;
}  // namespace internal

struct CompileOptions {
  size_t position_cache_bytes = size_t{256} << 20;
  size_t mask_cache_bytes = size_t{64} << 20;
  // Masks for stack sets whose canonical key is longer than this (deep stacks) are not cached.
  size_t max_mask_key_bytes = 4096;
};

class CompiledGrammar {
 public:
  // INVALID_ARGUMENT when the grammar is malformed or left-recursive (see ValidateGrammar) or
  // `vocabulary` is null.
  static StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(
      const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
      const CompileOptions& options = {});

  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const TokenVocabulary& vocabulary() const { return *vocabulary_; }
  const Grammar& grammar() const { return grammar_; }
  // Number of states of the byte automaton.
  int32_t num_states() const;

  struct CacheStats {
    int64_t position_entries = 0;
    size_t position_bytes = 0;
    int64_t mask_entries = 0;
    size_t mask_bytes = 0;
    int64_t mask_hits = 0;
    int64_t mask_misses = 0;
  };
  CacheStats cache_stats() const;

  // --- For GrammarMatcher (same module); not a stable interface. -----------------------------
  const internal::ByteAutomaton& automaton() const { return *automaton_; }
  // The adaptive token mask of the top stack frames `states` (top first), computed on first
  // use. Any thread.
  std::shared_ptr<const internal::AdaptiveTokenMask> PositionMask(
      const std::vector<int32_t>& states) const;
  // Whether PositionMask(states) is cached now (no statistics counted).
  bool HasPositionMask(const std::vector<int32_t>& states) const;
  // Whether a mask for `key` is cached now (no statistics counted, the LRU order untouched).
  bool HasMask(const std::string& key) const;
  // Copies the cached mask for `key` into `mask` and returns true, or returns false.
  bool LookupMask(const std::string& key, uint32_t* mask) const;
  void StoreMask(const std::string& key, const uint32_t* mask) const;
  size_t max_mask_key_bytes() const { return options_.max_mask_key_bytes; }

 private:
  CompiledGrammar() = default;

  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  std::unique_ptr<internal::ByteAutomaton> automaton_;
  CompileOptions options_;

  mutable std::mutex position_mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const internal::AdaptiveTokenMask>>
      positions_;
  mutable size_t position_bytes_ = 0;
  mutable int64_t position_entries_ = 0;

  mutable std::mutex mask_mu_;
  struct MaskEntry {
    std::string key;
    std::vector<uint32_t> mask;
  };
  mutable std::list<MaskEntry> mask_lru_;  // front = most recent
  mutable std::unordered_map<std::string, std::list<MaskEntry>::iterator> mask_index_;
  mutable size_t mask_bytes_ = 0;
  mutable int64_t mask_hits_ = 0;
  mutable int64_t mask_misses_ = 0;
};

}  // namespace strata::grammar
