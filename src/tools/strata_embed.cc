// strata-embed: sentence embeddings (or WordPiece token ids) from the command line.
//
//   strata-embed MODEL_DIR [flags] < texts > vectors
//       one text per input line; one JSON array per text out: its embedding (dimension floats,
//       %.9g, so float32 round-trips), or with --tokenize its token ids.
//   Flags:
//     --jsonl          input lines are JSON objects, {"text": "..."} or {"text_hex": "e4bd"}
//                      (any bytes); with --tokenize or --words a text that fails gives
//                      {"error": "..."}
//     --tokenize       token ids ([CLS] ... [SEP]) instead of embeddings
//     --words          the normalized, pre-tokenized words (JSON strings) instead
//     --max-tokens N   tokens per text, [CLS] and [SEP] included (default: the model folder's,
//                      see SentenceEncoderOptions)
//     --threads N      encoder threads (default: all cores)
//     --batch N        texts per Encode call (default 32)
//     --bench R        encode the input R times after a warm-up, print texts/s, no vectors
//     --pairs          input lines are pairs, {"a": "...", "b": "..."}; one JSON object out
//                      per pair: {"cosine": C, "guard": true|false, "vetoes": [RULE, ...]},
//                      C the dot product of the two embeddings (unit length, so their
//                      cosine), guard whether SemanticGuardAllows(a, b), vetoes every rule of
//                      the guard the pair breaks, in the guard's order ([] when allowed; names
//                      as GuardVetoName, see strata/embedding/semantic_guard.h). What the
//                      semantic cache checks, for bench/semantic_threshold.py.
// MODEL_DIR is a sentence-transformers folder (models/all-minilm-l6-v2 after scripts/setup).
// Exit codes: 0 done, 1 a model or text error (one line on stderr), 2 a bad flag.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "strata/common/tool_args.h"
#include "strata/embedding/semantic_guard.h"
#include "strata/embedding/sentence_encoder.h"

namespace {

using strata::embedding::SentenceEncoder;
using Json = nlohmann::json;

constexpr strata::ToolArgs kArgs("strata-embed", /*usage_exit_code=*/2);

struct Flags {
  std::string model_dir;
  bool jsonl = false;
  bool tokenize = false;
  bool words = false;
  bool pairs = false;
  int batch = 32;
  int bench_repeat = 0;
  strata::embedding::SentenceEncoderOptions options;
};

[[noreturn]] void Usage() {
  std::fprintf(stderr,
               "usage: strata-embed MODEL_DIR [--jsonl] [--tokenize | --words | --pairs] "
               "[--max-tokens N] [--threads N] [--batch N] [--bench R] < texts\n");
  std::exit(2);
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) kArgs.Fail(arg + " needs a value", 2);
      return argv[++i];
    };
    if (arg == "--jsonl") {
      flags.jsonl = true;
    } else if (arg == "--tokenize") {
      flags.tokenize = true;
    } else if (arg == "--words") {
      flags.words = true;
    } else if (arg == "--pairs") {
      flags.pairs = true;
    } else if (arg == "--max-tokens") {
      flags.options.max_tokens = static_cast<int>(kArgs.Int(arg, value(), 2));
    } else if (arg == "--threads") {
      flags.options.num_threads = static_cast<int>(kArgs.Int(arg, value(), 0));
    } else if (arg == "--batch") {
      flags.batch = static_cast<int>(kArgs.Int(arg, value(), 1));
    } else if (arg == "--bench") {
      flags.bench_repeat = static_cast<int>(kArgs.Int(arg, value(), 1));
    } else if (arg == "--help" || arg == "-h") {
      Usage();
    } else if (!arg.empty() && arg[0] == '-') {
      kArgs.Fail("unknown flag " + arg, 2);
    } else if (flags.model_dir.empty()) {
      flags.model_dir = arg;
    } else {
      Usage();
    }
  }
  if (flags.model_dir.empty()) Usage();
  if (flags.pairs && (flags.jsonl || flags.tokenize || flags.words || flags.bench_repeat > 0)) {
    kArgs.Fail(
        "--pairs reads its own JSON lines and takes no --jsonl, --tokenize, --words or "
        "--bench",
        2);
  }
  return flags;
}

std::optional<std::string> FromHex(const std::string& hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    unsigned byte = 0;
    if (std::sscanf(hex.c_str() + i, "%2x", &byte) != 1) return std::nullopt;
    out += static_cast<char>(byte);
  }
  return out;
}

// The text of one --jsonl line, or an error message.
std::string ParseJsonLine(const std::string& line, std::string* error) {
  const Json request = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (request.is_object() && request.contains("text") && request["text"].is_string()) {
    return request["text"].get<std::string>();
  }
  if (request.is_object() && request.contains("text_hex") && request["text_hex"].is_string()) {
    if (auto bytes = FromHex(request["text_hex"].get<std::string>())) return *bytes;
  }
  *error = "expected {\"text\": STRING} or {\"text_hex\": HEX}";
  return {};
}

void PrintVector(const std::vector<float>& v) {
  std::string out = "[";
  char buf[32];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof(buf), i == 0 ? "%.9g" : ",%.9g", v[i]);
    out += buf;
  }
  out += "]\n";
  std::fputs(out.c_str(), stdout);
}

