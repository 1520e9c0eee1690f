// Internal to strata_grammar: the pushdown recogniser over the byte automaton.
//
// A stack is a chain of interned nodes (state, parent); the top node's state is where the next
// byte is read, the nodes below hold return states. A stack set (the matcher's configuration;
// several stacks because grammars may be ambiguous) is interned too, as sorted node ids plus a
// flag saying that some stack popped past its bottom (for the matcher: the root can end here).
// Sets only hold nodes whose state reads bytes: calls and pops are expanded eagerly (the
// closure), tail calls replace the top frame. Step(set, byte) is memoized, so walking tokens
// through the same sets costs one table lookup per byte: a lazily built DFA over stack sets.
//
// Not thread-safe: one owner (a matcher, or one mask computation).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "byte_automaton.h"

namespace strata::grammar::internal {

// Open-addressing map from nonzero-able 64-bit keys to int32 values.
class FlatMap64 {
 public:
  FlatMap64() { Rehash(64); }
  // The value for `key`, or -1 when absent... returns a pointer to insert into.
  const int32_t* Find(uint64_t key) const;
  void Insert(uint64_t key, int32_t value);
  size_t size() const { return size_; }
  size_t bytes() const { return keys_.size() * (sizeof(uint64_t) + sizeof(int32_t)); }

 private:
  void Rehash(size_t capacity);
  std::vector<uint64_t> keys_;  // stored as key + 1, 0 = empty
  std::vector<int32_t> values_;
  size_t size_ = 0;
};

class StackMachine {
 public:
  static constexpr int32_t kDead = -1;  // set id of "no stack, cannot end"
  static constexpr int32_t kNoParent = -1;
  // Deeper stacks are dropped (treated as dead paths) so adversarial outputs of recursive
  // grammars cannot grow memory without bound.
  static constexpr int32_t kMaxStackDepth = 2048;
  // A set holds at most this many stacks: a highly ambiguous grammar (found by gbnf_fuzz:
  // nested optional recursion) can otherwise double its stacks with every byte and exhaust
  // memory. Stacks past the cap are dropped like too-deep ones, so such a grammar may refuse
  // some outputs it would accept; no useful grammar comes near it.
  static constexpr size_t kMaxStacksPerSet = 1024;

  // dense_memo: per-set 256-entry transition tables (fast, 1 KiB per set: for short-lived
  // machines); otherwise a hash map (for the per-request matcher).
  StackMachine(const ByteAutomaton* automaton, bool dense_memo);

  int32_t Node(int32_t state, int32_t parent);
  int32_t NodeState(int32_t node) const { return nodes_[node].state; }
  int32_t NodeParent(int32_t node) const { return nodes_[node].parent; }

  // The closure of one node (calls and pops expanded), interned.
  int32_t ClosureSet(int32_t node);
  // The set holding exactly `node` (which must read bytes), no closure.
  int32_t SingletonSet(int32_t node);
  // The set after reading `byte` from `set` (kDead when nothing survives).
  int32_t Step(int32_t set, uint8_t byte);
  // Reads `bytes` from `set`; kDead as soon as nothing survives.
  int32_t Walk(int32_t set, const std::string& bytes);

  const std::vector<int32_t>& SetNodes(int32_t set) const { return sets_[set].nodes; }
  bool SetPopped(int32_t set) const { return sets_[set].popped; }

  // The states of a node's stack from top to bottom, appended to `out` as raw int32 bytes.
  void AppendStackKey(int32_t node, std::string* out) const;

  size_t MemoryBytes() const;

 private:
  struct NodeData {
    int32_t state;
    int32_t parent;
    int32_t depth;
  };
  struct SetData {
    std::vector<int32_t> nodes;
    bool popped = false;
  };

  void Expand(int32_t node);
  int32_t InternSet();

  const ByteAutomaton* a_;
  bool dense_;
  std::vector<NodeData> nodes_;
  FlatMap64 node_ids_;
  std::vector<SetData> sets_;
  std::unordered_map<std::string, int32_t> set_ids_;
  std::vector<std::vector<int32_t>> dense_memo_;  // empty or 256 entries (-2 = unknown)
  FlatMap64 sparse_memo_;
  // Closure scratch.
  std::vector<uint32_t> stamp_;
  uint32_t cur_stamp_ = 0;
  std::vector<int32_t> work_;
  std::vector<int32_t> out_nodes_;
  bool out_popped_ = false;
};

}  // namespace strata::grammar::internal
