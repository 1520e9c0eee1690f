#include "strata/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "strata/tokenizer/pre_tokenizer.h"
#include "strata/tokenizer/special_tokens.h"
#include "strata/tokenizer/unicode.h"

namespace strata::tokenizer {
namespace {

constexpr uint32_t kRenderOnlyIfSpecial = token_attr::kUnknown | token_attr::kControl;

// Marks a merged symbol whose token id has not been looked up yet.
constexpr TokenId kUnknownId = -2;

// tokenizer.ggml.merges as lookup tables. llama.cpp keys its ranks on the pair of texts; we key
// on the pair of token ids where both sides are tokens (always, in a well-formed vocab) and keep
// the text key only for merges with a side that is not a token, so the common lookup hashes
// one integer. Both give the same rank for the same pair of texts.
struct MergeTable {
  struct Result {
    int32_t rank;
    TokenId merged;  // id of the concatenated text, kNoToken when it is not a token
  };
  std::unordered_map<uint64_t, Result> by_ids;
  // "left right" -> rank, for merges with a side that is not a token.
  std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>> by_text;

  static uint64_t Key(TokenId left, TokenId right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  static MergeTable Build(const Vocab& vocab) {
    MergeTable table;
    table.by_ids.reserve(vocab.merges.size());
    std::string merged;
    for (size_t i = 0; i < vocab.merges.size(); ++i) {
      const std::string_view merge = vocab.merges[i];
      // llama.cpp splits at the first space after the first character and keeps the first
      // rank of a repeated pair. Without such a space the pair is ("", ""), which never
      // matches: symbols are never empty.
      const size_t space = merge.find(' ', 1);
      if (space == std::string_view::npos) continue;
      const std::string_view left = merge.substr(0, space);
      const std::string_view right = merge.substr(space + 1);
      const auto rank = static_cast<int32_t>(i);
      const TokenId left_id = vocab.Find(left);
      const TokenId right_id = vocab.Find(right);
      if (left_id == kNoToken || right_id == kNoToken) {
        // Exact as a text key too: symbols are spelled in the byte alphabet, never with a
        // space, so "left right" cannot be formed by another split of the same text.
        table.by_text.try_emplace(std::string(merge), rank);
        continue;
      }
      merged.assign(left);
      merged.append(right);
      table.by_ids.try_emplace(Key(left_id, right_id), Result{rank, vocab.Find(merged)});
    }
    return table;
  }
};

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(Vocab vocab, PreTokenizerSpec pre)
      : Tokenizer(std::move(vocab)),
        pre_(pre),
        merges_(MergeTable::Build(vocab_)),
        partitioner_(vocab_) {
    const size_t n = vocab_.size();
    pieces_.reserve(n);
    for (TokenId id = 0; static_cast<size_t>(id) < n; ++id) pieces_.push_back(MakePiece(id));
    for (int b = 0; b < 256; ++b) {
      std::string spelled;
      AppendUtf8(ByteToUnicode(static_cast<uint8_t>(b)), &spelled);
      byte_char_[b] = spelled;
      byte_char_id_[b] = vocab_.Find(spelled);
    }
  }

  std::vector<TokenId> Encode(std::string_view text, const EncodeOptions& options) const override {
    std::vector<TokenId> ids;
    ids.reserve(text.size() / 3 + 2);
    if (options.add_special && vocab_.add_bos) ids.push_back(vocab_.bos_id);
    Scratch scratch;
    for (const TextFragment& fragment : partitioner_.Partition(text, options.parse_special)) {
      if (fragment.is_token()) {
        ids.push_back(fragment.token);
      } else {
        EncodeRaw(fragment.text, &scratch, &ids);
      }
    }
    if (options.add_special && vocab_.add_eos) ids.push_back(vocab_.eos_id);
    return ids;
  }

  std::string TokenToPiece(TokenId id, bool render_special) const override {
    if (!vocab_.IsValid(id)) return "";
    if (!render_special && (vocab_.attrs[id] & kRenderOnlyIfSpecial)) return "";
    return pieces_[id];
  }

