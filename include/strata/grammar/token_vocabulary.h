// The model's vocabulary as the grammar matcher sees it: the raw output bytes of every token,
// which tokens may never be sampled under a grammar, and which tokens end generation.
//
// Built once per model and shared (read-only, any thread) by every CompiledGrammar for it.
// Tokenizer-agnostic: byte-fallback tokens (SPM "<0xE2>") are given as their single byte, BPE
// tokens as the bytes they decode to; a token may hold part of a UTF-8 character, which the
// byte-level matcher handles (the character completes in a later token).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/common/status.h"

namespace strata::grammar {

class TokenVocabulary {
 public:
  // token_bytes[id]: the bytes token `id` adds to the output (empty for control tokens).
  // never_allowed[id]: special/control/unused tokens a grammar never allows (same size as
  // token_bytes). end_token_ids: EOS / end-of-turn ids; they are allowed exactly when the
  // grammar's root can end, whatever never_allowed says about them. Tokens with empty bytes
  // that are not end tokens are never allowed. INVALID_ARGUMENT for mismatched sizes or ids out
  // of range.
  static StatusOr<std::shared_ptr<const TokenVocabulary>> Build(
      std::vector<std::string> token_bytes, std::vector<bool> never_allowed,
      std::vector<int32_t> end_token_ids);

  int32_t size() const { return static_cast<int32_t>(token_bytes_.size()); }
  // 32-bit words of a token bitmask: (size() + 31) / 32.
  size_t bitmask_words() const { return (token_bytes_.size() + 31) / 32; }
  const std::string& token_bytes(int32_t id) const { return token_bytes_[id]; }
  bool is_end_token(int32_t id) const { return is_end_[id]; }
  const std::vector<int32_t>& end_token_ids() const { return end_token_ids_; }
  // Whether the grammar decides this token by its bytes (not never-allowed, not an end token,
  // bytes not empty).
  bool is_matchable(int32_t id) const { return (matchable_mask_[id >> 5] >> (id & 31)) & 1; }

  // The matchable tokens sorted by their bytes, with each one's longest common prefix with the
  // previous one: an implicit trie that the mask computation walks sharing prefixes.
  const std::vector<int32_t>& sorted_ids() const { return sorted_ids_; }
  const std::vector<int32_t>& sorted_lcp() const { return sorted_lcp_; }
  // Bitmask (bitmask_words() words) of the matchable tokens.
  const std::vector<uint32_t>& matchable_mask() const { return matchable_mask_; }

 private:
  TokenVocabulary() = default;

  std::vector<std::string> token_bytes_;
  std::vector<bool> is_end_;
  std::vector<int32_t> end_token_ids_;
  std::vector<int32_t> sorted_ids_;
  std::vector<int32_t> sorted_lcp_;
  std::vector<uint32_t> matchable_mask_;
};

}  // namespace strata::grammar