// One JSON line per text: its token ids (with `words`: its normalized words), or
// {"error": "..."} for a line that was not a text or a text that is not UTF-8.
int Tokenize(SentenceEncoder& encoder, const std::vector<std::string>& texts,
             const std::vector<std::string>& errors, bool words) {
  const auto& tokenizer = encoder.tokenizer();
  for (size_t i = 0; i < texts.size(); ++i) {
    auto ids =
        errors[i].empty()
            ? tokenizer.Encode(texts[i], encoder.max_tokens())
            : strata::StatusOr<std::vector<int32_t>>(strata::InvalidArgumentError(errors[i]));
    Json out;
    if (!ids.ok()) {
      out = Json{{"error", ids.status().ToString()}};
    } else if (words) {
      out = tokenizer.NormalizedWords(texts[i]);
    } else {
      out = *ids;
    }
    // ASCII only (\uXXXX escapes), so no line separator of any kind appears inside a line.
    std::printf("%s\n", out.dump(-1, ' ', /*ensure_ascii=*/true).c_str());
  }
  return 0;
}

int Embed(SentenceEncoder& encoder, const std::vector<std::string>& texts, int batch) {
  for (size_t begin = 0; begin < texts.size(); begin += batch) {
    const size_t n = std::min(texts.size() - begin, static_cast<size_t>(batch));
    auto embeddings = encoder.Encode(std::span(texts).subspan(begin, n));
    if (!embeddings.ok()) kArgs.Fail(embeddings.status().ToString());
    for (const std::vector<float>& e : *embeddings) PrintVector(e);
  }
  return 0;
}

// --pairs: each non-blank line's two texts, embedded once per distinct text, then per pair the
// cosine of the embeddings and the semantic guard's verdict.
int Pairs(SentenceEncoder& encoder, const std::vector<std::string>& lines, int batch) {
  std::vector<std::string> texts;
  std::unordered_map<std::string, size_t> index;
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t\r") == std::string::npos) continue;  // blank
    const Json pair = Json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (!pair.is_object() || !pair.contains("a") || !pair["a"].is_string() || !pair.contains("b") ||
        !pair["b"].is_string()) {
      kArgs.Fail("line " + std::to_string(i + 1) + ": expected {\"a\": STRING, \"b\": STRING}");
    }
    size_t ids[2];
    for (int side = 0; side < 2; ++side) {
      std::string text = pair[side == 0 ? "a" : "b"].get<std::string>();
      const auto [it, added] = index.try_emplace(text, texts.size());
      if (added) texts.push_back(std::move(text));
      ids[side] = it->second;
    }
    pairs.emplace_back(ids[0], ids[1]);
  }
  std::vector<std::vector<float>> embeddings;
  for (size_t begin = 0; begin < texts.size(); begin += batch) {
    const size_t n = std::min(texts.size() - begin, static_cast<size_t>(batch));
    auto part = encoder.Encode(std::span(texts).subspan(begin, n));
    if (!part.ok()) kArgs.Fail(part.status().ToString());
    for (std::vector<float>& e : *part) embeddings.push_back(std::move(e));
  }
  for (const auto& [a, b] : pairs) {
    double cosine = 0;
    for (size_t k = 0; k < embeddings[a].size(); ++k) {
      cosine += static_cast<double>(embeddings[a][k]) * embeddings[b][k];
    }
    // What serving checks (SemanticGuardAllows), and every rule the pair breaks.
    const bool allowed = strata::embedding::SemanticGuardAllows(texts[a], texts[b]);
    const uint32_t broken = strata::embedding::SemanticGuardVetoes(texts[a], texts[b]);
    std::string vetoes;
    for (int rule = 1; rule < 32; ++rule) {
      if ((broken >> rule & 1) == 0) continue;
      vetoes += vetoes.empty() ? "\"" : ", \"";
      vetoes += strata::embedding::GuardVetoName(static_cast<strata::embedding::GuardVeto>(rule));
      vetoes += "\"";
    }
    std::printf("{\"cosine\": %.9g, \"guard\": %s, \"vetoes\": [%s]}\n", cosine,
                allowed ? "true" : "false", vetoes.c_str());
  }
  return 0;
}

int Bench(SentenceEncoder& encoder, const std::vector<std::string>& texts, int repeat) {
  if (!encoder.Encode(texts).ok()) kArgs.Fail("the texts do not encode");  // warm-up
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < repeat; ++r) {
    if (!encoder.Encode(texts).ok()) kArgs.Fail("the texts do not encode");
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%zu texts x %d in %.3f s: %.1f texts/s\n", texts.size(), repeat, seconds,
              static_cast<double>(texts.size()) * repeat / seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  auto encoder = SentenceEncoder::Load(flags.model_dir, flags.options);
  if (!encoder.ok()) kArgs.Fail(encoder.status().ToString());
  std::vector<std::string> texts;
  std::vector<std::string> errors;
  std::string line;
  if (flags.pairs) {
    std::vector<std::string> lines;
    while (std::getline(std::cin, line)) lines.push_back(line);
    return Pairs(**encoder, lines, flags.batch);
  }
  while (std::getline(std::cin, line)) {
    std::string error;
    texts.push_back(flags.jsonl ? ParseJsonLine(line, &error) : line);
    errors.push_back(error);
  }
  if (flags.tokenize || flags.words) return Tokenize(**encoder, texts, errors, flags.words);
  for (size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i].empty()) kArgs.Fail("line " + std::to_string(i + 1) + ": " + errors[i]);
  }
  if (flags.bench_repeat > 0) return Bench(**encoder, texts, flags.bench_repeat);
  return Embed(**encoder, texts, flags.batch);
}