  std::string Decode(std::span<const TokenId> ids, bool render_special) const override {
    std::string text;
    for (size_t i = 0; i < ids.size(); ++i) {
      std::string piece = TokenToPiece(ids[i], render_special);
      // llama_detokenize strips one leading space from the first piece when the vocab adds a
      // space prefix (tokenizer.ggml.add_space_prefix, off for BPE unless the file sets it).
      if (i == 0 && vocab_.add_space_prefix && !piece.empty() && piece[0] == ' ') {
        piece.erase(0, 1);
      }
      text += piece;
    }
    return text;
  }

 private:
  // One run of the word's bytes; starts as one byte (one character of the spelled word).
  struct Symbol {
    int32_t prev;
    int32_t next;
    uint32_t begin;  // offset in the spelled word
    uint32_t size;   // bytes of the spelled word; 0 once merged into the symbol on its left
    TokenId id;      // token of the symbol's text, kNoToken if none, kUnknownId if not looked up
  };

  struct Bigram {
    int32_t rank;
    int32_t left;
    int32_t right;
    uint32_t left_size;  // sizes when queued: a bigram is stale once either side changed
    uint32_t right_size;
    TokenId merged;  // as Symbol::id, for the merged text
  };

  // Lowest rank first, then leftmost (llama.cpp's llm_bigram_bpe::comparator).
  struct BigramAfter {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
  };

  // Buffers reused across the words of one Encode call.
  struct Scratch {
    std::string utf8;
    std::string word;
    std::string key;
    std::vector<Symbol> symbols;
    std::vector<Bigram> heap;
  };

  // The piece of `id` with render_special = true: what llama.cpp caches per token.
  std::string MakePiece(TokenId id) const {
    const uint32_t attr = vocab_.attrs[id];
    const std::string& text = vocab_.tokens[id];
    if (attr & (kRenderOnlyIfSpecial | token_attr::kUserDefined)) return text;
    if (attr & token_attr::kNormal) return ByteLevelToBytes(text);
    if (attr & token_attr::kByte) {
      // Vocab::Finalize checked the "<0xXX>" form.
      return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
    }
    return "";  // undefined and unused tokens render as nothing
  }

  // Maps a token text spelled in the byte alphabet back to its bytes. A code point outside the
  // alphabet gives llama.cpp's marker "[UNK_BYTE_0x<hex of its UTF-8><whole token text>]".
  static std::string ByteLevelToBytes(std::string_view text) {
    std::string bytes;
    bytes.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
      const char32_t cp = DecodeUtf8(text, &pos);
      if (const std::optional<uint8_t> byte = UnicodeToByte(cp)) {
        bytes.push_back(static_cast<char>(*byte));
        continue;
      }
      static constexpr char kHex[] = "0123456789abcdef";
      std::string utf8;
      AppendUtf8(cp, &utf8);
      bytes += "[UNK_BYTE_0x";
      for (const char c : utf8) {
        bytes.push_back(kHex[static_cast<uint8_t>(c) >> 4]);
        bytes.push_back(kHex[static_cast<uint8_t>(c) & 15]);
      }
      bytes.append(text);
      bytes.push_back(']');
    }
    return bytes;
  }

  // Steps 2-5 of the header comment for one fragment without special tokens.
  void EncodeRaw(std::string_view text, Scratch* scratch, std::vector<TokenId>* ids) const {
    const std::vector<char32_t> cps = DecodeUtf8(text);
    size_t begin = 0;
    for (const size_t length : SplitWords(pre_.kind, cps)) {
      scratch->utf8.clear();
      for (size_t i = begin; i < begin + length; ++i) AppendUtf8(cps[i], &scratch->utf8);
      begin += length;
      EncodeWord(scratch, ids);
    }
  }

