#include "stack_machine.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace strata::grammar::internal {
namespace {

uint64_t Mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

}  // namespace

void FlatMap64::Rehash(size_t capacity) {
  std::vector<uint64_t> old_keys = std::move(keys_);
  std::vector<int32_t> old_values = std::move(values_);
  keys_.assign(capacity, 0);
  values_.assign(capacity, 0);
  size_ = 0;
  for (size_t i = 0; i < old_keys.size(); ++i) {
    if (old_keys[i] != 0) Insert(old_keys[i] - 1, old_values[i]);
  }
}

const int32_t* FlatMap64::Find(uint64_t key) const {
  const size_t mask = keys_.size() - 1;
  for (size_t i = Mix(key) & mask;; i = (i + 1) & mask) {
    if (keys_[i] == 0) return nullptr;
    if (keys_[i] == key + 1) return &values_[i];
  }
}

void FlatMap64::Insert(uint64_t key, int32_t value) {
  if ((size_ + 1) * 2 > keys_.size()) Rehash(keys_.size() * 2);
  const size_t mask = keys_.size() - 1;
  for (size_t i = Mix(key) & mask;; i = (i + 1) & mask) {
    if (keys_[i] == 0) {
      keys_[i] = key + 1;
      values_[i] = value;
      ++size_;
      return;
    }
    if (keys_[i] == key + 1) {
      values_[i] = value;
      return;
    }
  }
}

StackMachine::StackMachine(const ByteAutomaton* automaton, bool dense_memo)
    : a_(automaton), dense_(dense_memo) {}

int32_t StackMachine::Node(int32_t state, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32) |
                       static_cast<uint32_t>(parent + 1);
  if (const int32_t* found = node_ids_.Find(key)) return *found;
  const int32_t depth = parent < 0 ? 1 : nodes_[parent].depth + 1;
  nodes_.push_back(NodeData{state, parent, depth});
  stamp_.push_back(0);
  const int32_t id = static_cast<int32_t>(nodes_.size() - 1);
  node_ids_.Insert(key, id);
  return id;
}

void StackMachine::Expand(int32_t start) {
  work_.push_back(start);
  while (!work_.empty()) {
    if (out_nodes_.size() >= kMaxStacksPerSet) {
      work_.clear();
      return;
    }
    const int32_t n = work_.back();
    work_.pop_back();
    if (stamp_[n] == cur_stamp_) continue;
    stamp_[n] = cur_stamp_;
    const ByteState& s = a_->states[nodes_[n].state];
    const int32_t parent = nodes_[n].parent;
    if (!s.bytes.empty()) out_nodes_.push_back(n);
    for (const CallEdge& call : s.calls) {
      int32_t ret = parent;
      if (!call.tail) {
        if (nodes_[n].depth >= kMaxStackDepth) continue;
        ret = Node(call.ret, parent);
      }
      work_.push_back(Node(a_->rule_start[call.rule], ret));
    }
    if (s.final) {
      if (parent < 0) {
        out_popped_ = true;
      } else {
        work_.push_back(parent);
      }
    }
  }
}

int32_t StackMachine::InternSet() {
  std::sort(out_nodes_.begin(), out_nodes_.end());
  if (out_nodes_.empty() && !out_popped_) return kDead;
  std::string key(reinterpret_cast<const char*>(out_nodes_.data()),
                  out_nodes_.size() * sizeof(int32_t));
  key.push_back(out_popped_ ? 'p' : 'n');
  auto it = set_ids_.find(key);
  if (it != set_ids_.end()) return it->second;
  const int32_t id = static_cast<int32_t>(sets_.size());
  sets_.push_back(SetData{out_nodes_, out_popped_});
  set_ids_.emplace(std::move(key), id);
  if (dense_) dense_memo_.emplace_back();
  return id;
}

int32_t StackMachine::ClosureSet(int32_t node) {
  ++cur_stamp_;
  out_nodes_.clear();
  out_popped_ = false;
  Expand(node);
  return InternSet();
}

int32_t StackMachine::SingletonSet(int32_t node) {
  out_nodes_.assign(1, node);
  out_popped_ = false;
  return InternSet();
}

int32_t StackMachine::Step(int32_t set, uint8_t byte) {
  if (set < 0) return kDead;
  if (dense_) {
    if (!dense_memo_[set].empty()) {
      const int32_t v = dense_memo_[set][byte];
      if (v != -2) return v;
    }
  } else if (const int32_t* v = sparse_memo_.Find((static_cast<uint64_t>(set) << 8) | byte)) {
    return *v;
  }
  ++cur_stamp_;
  out_nodes_.clear();
  out_popped_ = false;
  // Index-based: Expand may grow nodes_ and sets_ is not touched until InternSet.
  const size_t count = sets_[set].nodes.size();
  for (size_t i = 0; i < count; ++i) {
    const int32_t n = sets_[set].nodes[i];
    const int32_t state = nodes_[n].state;
    const int32_t parent = nodes_[n].parent;
    const std::vector<ByteEdge>& edges = a_->states[state].bytes;
    for (size_t e = 0; e < edges.size(); ++e) {
      if (byte >= edges[e].lo && byte <= edges[e].hi) Expand(Node(edges[e].target, parent));
    }
  }
  const int32_t result = InternSet();
  if (dense_) {
    if (dense_memo_[set].empty()) dense_memo_[set].assign(256, -2);
    dense_memo_[set][byte] = result;
  } else {
    sparse_memo_.Insert((static_cast<uint64_t>(set) << 8) | byte, result);
  }
  return result;
}

int32_t StackMachine::Walk(int32_t set, const std::string& bytes) {
  for (char c : bytes) {
    set = Step(set, static_cast<uint8_t>(c));
    if (set == kDead) return kDead;
  }
  return set;
}

void StackMachine::AppendStackKey(int32_t node, std::string* out) const {
  for (int32_t n = node; n >= 0; n = nodes_[n].parent) {
    const int32_t s = nodes_[n].state;
    out->append(reinterpret_cast<const char*>(&s), sizeof(s));
  }
}

size_t StackMachine::MemoryBytes() const {
  size_t bytes = nodes_.size() * (sizeof(NodeData) + sizeof(uint32_t)) + node_ids_.bytes() +
                 sparse_memo_.bytes();
  for (const SetData& s : sets_) bytes += sizeof(SetData) + s.nodes.size() * sizeof(int32_t) * 3;
  for (const auto& m : dense_memo_) bytes += sizeof(m) + m.size() * sizeof(int32_t);
  return bytes;
}

}  // namespace strata::grammar::internal
