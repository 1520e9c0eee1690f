// Pre-tokenizers for byte-level BPE: split text into the words that BPE merges never cross.
//
// Each model family names its split regex in tokenizer.ggml.pre. Instead of a regex engine we
// hand-write each split, reproducing llama.cpp's (unicode_regex_split) results exactly,
// including where its hand-written fast paths differ from the regexes they stand for:
//   kGpt2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   kLlama3 (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   kQwen2  as kLlama3 but with \p{N} (one digit per word) instead of \p{N}{1,3}
//   kDefault four splits in turn, each one splitting the words of the one before into matches
//           and the text between them: [\p{P}\$\+<=>\^~\|]+, then kGpt2, then \p{N}+, then
//           [0-9][0-9][0-9] (what llama.cpp uses when tokenizer.ggml.pre is "default").
// Code point classes come from unicode.h.
//
// Pure functions: any thread may call them.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tokenizer {

enum class PreTokenizerKind {
  kDefault,
  kGpt2,
  kLlama3,
  kQwen2,
};

struct PreTokenizerSpec {
  PreTokenizerKind kind = PreTokenizerKind::kDefault;
  // When a whole word is itself a vocab token, emit it without running the merges (llama.cpp's
  // ignore_merges, set for the Llama 3 family).
  bool ignore_merges = false;
};

// The pre-tokenizer llama.cpp uses for a tokenizer.ggml.pre value; nullopt for values we do not
// support. Recognised: "default"; "gpt-2" and the names llama.cpp treats alike (phi-2, mpt,
// olmo, ...); "llama-bpe", "llama3", "llama-v3" and the other Llama 3 style names; "qwen2" and
// the names llama.cpp treats alike (deepseek-r1-qwen, stablelm2, ...).
std::optional<PreTokenizerSpec> LookupPreTokenizer(std::string_view pre);

// Human-readable name of a kind ("llama3"), for messages.
std::string_view PreTokenizerKindName(PreTokenizerKind kind);

// Splits `cps` into words. Returns the length in code points of each word, in order; the
// lengths are all > 0 and add up to cps.size() (empty input gives no words).
std::vector<size_t> SplitWords(PreTokenizerKind kind, std::span<const char32_t> cps);

// Convenience for tests and tools: decodes `text` (unicode.h's DecodeUtf8), splits it and
// returns each word re-encoded as UTF-8 (so invalid bytes come back as U+FFFD).
std::vector<std::string> SplitWordsUtf8(PreTokenizerKind kind, std::string_view text);

}  // namespace strata::tokenizer
