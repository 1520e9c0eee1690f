#include "strata/tokenizer/spm_tokenizer.h"

#include <queue>
#include <utility>

namespace strata::tokenizer {
namespace {

constexpr std::string_view kEscapedSpace = "\xe2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Length of the UTF-8 sequence a lead byte announces, by its high nibble; continuation and
// invalid bytes count as 1. No validation, as in llama.cpp (unicode_len_utf8).
size_t Utf8SequenceLength(uint8_t lead) {
  static constexpr uint8_t kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

std::string UnescapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t hit = text.find(kEscapedSpace, pos);
    if (hit == std::string_view::npos) {
      out.append(text.substr(pos));
      break;
    }
    out.append(text.substr(pos, hit - pos));
    out.push_back(' ');
    pos = hit + kEscapedSpace.size();
  }
  return out;
}

void AppendEscaped(std::string_view text, std::string* out) {
  for (char c : text) {
    if (c == ' ') {
      out->append(kEscapedSpace);
    } else {
      out->push_back(c);
    }
  }
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;  // Vocab::Finalize checked the digits
}

// A symbol is a byte range of the fragment; merged-away symbols have length 0. prev/next link
// the live symbols.
struct Symbol {
  uint32_t begin;
  uint32_t length;
  int32_t prev;
  int32_t next;
};

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t length;  // bytes of the merged text; a stale entry no longer matches
};

// Highest score first; on equal scores the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> SpmTokenizer::Create(Vocab vocab) {
  if (vocab.kind != VocabKind::kSpm) {
    return InvalidArgumentError(
        "SpmTokenizer needs a SentencePiece vocab (tokenizer.ggml.model "
        "= 'llama'), got '" +
        vocab.model + "'");
  }
  if (vocab.attrs.size() != vocab.size() || vocab.token_to_id.size() != vocab.size()) {
    return InvalidArgumentError("vocab is not finalized (call Vocab::Finalize)");
  }
  return std::unique_ptr<Tokenizer>(new SpmTokenizer(std::move(vocab)));
}

SpmTokenizer::SpmTokenizer(Vocab vocab)
    : Tokenizer(std::move(vocab)), partitioner_(vocab_), pieces_(vocab_.size()) {
  for (size_t i = 0; i < vocab_.size(); ++i) {
    const uint32_t attr = vocab_.attrs[i];
    const std::string& text = vocab_.tokens[i];
    if (attr & (token_attr::kUnknown | token_attr::kControl | token_attr::kUserDefined)) {
      pieces_[i] = text;
    } else if (attr & token_attr::kNormal) {
      pieces_[i] = UnescapeSpaces(text);
    } else if (attr & token_attr::kByte) {
      pieces_[i] = std::string(1, static_cast<char>(HexDigit(text[3]) * 16 + HexDigit(text[4])));
    }
    // Undefined and unused tokens render as nothing.
  }
}

std::vector<TokenId> SpmTokenizer::Encode(std::string_view text,
                                          const EncodeOptions& options) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 4);
  if (options.add_special && vocab_.add_bos) out.push_back(vocab_.bos_id);
  bool after_special = true;  // the first fragment counts as following a special token
  std::string escaped;
  for (const TextFragment& fragment : partitioner_.Partition(text, options.parse_special)) {
    if (fragment.is_token()) {
      out.push_back(fragment.token);
      after_special = true;
      continue;
    }
    escaped.clear();
    if (vocab_.add_space_prefix && after_special) escaped.append(kEscapedSpace);
    AppendEscaped(fragment.text, &escaped);
    EncodeEscaped(escaped, &out);
    after_special = false;
  }
  if (options.add_special && vocab_.add_eos) out.push_back(vocab_.eos_id);
  return out;
}

void SpmTokenizer::EncodeEscaped(std::string_view text, std::vector<TokenId>* out) const {
  if (text.empty()) return;
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t length =
        std::min(Utf8SequenceLength(static_cast<uint8_t>(text[pos])), text.size() - pos);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(length), index - 1,
                       pos + length == text.size() ? -1 : index + 1});
    pos += length;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t length = symbols[left].length + symbols[right].length;
    const TokenId id = vocab_.Find(text.substr(symbols[left].begin, length));
    if (id == kNoToken) return;
    queue.push({vocab_.scores[id], left, right, length});
  };
  for (size_t i = 1; i < symbols.size(); ++i) {
    try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }
  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Skip pairs whose symbols changed since they were queued.
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) {
      continue;
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].begin, symbols[i].length);
    const TokenId id = vocab_.Find(piece);
    if (id != kNoToken) {
      out->push_back(id);
      continue;
    }
    // Every merged symbol is a token, so this is a single character without one.
    for (char c : piece) {
      const TokenId byte_id = vocab_.byte_to_id[static_cast<uint8_t>(c)];
      if (byte_id != kNoToken) {
        out->push_back(byte_id);
      } else if (vocab_.unk_id != kNoToken) {
        out->push_back(vocab_.unk_id);
      }
    }
  }
}

std::string SpmTokenizer::TokenToPiece(TokenId id, bool render_special) const {
  if (!vocab_.IsValid(id)) return "";
  if (!render_special && (vocab_.attrs[id] & (token_attr::kUnknown | token_attr::kControl))) {
    return "";
  }
  return pieces_[id];
}

std::string SpmTokenizer::Decode(std::span<const TokenId> ids, bool render_special) const {
  std::string out;
  bool strip_space = vocab_.add_space_prefix;
  for (TokenId id : ids) {
    if (vocab_.IsValid(id) &&
        (render_special || !(vocab_.attrs[id] & (token_attr::kUnknown | token_attr::kControl)))) {
      std::string_view piece = pieces_[id];
      if (strip_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
      out.append(piece);
    }
    strip_space = false;
  }
  return out;
}

}  // namespace strata::tokenizer
