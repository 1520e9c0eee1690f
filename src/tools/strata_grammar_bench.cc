// strata-grammar-bench: how long constrained decoding's token masks take on a real vocabulary.
//
//   strata-grammar-bench --model F.gguf (--json-schema FILE | --regex R | --gbnf FILE)
//                        --text FILE [--passes N] [--whitespace N] [--mask-cache-mib N]
//
// Loads the model's vocabulary (token bytes = TokenToPiece(id, false); control, unused and
// unknown tokens never allowed; end tokens = the vocab's end-of-generation ids), compiles the
// grammar (prints the time), tokenizes the text (a valid output), then walks it token by token
// N times (default 2), each pass with a fresh matcher on the same CompiledGrammar, so the
// second pass runs on the warm shared cache. Each step fills the mask, checks the text's token
// is allowed, and accepts it; the end token must be allowed at the end. Prints mean / p50 /
// p99 / max of FillNextTokenBitmask and of AcceptToken per pass, in microseconds.
// --mask-cache-mib 0 turns the whole-mask cache off, so warm passes measure the per-position
// (adaptive) cache alone: the cost of a stack configuration not seen before.
// Exit codes: 0 done, 1 a load/compile error or a token the mask refused, 2 a bad flag.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "strata/grammar/compiled_grammar.h"
#include "strata/grammar/gbnf.h"
#include "strata/grammar/grammar_matcher.h"
#include "strata/grammar/json_schema.h"
#include "strata/grammar/regex.h"
#include "strata/grammar/token_vocabulary.h"
#include "strata/model/gguf_file.h"
#include "strata/tokenizer/tokenizer.h"
#include "strata/tokenizer/vocab.h"

namespace {

using Clock = std::chrono::steady_clock;

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

void PrintStats(const char* what, std::vector<double> us) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double u : us) sum += u;
  auto pct = [&](double p) {
    return us[std::min(us.size() - 1, static_cast<size_t>(p * us.size()))];
  };
  std::printf("  %-22s mean %9.1f us  p50 %9.1f  p99 %9.1f  max %9.1f  (n=%zu)\n", what,
              sum / us.size(), pct(0.5), pct(0.99), us.back(), us.size());
}

