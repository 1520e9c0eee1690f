#include "strata/sampling/stop_checker.h"

#include <algorithm>

#include "strata/common/check.h"

namespace strata::sampling {

StopChecker::StopChecker(std::span<const std::string> stop_strings) {
  patterns_.reserve(stop_strings.size());
  for (const std::string& text : stop_strings) {
    STRATA_CHECK(!text.empty());
    Pattern pattern;
    pattern.text = text;
    pattern.failure.assign(text.size(), 0);
    // failure[i]: length of the longest proper prefix of text[0..i] that is also its suffix.
    uint32_t k = 0;
    for (size_t i = 1; i < text.size(); ++i) {
      while (k > 0 && text[i] != text[k]) k = pattern.failure[k - 1];
      if (text[i] == text[k]) ++k;
      pattern.failure[i] = k;
    }
    patterns_.push_back(std::move(pattern));
  }
}

std::string StopChecker::Push(std::string_view delta) {
  if (stopped()) return "";
  std::string out;
  for (const char byte : delta) {
    held_.push_back(byte);
    int match = -1;
    uint32_t longest_state = 0;
    for (size_t p = 0; p < patterns_.size(); ++p) {
      Pattern& pattern = patterns_[p];
      uint32_t k = pattern.state;
      if (k == pattern.text.size()) k = pattern.failure[k - 1];
      while (k > 0 && pattern.text[k] != byte) k = pattern.failure[k - 1];
      if (pattern.text[k] == byte) ++k;
      pattern.state = k;
      if (k == pattern.text.size() &&
          (match < 0 || pattern.text.size() > patterns_[static_cast<size_t>(match)].text.size())) {
        match = static_cast<int>(p);
      }
      longest_state = std::max(longest_state, k);
    }
    if (match >= 0) {
      matched_ = match;
      const size_t keep = held_.size() - patterns_[static_cast<size_t>(match)].text.size();
      out.append(held_, 0, keep);
      held_.clear();
      return out;
    }
    // Only the longest suffix that still begins some stop string must wait; every automaton's
    // state is at most held_.size() since held_ always keeps at least that suffix.
    const size_t release = held_.size() - longest_state;
    if (release > 0) {
      out.append(held_, 0, release);
      held_.erase(0, release);
    }
  }
  return out;
}

std::string StopChecker::Flush() {
  std::string out;
  out.swap(held_);
  for (Pattern& pattern : patterns_) pattern.state = 0;
  return out;
}

}  // namespace strata::sampling
