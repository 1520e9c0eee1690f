#include "strata/embedding/wordpiece_tokenizer.h"

#include <algorithm>

#include "strata/common/utf8.h"
#include "strata/embedding/bert_pre_tokenizer.h"
#include "strata/tokenizer/unicode.h"

namespace strata::embedding {

StatusOr<std::vector<int32_t>> WordPieceTokenizer::Encode(std::string_view text,
                                                          int max_tokens) const {
  if (max_tokens < 2) {
    return InvalidArgumentError("max_tokens must be at least 2 ([CLS] and [SEP]), got " +
                                std::to_string(max_tokens));
  }
  size_t bad = 0;
  if (!IsValidUtf8(text, &bad)) {
    return InvalidArgumentError("text is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  }
  std::vector<int32_t> pieces = EncodePieces(text);
  std::vector<int32_t> ids;
  const size_t kept = std::min(pieces.size(), static_cast<size_t>(max_tokens) - 2);
  ids.reserve(kept + 2);
  ids.push_back(cls_id_);
  ids.insert(ids.end(), pieces.begin(), pieces.begin() + kept);
  ids.push_back(sep_id_);
  return ids;
}

std::vector<int32_t> WordPieceTokenizer::EncodePieces(std::string_view text) const {
  std::vector<int32_t> ids;
  // Leftmost-longest matches of the added tokens; the stretches between them are encoded.
  size_t stretch = 0;
  size_t i = 0;
  while (i < text.size()) {
    const AddedToken* match = nullptr;
    for (const AddedToken& token : added_) {  // longest first
      if (text.substr(i).starts_with(token.text)) {
        match = &token;
        break;
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    EncodeStretch(text.substr(stretch, i - stretch), &ids);
    ids.push_back(match->id);
    i += match->text.size();
    stretch = i;
  }
  EncodeStretch(text.substr(stretch), &ids);
  return ids;
}

std::optional<int32_t> WordPieceTokenizer::TokenId(std::string_view text) const {
  const auto it = vocab_.find(text);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::u32string WordPieceTokenizer::Normalize(std::string_view text) const {
  const std::vector<char32_t> decoded = tokenizer::DecodeUtf8(text);
  std::u32string normalized(decoded.begin(), decoded.end());
  return normalize_ ? normalizer_.Normalize(normalized) : normalized;
}

std::vector<std::string> WordPieceTokenizer::NormalizedWords(std::string_view text) const {
  const std::u32string normalized = Normalize(text);
  std::vector<std::string> words;
  for (std::u32string_view w : SplitBertWords(normalized)) {
    std::string& word = words.emplace_back();
    for (char32_t cp : w) tokenizer::AppendUtf8(cp, &word);
  }
  return words;
}

void WordPieceTokenizer::EncodeStretch(std::string_view text, std::vector<int32_t>* ids) const {
  if (text.empty()) return;
  const std::u32string normalized = Normalize(text);
  std::string word;
  for (std::u32string_view w : SplitBertWords(normalized)) {
    word.clear();
    for (char32_t cp : w) tokenizer::AppendUtf8(cp, &word);
    EncodeWord(word, w.size(), ids);
  }
}

void WordPieceTokenizer::EncodeWord(std::string_view word, size_t num_chars,
                                    std::vector<int32_t>* ids) const {
  if (num_chars > max_input_chars_per_word_) {
    ids->push_back(unk_id_);
    return;
  }
  // Byte offsets where code points start, and the end.
  std::vector<size_t> bounds;
  bounds.reserve(num_chars + 1);
  for (size_t b = 0; b < word.size(); ++b) {
    if ((static_cast<uint8_t>(word[b]) & 0xC0) != 0x80) bounds.push_back(b);
  }
  bounds.push_back(word.size());
  const size_t first_piece = ids->size();
  std::string candidate;
  size_t start = 0;  // index into bounds
  while (start + 1 < bounds.size()) {
    // The longest vocabulary entry starting at bounds[start].
    size_t end = bounds.size() - 1;
    std::optional<int32_t> id;
    for (; end > start; --end) {
      candidate.assign(start > 0 ? continuing_prefix_ : std::string());
      candidate.append(word.substr(bounds[start], bounds[end] - bounds[start]));
      id = TokenId(candidate);
      if (id) break;
    }
    if (!id) {  // a stretch no entry covers: the whole word is unknown
      ids->resize(first_piece);
      ids->push_back(unk_id_);
      return;
    }
    ids->push_back(*id);
    start = end;
  }
}

}  // namespace strata::embedding
