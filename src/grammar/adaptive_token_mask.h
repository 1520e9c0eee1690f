// Internal to strata_grammar: the per-position token classification of XGrammar's adaptive
// token-mask cache (Dong et al. 2024, "XGrammar: Flexible and Efficient Structured Generation
// Engine for Large Language Models", §3.1).
//
// For the top frames of a stack (the top state p and up to kContextFrames - 1 return states
// below it), every matchable token is walked from a stack holding only those frames (the rest
// unknown). A token is
//   - accepted when some path reads all its bytes without returning past the last of those
//     frames: it is then allowed whatever lies below, so the answer depends on them alone;
//   - uncertain when it is not accepted but some path returns past them before the token ends
//     (or exactly at its end): whether the rest of the stack takes the remaining bytes is
//     checked at run time, for these tokens only;
//   - rejected otherwise.
// XGrammar keys its cache on the top position alone and expands small rules into their callers;
// keying on a few frames instead has the same effect for tiny rules (one JSON string
// character, a repetition helper) whose every multi-character token would otherwise leave the
// rule and be uncertain.
// The walk goes through the vocabulary in byte order sharing prefixes (an implicit trie), and
// gives up on a whole subtree as soon as a prefix dies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "byte_automaton.h"
#include "strata/grammar/token_vocabulary.h"

namespace strata::grammar::internal {

struct AdaptiveTokenMask {
  enum class Storage { kAcceptedIds, kRejectedIds, kBitset };
  Storage storage = Storage::kAcceptedIds;
  // kAcceptedIds: the accepted ids; kRejectedIds: the matchable ids that are not accepted
  // (rejected or uncertain); ascending.
  std::vector<int32_t> ids;
  std::vector<uint32_t> bitset;  // kBitset: accepted tokens
  // Uncertain tokens as indices into TokenVocabulary::sorted_ids() (ascending), with each one's
  // common prefix length with the previous uncertain token.
  std::vector<int32_t> uncertain;
  std::vector<int32_t> uncertain_lcp;

  size_t MemoryBytes() const {
    return sizeof(*this) + (ids.size() + uncertain.size() * 2) * sizeof(int32_t) +
           bitset.size() * sizeof(uint32_t);
  }
  // ORs the accepted tokens into `mask` (vocab.bitmask_words() words); `scratch` is a buffer of
  // the same size for the complement form.
  void OrAcceptedInto(const TokenVocabulary& vocab, uint32_t* mask,
                      std::vector<uint32_t>* scratch) const;
};

// Stack frames a cache entry covers (top state plus return states below it).
inline constexpr int kContextFrames = 4;

// `states`: the frames, top first (1 to kContextFrames of them).
AdaptiveTokenMask ComputeAdaptiveTokenMask(const ByteAutomaton& automaton,
                                           const TokenVocabulary& vocab,
                                           const std::vector<int32_t>& states);

}  // namespace strata::grammar::internal
