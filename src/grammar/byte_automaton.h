// Internal to strata_grammar: the grammar lowered to bytes.
//
// Each rule becomes a small byte-level NFA: states with byte-range edges, call edges (enter a
// rule, then continue at a return state) and a final flag. Code-point classes are lowered to
// UTF-8 byte-range sequences (the split of RE2 / Russ Cox's "UTF-8 ranges"), so a character
// split across tokens leaves the matcher inside the class, between two bytes. Surrogates
// (U+D800..U+DFFF) are not encodable and dropped. Every alternative ends in the rule's single
// end state, which has no edges; a call whose return state is that end state is a tail call
// (the matcher replaces the frame instead of pushing one), so right recursion and repetition
// run in constant stack.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/grammar/grammar.h"

namespace strata::grammar::internal {

struct ByteEdge {
  uint8_t lo = 0;
  uint8_t hi = 0;
  int32_t target = -1;
};

struct CallEdge {
  int32_t rule = -1;
  int32_t ret = -1;   // state to continue at after the rule
  bool tail = false;  // ret is the caller's end state: do not push it
};

struct ByteState {
  std::vector<ByteEdge> bytes;
  std::vector<CallEdge> calls;
  bool final = false;
  int32_t rule = -1;
};

struct ByteAutomaton {
  std::vector<ByteState> states;
  std::vector<int32_t> rule_start;
  int32_t root = -1;
};

// A byte-range sequence encoding every code point of one piece of a class.
struct Utf8Sequence {
  int len = 0;
  uint8_t lo[4] = {};
  uint8_t hi[4] = {};
};
// The UTF-8 encodings of `ranges` (normalized) as byte-range sequences, surrogates excluded.
std::vector<Utf8Sequence> Utf8Sequences(const std::vector<CodepointRange>& ranges);

// Lowers a validated grammar.
ByteAutomaton LowerToBytes(const Grammar& grammar);

}  // namespace strata::grammar::internal
