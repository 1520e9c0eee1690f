// StopChecker: finds stop strings in streamed output text and decides how much of the text is
// safe to send.
//
// Text arrives as deltas (one per token, from the detokenizer), and a stop string may straddle
// any number of them. Contract, for the concatenation T of every delta pushed:
//   * when a stop string occurs in T, the output is T up to the start of the first occurrence
//     to *end*, i.e. the one a byte-by-byte reader sees complete first (of several ending at
//     the same byte, the longest); the stop string and everything after it are never output;
//   * otherwise the output is all of T, though a tail of T that is still a prefix of some stop
//     string is held back until later text rules it out or Flush() releases it;
//   * the output depends only on T, never on how T was split into deltas.
// With "ab" and "abc" both stop strings, "xab..." stops at "ab"; with "bc" and "abcd", "abcd"
// stops at "bc" (output "a"), since "bc" completes first.
//
// Holding back a stop-string prefix never splits a UTF-8 character when the stop strings are
// valid UTF-8 (Validate() requires it) and the text is.
//
// Each stop string runs a Knuth-Morris-Pratt automaton, so a delta costs O(bytes * number of
// stop strings) and at most (longest stop string - 1) bytes are ever held.
//
// Not thread-safe; one per sequence.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata::sampling {

class StopChecker {
 public:
  // `stop_strings` must be non-empty strings (Validate() guarantees it). None: every Push()
  // returns its delta.
  explicit StopChecker(std::span<const std::string> stop_strings);

  // Feeds the next delta and returns the text now safe to emit. After a match it returns the
  // text before the stop string, and from then on "" (further deltas are ignored).
  std::string Push(std::string_view delta);

  // Releases the held-back tail: call when no more text will come. "" after a match. A later
  // Push() starts afresh: released text can no longer be part of a match.
  std::string Flush();

  bool stopped() const { return matched_ >= 0; }
  // Index into the constructor's stop strings of the match, -1 before one.
  int matched_index() const { return matched_; }
  // Bytes currently held back (always < the longest stop string's length).
  size_t num_held_bytes() const { return held_.size(); }

 private:
  struct Pattern {
    std::string text;
    std::vector<uint32_t> failure;  // KMP failure function: failure[i] for prefix length i+1
    uint32_t state = 0;             // length of the longest prefix that ends the text so far
  };

  std::vector<Pattern> patterns_;
  std::string held_;  // the unsent tail of the text
  int matched_ = -1;
};

}  // namespace strata::sampling
