#include "adaptive_token_mask.h"

#include <algorithm>
#include <string>
#include <vector>

#include "stack_machine.h"

namespace strata::grammar::internal {

void AdaptiveTokenMask::OrAcceptedInto(const TokenVocabulary& vocab, uint32_t* mask,
                                       std::vector<uint32_t>* scratch) const {
  switch (storage) {
    case Storage::kAcceptedIds:
      for (int32_t id : ids) mask[id >> 5] |= 1u << (id & 31);
      break;
    case Storage::kBitset:
      for (size_t w = 0; w < bitset.size(); ++w) mask[w] |= bitset[w];
      break;
    case Storage::kRejectedIds: {
      *scratch = vocab.matchable_mask();
      for (int32_t id : ids) (*scratch)[id >> 5] &= ~(1u << (id & 31));
      for (size_t w = 0; w < scratch->size(); ++w) mask[w] |= (*scratch)[w];
      break;
    }
  }
}

AdaptiveTokenMask ComputeAdaptiveTokenMask(const ByteAutomaton& automaton,
                                           const TokenVocabulary& vocab,
                                           const std::vector<int32_t>& states) {
  enum : uint8_t { kRejected = 0, kAccepted = 1, kUncertain = 2 };
  StackMachine machine(&automaton, /*dense_memo=*/true);
  const std::vector<int32_t>& ids = vocab.sorted_ids();
  const std::vector<int32_t>& lcp = vocab.sorted_lcp();
  const size_t count = ids.size();
  std::vector<uint8_t> verdict(count, kRejected);

  // set_at[d]: the in-frame stack set after d bytes of the current token; popped_by[d]: whether
  // some path returned past the frame within the first d bytes.
  int32_t top = -1;
  for (size_t k = states.size(); k-- > 0;) top = machine.Node(states[k], top);
  std::vector<int32_t> set_at(1, machine.SingletonSet(top));
  std::vector<uint8_t> popped_by(1, 0);
  size_t i = 0;
  while (i < count) {
    const std::string& tok = vocab.token_bytes(ids[i]);
    size_t d = std::min<size_t>(lcp[i], set_at.size() - 1);
    set_at.resize(d + 1);
    popped_by.resize(d + 1);
    bool alive = set_at[d] != StackMachine::kDead && !machine.SetNodes(set_at[d]).empty();
    while (alive && d < tok.size()) {
      const int32_t next = machine.Step(set_at[d], static_cast<uint8_t>(tok[d]));
      const bool popped = popped_by[d] || (next != StackMachine::kDead && machine.SetPopped(next));
      set_at.push_back(next);
      popped_by.push_back(popped);
      ++d;
      alive = next != StackMachine::kDead && !machine.SetNodes(next).empty();
    }
    uint8_t v;
    if (d == tok.size() && alive) {
      v = kAccepted;
    } else {
      v = popped_by[d] ? kUncertain : kRejected;
    }
    verdict[i] = v;
    ++i;
    if (d < tok.size()) {
      // The prefix of d bytes has no in-frame path: every later token that shares it (all of
      // them longer than d) gets the same verdict.
      while (i < count && static_cast<size_t>(lcp[i]) >= d) verdict[i++] = v;
      // Later tokens share at most d - 1 bytes, and set_at is valid up to depth d.
    }
  }

  AdaptiveTokenMask m;
  std::vector<int32_t> accepted, not_accepted;
  const std::string* prev = nullptr;
  for (size_t k = 0; k < count; ++k) {
    if (verdict[k] == kAccepted) {
      accepted.push_back(ids[k]);
    } else {
      not_accepted.push_back(ids[k]);
    }
    if (verdict[k] == kUncertain) {
      const std::string& tok = vocab.token_bytes(ids[k]);
      int32_t l = 0;
      if (prev) {
        while (static_cast<size_t>(l) < prev->size() && static_cast<size_t>(l) < tok.size() &&
               (*prev)[l] == tok[l]) {
          ++l;
        }
      }
      m.uncertain.push_back(static_cast<int32_t>(k));
      m.uncertain_lcp.push_back(l);
      prev = &tok;
    }
  }
  const size_t words = vocab.bitmask_words();
  if (accepted.size() <= not_accepted.size() && accepted.size() < words) {
    m.storage = AdaptiveTokenMask::Storage::kAcceptedIds;
    m.ids = std::move(accepted);
  } else if (not_accepted.size() < words) {
    m.storage = AdaptiveTokenMask::Storage::kRejectedIds;
    m.ids = std::move(not_accepted);
  } else {
    m.storage = AdaptiveTokenMask::Storage::kBitset;
    m.bitset.assign(words, 0);
    for (int32_t id : accepted) m.bitset[id >> 5] |= 1u << (id & 31);
  }
  std::sort(m.ids.begin(), m.ids.end());
  return m;
}

}  // namespace strata::grammar::internal
