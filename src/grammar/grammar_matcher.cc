#include "strata/grammar/grammar_matcher.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adaptive_token_mask.h"
#include "byte_automaton.h"
#include "stack_machine.h"

namespace strata::grammar {

using internal::StackMachine;

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)) {
  STRATA_CHECK(grammar_ != nullptr);
  const internal::ByteAutomaton& a = grammar_->automaton();
  machine_ = std::make_unique<StackMachine>(&a, /*dense_memo=*/false);
  initial_set_ = machine_->ClosureSet(machine_->Node(a.rule_start[a.root], -1));
  set_ = initial_set_;
}

GrammarMatcher::GrammarMatcher(const GrammarMatcher& other)
    : grammar_(other.grammar_),
      machine_(std::make_unique<StackMachine>(*other.machine_)),
      initial_set_(other.initial_set_),
      set_(other.set_),
      terminated_(other.terminated_),
      history_(other.history_) {}

GrammarMatcher::~GrammarMatcher() = default;

void GrammarMatcher::PushHistory() {
  history_.push_back(Saved{set_, terminated_});
  if (history_.size() > static_cast<size_t>(kMaxRollbackTokens)) history_.pop_front();
}

bool GrammarMatcher::AcceptToken(int32_t id) {
  const TokenVocabulary& vocab = grammar_->vocabulary();
  if (terminated_ || id < 0 || id >= vocab.size()) return false;
  if (vocab.is_end_token(id)) {
    if (!CanTerminate()) return false;
    PushHistory();
    terminated_ = true;
    return true;
  }
  if (!vocab.is_matchable(id)) return false;
  return AcceptBytes(vocab.token_bytes(id));
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (terminated_ || set_ == StackMachine::kDead) return false;
  int32_t s = set_;
  for (char c : bytes) {
    s = machine_->Step(s, static_cast<uint8_t>(c));
    if (s == StackMachine::kDead) return false;
  }
  PushHistory();
  set_ = s;
  return true;
}

bool GrammarMatcher::CanTerminate() const {
  return !terminated_ && set_ != StackMachine::kDead && machine_->SetPopped(set_);
}

bool GrammarMatcher::IsDead() const {
  if (terminated_) return false;
  return set_ == StackMachine::kDead ||
         (machine_->SetNodes(set_).empty() && !machine_->SetPopped(set_));
}

void GrammarMatcher::Rollback(int num_tokens) {
  STRATA_CHECK(num_tokens >= 0 && num_tokens <= NumRollbackTokens());
  for (int i = 0; i < num_tokens; ++i) {
    set_ = history_.back().set;
    terminated_ = history_.back().terminated;
    history_.pop_back();
  }
}

void GrammarMatcher::Reset() {
  set_ = initial_set_;
  terminated_ = false;
  history_.clear();
}

void GrammarMatcher::FillNextTokenBitmask(std::span<uint32_t> bitmask) {
  const TokenVocabulary& vocab = grammar_->vocabulary();
  const size_t words = vocab.bitmask_words();
  STRATA_CHECK(bitmask.size() >= words);
  std::fill(bitmask.begin(), bitmask.end(), 0u);
  if (terminated_ || set_ == StackMachine::kDead) return;
  const bool cacheable = BuildMaskKey();
  if (cacheable && grammar_->LookupMask(key_, bitmask.data())) return;
  ComputeMask(bitmask.data());
  if (cacheable) grammar_->StoreMask(key_, bitmask.data());
}

bool GrammarMatcher::NextMaskIsCached() {
  if (terminated_ || set_ == StackMachine::kDead) return true;
  if (BuildMaskKey() && grammar_->HasMask(key_)) return true;
  for (int32_t node : machine_->SetNodes(set_)) {
    TopFrames(node);
    if (!grammar_->HasPositionMask(frames_)) return false;
  }
  return true;
}

bool GrammarMatcher::BuildMaskKey() {
  if (key_set_ == set_) return key_cacheable_;
  key_set_ = set_;
  key_cacheable_ = false;
  // Canonical key of the stack set: each stack's states top to bottom, sorted, plus the flag.
  stack_keys_.clear();
  size_t key_bytes = 0;
  for (int32_t node : machine_->SetNodes(set_)) {
    stack_keys_.emplace_back();
    machine_->AppendStackKey(node, &stack_keys_.back());
    key_bytes += stack_keys_.back().size() + 1;
    if (key_bytes > grammar_->max_mask_key_bytes()) return false;  // no need for the rest
  }
  std::sort(stack_keys_.begin(), stack_keys_.end());
  key_.clear();
  for (const std::string& k : stack_keys_) {
    const uint32_t len = static_cast<uint32_t>(k.size());
    key_.append(reinterpret_cast<const char*>(&len), sizeof(len));
    key_ += k;
  }
  key_.push_back(machine_->SetPopped(set_) ? 'p' : 'n');
  key_cacheable_ = true;
  return true;
}

void GrammarMatcher::TopFrames(int32_t node) {
  frames_.clear();
  for (int32_t n = node; n >= 0 && frames_.size() < internal::kContextFrames;
       n = machine_->NodeParent(n)) {
    frames_.push_back(machine_->NodeState(n));
  }
}

void GrammarMatcher::ComputeMask(uint32_t* mask) {
  const TokenVocabulary& vocab = grammar_->vocabulary();
  const std::vector<int32_t>& sorted_ids = vocab.sorted_ids();
  // Copy: walking tokens below may intern new sets and invalidate references.
  const std::vector<int32_t> nodes = machine_->SetNodes(set_);
  for (int32_t node : nodes) {
    TopFrames(node);
    std::shared_ptr<const internal::AdaptiveTokenMask> entry = grammar_->PositionMask(frames_);
    entry->OrAcceptedInto(vocab, mask, &scratch_);
    if (entry->uncertain.empty()) continue;
    // Uncertain tokens: walk them from this one stack, in byte order sharing prefixes.
    depth_sets_.assign(1, machine_->SingletonSet(node));
    size_t valid = 0;  // depth_sets_[0..valid] are the sets along the last walked token
    for (size_t k = 0; k < entry->uncertain.size(); ++k) {
      // Sorted order: the common prefix with the last walked token is the minimum of the
      // adjacent prefixes in between.
      valid = std::min<size_t>(valid, entry->uncertain_lcp[k]);
      const int32_t id = sorted_ids[entry->uncertain[k]];
      if ((mask[id >> 5] >> (id & 31)) & 1) continue;
      const std::string& tok = vocab.token_bytes(id);
      size_t d = valid;
      depth_sets_.resize(d + 1);
      int32_t s = depth_sets_[d];
      while (d < tok.size() && s != StackMachine::kDead) {
        s = machine_->Step(s, static_cast<uint8_t>(tok[d]));
        depth_sets_.push_back(s);
        ++d;
      }
      valid = d;
      if (d == tok.size() && s != StackMachine::kDead) mask[id >> 5] |= 1u << (id & 31);
    }
  }
  if (machine_->SetPopped(set_)) {
    for (int32_t id : vocab.end_token_ids()) mask[id >> 5] |= 1u << (id & 31);
  }
}

}  // namespace strata::grammar
