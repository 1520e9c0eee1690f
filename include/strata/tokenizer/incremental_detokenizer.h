// IncrementalDetokenizer: turns a stream of generated token ids into text deltas that are always
// whole, valid UTF-8, for streaming responses.
//
// A token may carry part of a character (byte-fallback tokens "<0xE4>" "<0xBD>" "<0xA0>" spell
// one CJK character), so bytes that could still become a valid character are held back until
// it completes. Bytes that can no longer form one are replaced by U+FFFD, one per maximal
// invalid subpart (Unicode 15, §3.9 "U+FFFD Substitution of Maximal Subparts", the practice
// Python's bytes.decode(errors="replace") and WHATWG follow). Flush() releases what is held,
// an unfinished sequence becoming one U+FFFD.
//
// Invariant: the concatenation of every Push() result and Flush() equals
// ReplaceInvalidUtf8(tokenizer.Decode(ids, render_special)); in particular it equals Decode()
// itself whenever that is valid UTF-8. This relies on Decode being prefix-stable (appending ids
// only appends bytes), which holds for SpmTokenizer and BpeTokenizer.
//
// Not thread-safe: one instance per sequence, used by one thread. The tokenizer must outlive it.
#pragma once

#include <string>
#include <string_view>

#include "strata/tokenizer/tokenizer.h"

namespace strata::tokenizer {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool render_special);

  // Appends `id` (invalid ids contribute nothing) and returns the text completed by it; often
  // empty while a character is unfinished.
  std::string Push(TokenId id);

  // Returns the held-back bytes (as U+FFFD when they are an unfinished sequence). Further
  // Push() calls continue the same stream.
  std::string Flush();

  size_t num_tokens() const { return num_tokens_; }
  // Bytes held back waiting for the rest of a character (at most 3).
  size_t num_pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool render_special_;
  size_t num_tokens_ = 0;
  TokenId last_id_ = kNoToken;
  std::string pending_;
};

// `bytes` with every invalid UTF-8 subpart replaced by U+FFFD (same rule as above, an
// unfinished sequence at the end included).
std::string ReplaceInvalidUtf8(std::string_view bytes);

// Length of the longest prefix of `bytes` made of whole valid sequences and invalid subparts
// only, i.e. everything but an unfinished (still completable) sequence at the end.
size_t CompleteUtf8Prefix(std::string_view bytes);

}  // namespace strata::tokenizer
