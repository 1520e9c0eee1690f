// One request's position in a CompiledGrammar: which tokens may come next, and the tokens taken
// so far.
//
// The matcher is a byte-level pushdown recogniser holding a set of stacks (ambiguous grammars
// keep several; identical stacks are merged). Right recursion and repetition are tail calls and
// do not grow the stacks; stacks deeper than 2048 frames are dropped.
//
// Thread safety: one thread at a time per matcher (it is not internally synchronized); many
// matchers on different threads may share one CompiledGrammar.
// Memory: grows with the configurations the request visits (memoized transitions); a few KiB
// per generated token at most for typical grammars.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/grammar/compiled_grammar.h"

namespace strata::grammar {

namespace internal {
class StackMachine;
}

class GrammarMatcher {
 public:
  // Rollback() can undo at most this many of the latest accepted tokens.
  static constexpr int kMaxRollbackTokens = 256;

  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);
  ~GrammarMatcher();
  GrammarMatcher(const GrammarMatcher& other);  // an independent copy of the current state
  GrammarMatcher& operator=(const GrammarMatcher&) = delete;

  // Takes token `id` when the grammar allows it and returns true; returns false (state
  // unchanged) otherwise: an id out of range, a never-allowed or empty token, bytes the grammar
  // does not accept, anything after termination. An end token is accepted only when the root
  // can end here, and then the matcher is terminated.
  bool AcceptToken(int32_t id);
  // Takes raw bytes as if they were one token (tests, forced prefixes). Same rules, no end.
  bool AcceptBytes(std::string_view bytes);

  // Writes the allowed next tokens: bit (id % 32) of word id / 32 is set when token id is
  // allowed. `bitmask` must hold vocabulary().bitmask_words() words (all are written). After
  // termination nothing is allowed.
  void FillNextTokenBitmask(std::span<uint32_t> bitmask);
  // Whether FillNextTokenBitmask would take its mask, or every position it needs, from the
  // grammar's caches now (microseconds), rather than compute a position first seen here
  // (milliseconds: every vocabulary token walked). For a caller that would rather compute the
  // slow ones off its critical thread.
  bool NextMaskIsCached();

  // Whether the root can end here (an end token is allowed).
  bool CanTerminate() const;
  // Whether an end token was accepted.
  bool IsTerminated() const { return terminated_; }
  // Not terminated, cannot end, and no byte can be read: no continuation exists. (A state that
  // reads bytes but where no whole token of the vocabulary fits shows as an all-zero mask.)
  bool IsDead() const;

  // Undoes the last `num_tokens` accepted tokens (end tokens included). STRATA_CHECKs that
  // 0 <= num_tokens <= NumRollbackTokens().
  void Rollback(int num_tokens);
  // How many tokens Rollback can undo now: min(tokens accepted, kMaxRollbackTokens).
  int NumRollbackTokens() const { return static_cast<int>(history_.size()); }

  // Back to the start state.
  void Reset();

  const CompiledGrammar& compiled_grammar() const { return *grammar_; }

 private:
  // key_ := the canonical key of the current stack set; false when it is too long to cache.
  // Built once per stack set: sets are interned, so the key of set_ stays valid until set_
  // changes.
  bool BuildMaskKey();
  // frames_ := the top states of stack `node`, top first (a position-cache key).
  void TopFrames(int32_t node);
  void ComputeMask(uint32_t* mask);
  void PushHistory();

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::unique_ptr<internal::StackMachine> machine_;
  int32_t initial_set_ = -1;
  int32_t set_ = -1;  // current stack set (StackMachine id)
  bool terminated_ = false;
  struct Saved {
    int32_t set;
    bool terminated;
  };
  std::deque<Saved> history_;  // states before each accepted token, newest last
  // Scratch for mask computation.
  std::vector<uint32_t> scratch_;
  std::vector<int32_t> depth_sets_;
  std::vector<int32_t> frames_;
  std::string key_;
  int32_t key_set_ = -1;  // the set key_ was built for (-1: none)
  bool key_cacheable_ = false;
  std::vector<std::string> stack_keys_;
};

}  // namespace strata::grammar
