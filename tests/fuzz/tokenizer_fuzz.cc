// libFuzzer target: encodes, decodes and stream-decodes arbitrary bytes with small fixed SPM and
// byte-level BPE tokenizers built in memory, and checks the invariants that hold for any input:
//   - nothing crashes, every id is in the vocab;
//   - SPM round trip: Decode(Encode(s)) == s for valid UTF-8, except that a literal U+2581
//     comes back as a space;
//   - BPE round trip for valid UTF-8;
//   - IncrementalDetokenizer: every delta is valid UTF-8 and deltas + Flush equal
//     ReplaceInvalidUtf8(Decode(ids));
//   - the special-token partition covers the input exactly.
// The first input byte selects the options (add_special, parse_special, render_special, which
// SPM variant); the rest is the text. Decoding arbitrary ids is exercised too, reading the text
// as little-endian 16-bit ids.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/tokenizer/bpe_tokenizer.h"
#include "strata/tokenizer/incremental_detokenizer.h"
#include "strata/tokenizer/special_tokens.h"
#include "strata/tokenizer/spm_tokenizer.h"
#include "strata/tokenizer/tokenizer.h"
#include "strata/tokenizer/vocab.h"

namespace strata::tokenizer {
namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "tokenizer_fuzz: invariant violated: %s\n", what);
    std::abort();
  }
}

void AddToken(Vocab* v, std::string text, float score, TokenType type) {
  v->tokens.push_back(std::move(text));
  v->scores.push_back(score);
  v->types.push_back(type);
}

Vocab SpmVocab(bool add_space_prefix) {
  Vocab v;
  v.kind = VocabKind::kSpm;
  v.model = "llama";
  AddToken(&v, "<unk>", 0, TokenType::kUnknown);
  AddToken(&v, "<s>", 0, TokenType::kControl);
  AddToken(&v, "</s>", 0, TokenType::kControl);
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    AddToken(&v, std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, TokenType::kByte);
  }
  const std::string sp = "\xe2\x96\x81";
  const char* pieces[] = {"a",
                          "b",
                          "c",
                          "e",
                          "h",
                          "l",
                          "o",
                          "t",
                          "ab",
                          "abc",
                          "he",
                          "ll",
                          "llo",
                          "hello",
                          "th",
                          "the",
                          "\xc3\xa9",
                          "\xe4\xbd\xa0",
                          "\xe5\xa5\xbd",
                          "\xe4\xbd\xa0\xe5\xa5\xbd",
                          "<",
                          ">",
                          "0x",
                          "<0"};
  float score = -1;
  for (const char* p : pieces) AddToken(&v, p, score -= 0.5f, TokenType::kNormal);
  AddToken(&v, sp, -2, TokenType::kNormal);
  AddToken(&v, sp + "the", -3, TokenType::kNormal);
  AddToken(&v, sp + "hello", -3, TokenType::kNormal);
  AddToken(&v, sp + sp, -4, TokenType::kNormal);
  AddToken(&v, "<start_of_turn>", 0, TokenType::kControl);
  AddToken(&v, "<end_of_turn>", 0, TokenType::kControl);
  AddToken(&v, "\n\n", 0, TokenType::kUserDefined);
  AddToken(&v, "  ", 0, TokenType::kUserDefined);
  AddToken(&v, "<td>", 0, TokenType::kUserDefined);
  AddToken(&v, "<unused0>", 0, TokenType::kControl);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_bos = true;
  v.add_eos = add_space_prefix;  // exercise both
  v.add_space_prefix = add_space_prefix;
  Require(v.Finalize().ok(), "SPM fuzz vocab finalizes");
  return v;
}

