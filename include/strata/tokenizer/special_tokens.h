// SpecialTokenPartitioner: splits input text into raw-text fragments and special-token ids,
// the first step of every tokenizer (SPM and BPE alike). The model's own encoder then runs on
// each raw fragment independently.
//
// Semantics are llama.cpp's (tokenizer_st_partition), which its tokenizers are tested against:
//   - Candidates are the tokens with a control, user-defined or unknown attribute. Control and
//     unknown ones take part only when `parse_special` is set; user-defined ones always do.
//   - Candidates are tried one after another in priority order: longer text first; among equal
//     lengths, the order std::sort leaves ascending ids in (what llama.cpp does, and what decides
//     between overlapping equal-length matches, e.g. "ab" vs "ba" in "aba").
//   - Each candidate claims its non-overlapping occurrences left to right inside the text that
//     earlier candidates left unclaimed; a claim never spans two fragments.
//   - Tokens with the lstrip/rstrip attribute also swallow the whitespace (C-locale isspace)
//     before/after them, up to the edge of their fragment.
//
// Cost: one trie walk over the text to find where candidates occur, then per occurring
// candidate only the positions where it occurs, so thousands of user-defined tokens do not
// multiply the cost by their number. Bounded memory: candidates with very many occurrences
// (runs of whitespace against whitespace tokens) are re-scanned instead of stored.
//
// Immutable after construction; any thread may call Partition concurrently. Holds no
// reference to the Vocab after construction.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "strata/tokenizer/vocab.h"

namespace strata::tokenizer {

// One piece of partitioned input: either a non-empty run of raw text, or one special token.
struct TextFragment {
  TokenId token = kNoToken;  // the special token; kNoToken for raw text
  std::string_view text;     // raw text: a view into the partitioned input; empty for a token

  bool is_token() const { return token != kNoToken; }
};

class SpecialTokenPartitioner {
 public:
  explicit SpecialTokenPartitioner(const Vocab& vocab);

  // Fragments of `text` in order. Empty text gives no fragments. Raw fragments are views into
  // `text` (valid while it is), never empty, and together with the tokens' texts (and any
  // stripped whitespace) cover `text` exactly.
  std::vector<TextFragment> Partition(std::string_view text, bool parse_special) const;

  // Number of candidate tokens (control, user-defined and unknown).
  size_t num_candidates() const { return candidates_.size(); }

 private:
  struct Candidate {
    TokenId id;
    uint32_t length;           // bytes of text
    bool needs_parse_special;  // control/unknown: only a candidate with parse_special
    bool lstrip;
    bool rstrip;
    std::string_view text;  // into texts_
  };
  // A byte-trie over candidate texts. Node 0 is the root; edges of a node are contiguous and
  // sorted by byte. `rank` is the candidate ending at the node (index into candidates_), or -1.
  struct Node {
    uint32_t first_edge = 0;
    uint16_t num_edges = 0;
    int32_t rank = -1;
  };
  struct Edge {
    uint8_t byte;
    uint32_t child;
  };

  int32_t Child(uint32_t node, uint8_t byte) const;
  // Calls fn(rank, pos) for every enabled candidate occurrence, in order of pos.
  template <typename Fn>
  void ForEachOccurrence(std::string_view text, bool parse_special, Fn&& fn) const;

  std::vector<Candidate> candidates_;  // in priority order (rank = index)
  std::string texts_;                  // candidate texts, concatenated
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  int32_t root_children_[256];
};

}  // namespace strata::tokenizer