int Usage(const char* msg) {
  std::fprintf(stderr,
               "strata-grammar-bench: %s\nusage: strata-grammar-bench --model F.gguf "
               "(--json-schema FILE | --regex R | --gbnf FILE) --text FILE [--passes N] "
               "[--whitespace N] [--mask-cache-mib N]\n",
               msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  namespace g = strata::grammar;
  std::string model, schema_file, regex, gbnf_file, text_file;
  int passes = 2, whitespace = 0, mask_cache_mib = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage(("missing value for " + flag).c_str());
    const std::string value = argv[++i];
    if (flag == "--model") {
      model = value;
    } else if (flag == "--json-schema") {
      schema_file = value;
    } else if (flag == "--regex") {
      regex = value;
    } else if (flag == "--gbnf") {
      gbnf_file = value;
    } else if (flag == "--text") {
      text_file = value;
    } else if (flag == "--passes") {
      passes = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--mask-cache-mib") {
      mask_cache_mib = std::max(0, std::atoi(value.c_str()));
    } else if (flag == "--whitespace") {
      whitespace = std::atoi(value.c_str());
    } else {
      return Usage(("unknown flag " + flag).c_str());
    }
  }
  if (model.empty() || text_file.empty()) return Usage("--model and --text are required");
  if (schema_file.empty() + regex.empty() + gbnf_file.empty() != 2) {
    return Usage("give exactly one of --json-schema, --regex, --gbnf");
  }
  std::string text;
  if (!ReadFile(text_file, &text)) return Usage(("cannot read " + text_file).c_str());

  auto file = strata::model::GgufFile::Open(model);
  if (!file.ok()) {
    std::fprintf(stderr, "strata-grammar-bench: %s\n", file.status().ToString().c_str());
    return 1;
  }
  auto tok = strata::tokenizer::Tokenizer::FromGguf(*file);
  if (!tok.ok()) {
    std::fprintf(stderr, "strata-grammar-bench: %s\n", tok.status().ToString().c_str());
    return 1;
  }
  const strata::tokenizer::Vocab& v = (*tok)->vocab();
  const auto t0 = Clock::now();
  std::vector<std::string> bytes(v.tokens.size());
  std::vector<bool> never(v.tokens.size(), false);
  using strata::tokenizer::TokenType;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const TokenType type = v.types[id];
    never[id] =
        type == TokenType::kControl || type == TokenType::kUnused || type == TokenType::kUnknown;
    if (!never[id]) bytes[id] = (*tok)->TokenToPiece(static_cast<int32_t>(id), false);
  }
  auto vocab =
      g::TokenVocabulary::Build(std::move(bytes), std::move(never), v.EndOfGenerationIds());
  if (!vocab.ok()) {
    std::fprintf(stderr, "strata-grammar-bench: %s\n", vocab.status().ToString().c_str());
    return 1;
  }
  const auto t1 = Clock::now();
  std::printf("vocabulary: %d tokens, %zu matchable, %zu end tokens, built in %.1f ms\n",
              (*vocab)->size(), (*vocab)->sorted_ids().size(), (*vocab)->end_token_ids().size(),
              std::chrono::duration<double, std::milli>(t1 - t0).count());

  strata::StatusOr<g::Grammar> grammar = strata::InvalidArgumentError("no grammar");
  if (!schema_file.empty()) {
    std::string schema;
    if (!ReadFile(schema_file, &schema)) return Usage(("cannot read " + schema_file).c_str());
    g::JsonSchemaOptions options;
    options.max_whitespace = whitespace;
    grammar = g::JsonSchemaToGrammar(schema, options);
  } else if (!regex.empty()) {
    grammar = g::RegexToGrammar(regex);
  } else {
    std::string gbnf;
    if (!ReadFile(gbnf_file, &gbnf)) return Usage(("cannot read " + gbnf_file).c_str());
    grammar = g::ParseGbnf(gbnf);
  }
  if (!grammar.ok()) {
    std::fprintf(stderr, "strata-grammar-bench: %s\n", grammar.status().ToString().c_str());
    return 1;
  }
  const auto t2 = Clock::now();
  g::CompileOptions compile_options;
  compile_options.mask_cache_bytes = static_cast<size_t>(mask_cache_mib) << 20;
  auto compiled = g::CompiledGrammar::Compile(*grammar, *vocab, compile_options);
  if (!compiled.ok()) {
    std::fprintf(stderr, "strata-grammar-bench: %s\n", compiled.status().ToString().c_str());
    return 1;
  }
  const auto t3 = Clock::now();
  std::printf("grammar: %zu rules, %d automaton states, compiled in %.2f ms\n",
              grammar->rules.size(), (*compiled)->num_states(),
              std::chrono::duration<double, std::milli>(t3 - t2).count());

  strata::tokenizer::EncodeOptions encode;
  encode.add_special = false;
  const std::vector<int32_t> ids = (*tok)->Encode(text, encode);
  std::printf("text: %zu bytes, %zu tokens\n", text.size(), ids.size());
  std::vector<uint32_t> mask((*vocab)->bitmask_words());
  for (int pass = 1; pass <= passes; ++pass) {
    g::GrammarMatcher matcher(*compiled);
    std::vector<double> fill_us, accept_us;
    for (size_t i = 0; i <= ids.size(); ++i) {
      const auto a = Clock::now();
      matcher.FillNextTokenBitmask(mask);
      const auto b = Clock::now();
      fill_us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
      const int32_t id = i < ids.size() ? ids[i] : (*vocab)->end_token_ids().front();
      if (!((mask[id >> 5] >> (id & 31)) & 1)) {
        std::fprintf(stderr, "strata-grammar-bench: token %zu (id %d, '%s') is not allowed\n", i,
                     id, (*vocab)->token_bytes(id).c_str());
        return 1;
      }
      const auto c = Clock::now();
      const bool ok = matcher.AcceptToken(id);
      const auto d = Clock::now();
      accept_us.push_back(std::chrono::duration<double, std::micro>(d - c).count());
      if (!ok) {
        std::fprintf(stderr, "strata-grammar-bench: token %zu (id %d) refused\n", i, id);
        return 1;
      }
    }
    std::printf("pass %d (%s cache):\n", pass, pass == 1 ? "cold" : "warm");
    PrintStats("FillNextTokenBitmask", fill_us);
    PrintStats("AcceptToken", accept_us);
  }
  const g::CompiledGrammar::CacheStats s = (*compiled)->cache_stats();
  std::printf("cache: %lld positions (%.1f MiB), %lld masks (%.1f MiB), %lld hits, %lld misses\n",
              static_cast<long long>(s.position_entries), s.position_bytes / 1048576.0,
              static_cast<long long>(s.mask_entries), s.mask_bytes / 1048576.0,
              static_cast<long long>(s.mask_hits), static_cast<long long>(s.mask_misses));
  return 0;
}