// GPT-2's reversible byte -> printable character map (Radford et al. 2019, encoder.py).
std::string ByteLevelChar(int byte) {
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  int cp = byte;
  if (!printable(byte)) {
    int n = 0;
    for (int b = 0; b < byte; ++b) n += !printable(b);
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

Vocab BpeVocab() {
  Vocab v;
  v.kind = VocabKind::kBpe;
  v.model = "gpt2";
  v.pre = "default";
  for (int b = 0; b < 256; ++b) AddToken(&v, ByteLevelChar(b), 0, TokenType::kNormal);
  const std::string g = ByteLevelChar(' ');  // "Ġ"
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"},      {"he", "ll"}, {"hell", "o"}, {g, "t"},
      {"h", "e"}, {g + "t", "he"}, {"a", "b"},   {g, g}};
  for (const auto& [l, r] : merges) {
    const std::string joined = l + r;
    bool exists = false;
    for (const std::string& t : v.tokens) exists = exists || t == joined;
    if (!exists) AddToken(&v, joined, 0, TokenType::kNormal);
    v.merges.push_back(l + " " + r);
  }
  AddToken(&v, "<|endoftext|>", 0, TokenType::kControl);
  AddToken(&v, "<tool>", 0, TokenType::kUserDefined);
  v.bos_id = static_cast<TokenId>(v.tokens.size() - 2);
  v.eos_id = v.bos_id;
  v.add_bos = true;
  Require(v.Finalize().ok(), "BPE fuzz vocab finalizes");
  return v;
}

struct Fixture {
  std::unique_ptr<Tokenizer> spm[2];
  std::unique_ptr<SpecialTokenPartitioner> partitioner;
  std::unique_ptr<Tokenizer> bpe;
};

const Fixture& GetFixture() {
  static const Fixture* fixture = [] {
    auto* f = new Fixture();
    for (int i = 0; i < 2; ++i) {
      auto t = SpmTokenizer::Create(SpmVocab(i == 1));
      Require(t.ok(), "SPM fuzz tokenizer builds");
      f->spm[i] = std::move(t).value();
    }
    f->partitioner = std::make_unique<SpecialTokenPartitioner>(f->spm[0]->vocab());
    auto bpe = MakeBpeTokenizer(BpeVocab());
    Require(bpe.ok(), "BPE fuzz tokenizer builds");
    f->bpe = std::move(bpe).value();
    return f;
  }();
  return *fixture;
}

bool IsValidUtf8(std::string_view s) { return ReplaceInvalidUtf8(s) == s; }

void CheckStream(const Tokenizer& t, const std::vector<TokenId>& ids, bool render_special) {
  IncrementalDetokenizer d(t, render_special);
  std::string streamed;
  for (TokenId id : ids) {
    const std::string delta = d.Push(id);
    Require(IsValidUtf8(delta), "stream deltas are valid UTF-8");
    streamed += delta;
  }
  streamed += d.Flush();
  Require(streamed == ReplaceInvalidUtf8(t.Decode(ids, render_special)),
          "stream equals the sanitized decode");
}

void CheckTokenizer(const Tokenizer& t, std::string_view text, const EncodeOptions& options,
                    bool render_special, bool expect_round_trip) {
  const std::vector<TokenId> ids = t.Encode(text, options);
  for (TokenId id : ids) Require(t.vocab().IsValid(id), "encoded ids are in the vocab");
  const std::string decoded = t.Decode(ids, render_special);
  CheckStream(t, ids, render_special);
  if (expect_round_trip) Require(decoded == text, "decode(encode(text)) == text");
}

std::string UnescapeSpaceMarks(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 3, "\xe2\x96\x81") == 0) {
      out += ' ';
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace
}  // namespace strata::tokenizer

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata::tokenizer;  // NOLINT(build/namespaces)
  const Fixture& f = GetFixture();
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  EncodeOptions options;
  options.add_special = (flags & 1) != 0;
  options.parse_special = (flags & 2) != 0;
  const bool render_special = (flags & 4) != 0;
  const int variant = (flags >> 3) & 1;

  // Partition covers the input: raw fragments and token texts, in order, rebuild it.
  {
    const Vocab& vocab = f.spm[0]->vocab();
    std::string rebuilt;
    for (const TextFragment& fragment : f.partitioner->Partition(text, options.parse_special)) {
      Require(fragment.is_token() ? vocab.IsValid(fragment.token) : !fragment.text.empty(),
              "fragments are tokens or non-empty text");
      rebuilt +=
          fragment.is_token() ? std::string_view(vocab.tokens[fragment.token]) : fragment.text;
    }
    Require(rebuilt == text, "partition covers the input");
  }

  // SPM: with specials parsed they are rendered back only when render_special; without, the
  // fuzz vocab offers no merge path into a control token, so plain text always comes back.
  // A leading space is dropped by Decode when add_space_prefix added one.
  const Tokenizer& spm = *f.spm[variant];
  // Only for valid UTF-8: byte fallback of an invalid sequence can split an escaped space.
  const bool spm_round_trip =
      options.parse_special == render_special && !options.add_special && IsValidUtf8(text);
  const std::string expected = UnescapeSpaceMarks(text);
  CheckTokenizer(spm, text, options, render_special, false);
  if (spm_round_trip && variant == 0) {
    Require(spm.Decode(spm.Encode(text, options), render_special) == expected,
            "SPM decode(encode(text)) == text");
  }

  const bool bpe_round_trip =
      !options.add_special && options.parse_special == render_special && IsValidUtf8(text);
  CheckTokenizer(*f.bpe, text, options, render_special, bpe_round_trip);

  // Arbitrary ids (some out of range) decode and stream without trouble.
  std::vector<TokenId> ids;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    ids.push_back(static_cast<TokenId>(static_cast<uint8_t>(text[i]) |
                                       (static_cast<uint8_t>(text[i + 1]) << 8)) -
                  8);
  }
  CheckStream(spm, ids, render_special);
  CheckStream(*f.bpe, ids, render_special);
  return 0;
}
