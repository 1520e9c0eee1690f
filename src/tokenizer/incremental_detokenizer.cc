#include "strata/tokenizer/incremental_detokenizer.h"

#include <algorithm>
#include <array>

namespace strata::tokenizer {
namespace {

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD

enum class SequenceKind { kValid, kInvalid, kUnfinished };

// Classifies the UTF-8 sequence starting at bytes[pos] (Unicode Table 3-7, well-formed byte
// sequences). Sets *length to the sequence's length (kValid), the maximal invalid subpart's
// length (kInvalid, >= 1) or the bytes present (kUnfinished).
SequenceKind Classify(std::string_view bytes, size_t pos, size_t* length) {
  const auto lead = static_cast<uint8_t>(bytes[pos]);
  size_t needed;
  uint8_t second_lo = 0x80;
  uint8_t second_hi = 0xBF;
  if (lead < 0x80) {
    *length = 1;
    return SequenceKind::kValid;
  } else if (lead >= 0xC2 && lead <= 0xDF) {
    needed = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    needed = 3;
    if (lead == 0xE0) second_lo = 0xA0;  // no overlong forms
    if (lead == 0xED) second_hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    needed = 4;
    if (lead == 0xF0) second_lo = 0x90;  // no overlong forms
    if (lead == 0xF4) second_hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *length = 1;  // continuation byte, C0/C1 or F5..FF: never valid
    return SequenceKind::kInvalid;
  }
  size_t i = 1;
  for (; i < needed; ++i) {
    if (pos + i >= bytes.size()) {
      *length = i;
      return SequenceKind::kUnfinished;
    }
    const auto b = static_cast<uint8_t>(bytes[pos + i]);
    const uint8_t lo = i == 1 ? second_lo : 0x80;
    const uint8_t hi = i == 1 ? second_hi : 0xBF;
    if (b < lo || b > hi) {
      *length = i;
      return SequenceKind::kInvalid;
    }
  }
  *length = needed;
  return SequenceKind::kValid;
}

}  // namespace

size_t CompleteUtf8Prefix(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t length = 0;
    if (Classify(bytes, pos, &length) == SequenceKind::kUnfinished) return pos;
    pos += length;
  }
  return pos;
}

std::string ReplaceInvalidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t length = 0;
    if (Classify(bytes, pos, &length) == SequenceKind::kValid) {
      out.append(bytes.substr(pos, length));
    } else {
      out.append(kReplacement);
    }
    pos += length;
  }
  return out;
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special) {}

std::string IncrementalDetokenizer::Push(TokenId id) {
  // The bytes `id` adds: what Decode gives for (previous, id) beyond what it gives for
  // (previous). One token of context is enough for a prefix-stable Decode, and keeps the
  // first-token rule (SPM's leading-space strip) applied to the right token.
  std::string added;
  if (num_tokens_ == 0) {
    const std::array<TokenId, 1> one = {id};
    added = tokenizer_.Decode(one, render_special_);
  } else {
    const std::array<TokenId, 2> pair = {last_id_, id};
    const std::string both = tokenizer_.Decode(pair, render_special_);
    const std::string first =
        tokenizer_.Decode(std::span<const TokenId>(pair).first(1), render_special_);
    const size_t common = static_cast<size_t>(
        std::mismatch(first.begin(), first.end(), both.begin(), both.end()).first - first.begin());
    added = both.substr(common);
  }
  last_id_ = id;
  ++num_tokens_;

  pending_ += added;
  const size_t complete = CompleteUtf8Prefix(pending_);
  std::string out = ReplaceInvalidUtf8(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out = ReplaceInvalidUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace strata::tokenizer