  // Encodes the word whose UTF-8 bytes are in scratch->utf8.
  void EncodeWord(Scratch* scratch, std::vector<TokenId>* ids) const {
    std::string& word = scratch->word;
    std::vector<Symbol>& symbols = scratch->symbols;
    word.clear();
    symbols.clear();
    const auto num_bytes = static_cast<int32_t>(scratch->utf8.size());
    for (int32_t i = 0; i < num_bytes; ++i) {
      const auto byte = static_cast<uint8_t>(scratch->utf8[i]);
      // Each byte is one character of the spelled word, so one initial symbol (llama.cpp cuts
      // the spelled word at UTF-8 character boundaries).
      symbols.push_back({i - 1, i + 1 == num_bytes ? -1 : i + 1, static_cast<uint32_t>(word.size()),
                         static_cast<uint32_t>(byte_char_[byte].size()), byte_char_id_[byte]});
      word += byte_char_[byte];
    }
    if (pre_.ignore_merges) {
      if (const TokenId id = vocab_.Find(word); id != kNoToken) {
        ids->push_back(id);
        return;
      }
    }

    std::vector<Bigram>& heap = scratch->heap;
    heap.clear();
    const BigramAfter after;
    const auto text_of = [&](int32_t i) {
      return std::string_view(word).substr(symbols[i].begin, symbols[i].size);
    };
    const auto id_of = [&](int32_t i) {
      if (symbols[i].id == kUnknownId) symbols[i].id = vocab_.Find(text_of(i));
      return symbols[i].id;
    };
    const auto try_queue = [&](int32_t left, int32_t right) {
      if (left < 0 || right < 0) return;
      int32_t rank = -1;
      TokenId merged = kUnknownId;
      const TokenId left_id = id_of(left);
      const TokenId right_id = id_of(right);
      if (left_id != kNoToken && right_id != kNoToken) {
        const auto it = merges_.by_ids.find(MergeTable::Key(left_id, right_id));
        if (it == merges_.by_ids.end()) return;
        rank = it->second.rank;
        merged = it->second.merged;
      } else {
        if (merges_.by_text.empty()) return;
        scratch->key.assign(text_of(left));
        scratch->key.push_back(' ');
        scratch->key.append(text_of(right));
        const auto it = merges_.by_text.find(std::string_view(scratch->key));
        if (it == merges_.by_text.end()) return;
        rank = it->second;
      }
      heap.push_back({rank, left, right, symbols[left].size, symbols[right].size, merged});
      std::push_heap(heap.begin(), heap.end(), after);
    };
    for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_queue(i - 1, i);

    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), after);
      const Bigram bigram = heap.back();
      heap.pop_back();
      Symbol& left = symbols[bigram.left];
      Symbol& right = symbols[bigram.right];
      if (left.size == 0 || right.size == 0 || left.size != bigram.left_size ||
          right.size != bigram.right_size) {
        continue;
      }
      left.size += right.size;
      left.id = bigram.merged;
      right.size = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = bigram.left;
      try_queue(left.prev, bigram.left);
      try_queue(bigram.left, left.next);
    }

    // Symbol 0 is never merged away, and `next` links the survivors in order.
    for (int32_t i = 0; i >= 0; i = symbols[i].next) {
      if (const TokenId id = id_of(i); id != kNoToken) {
        ids->push_back(id);
        continue;
      }
      // Not a token: llama.cpp falls back to one token per byte of the spelled text, dropping
      // bytes that have none (in a byte-level vocab only printable ASCII survives this).
      for (const char byte : text_of(i)) {
        if (const TokenId id = vocab_.Find(std::string_view(&byte, 1)); id != kNoToken) {
          ids->push_back(id);
        }
      }
    }
  }

  PreTokenizerSpec pre_;
  MergeTable merges_;
  SpecialTokenPartitioner partitioner_;
  std::vector<std::string> pieces_;  // [vocab_size] TokenToPiece(id, render_special = true)
  // Each byte's character in the byte alphabet (UTF-8) and its token id (kNoToken if none).
  std::array<std::string, 256> byte_char_;
  std::array<TokenId, 256> byte_char_id_{};
};

std::string SupportedPreTokenizers() {
  return "default, gpt-2, llama-bpe (llama3), qwen2 and the names llama.cpp treats like them";
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> MakeBpeTokenizer(Vocab vocab) {
  if (vocab.kind != VocabKind::kBpe) {
    return InvalidArgumentError("tokenizer.ggml.model = '" + vocab.model +
                                "' is not a byte-level BPE vocab (expected 'gpt2')");
  }
  const std::optional<PreTokenizerSpec> pre = LookupPreTokenizer(vocab.pre);
  if (!pre.has_value()) {
    return UnimplementedError(
        "tokenizer.ggml.pre = '" + vocab.pre +
        "': this BPE pre-tokenizer is not supported (supported: " + SupportedPreTokenizers() + ")");
  }
  return std::unique_ptr<Tokenizer>(new BpeTokenizer(std::move(vocab), *pre));
}

}  // namespace strata::tokenizer
