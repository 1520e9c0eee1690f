#include "strata/server/output_constraints.h"

#include <system_error>
#include <utility>
#include <vector>

#include "strata/common/utf8.h"
#include "strata/grammar/compiled_grammar.h"
#include "strata/grammar/gbnf.h"
#include "strata/grammar/grammar_matcher.h"
#include "strata/grammar/json_schema.h"
#include "strata/grammar/regex.h"
#include "strata/grammar/token_vocabulary.h"

namespace strata::server {
namespace {

// One request's constraint: its position in the shared compiled grammar.
class GrammarConstraint final : public engine::TokenConstraint {
 public:
  explicit GrammarConstraint(std::shared_ptr<const grammar::CompiledGrammar> compiled)
      : matcher_(std::move(compiled)) {}

  void FillAllowed(std::span<uint32_t> allowed) override { matcher_.FillNextTokenBitmask(allowed); }
  bool Accept(int32_t token) override { return matcher_.AcceptToken(token); }
  bool AllowedIsCheap() override { return matcher_.NextMaskIsCached(); }

 private:
  grammar::GrammarMatcher matcher_;
};

std::string_view FieldOf(OutputFormatInput::Kind kind) {
  switch (kind) {
    case OutputFormatInput::Kind::kJsonSchema:
      return "output_format.json_schema";
    case OutputFormatInput::Kind::kRegex:
      return "output_format.regex";
    case OutputFormatInput::Kind::kGrammar:
      return "output_format.grammar";
    case OutputFormatInput::Kind::kChoice:
      return "output_format.choice";
    default:
      return "output_format";
  }
}

// The cache key: kind, strictness and the text (or the choices, length-prefixed).
std::string KeyOf(const OutputFormatInput& format) {
  std::string key;
  key += static_cast<char>('0' + static_cast<int>(format.kind));
  key += format.strict ? 's' : 'n';
  key += format.text;
  for (const std::string& choice : format.choices) {
    key += '\0';
    key += std::to_string(choice.size());
    key += ':';
    key += choice;
  }
  return key;
}

StatusOr<grammar::Grammar> GrammarOf(const OutputFormatInput& format) {
  switch (format.kind) {
    case OutputFormatInput::Kind::kJsonObject:
      return grammar::AnyJsonObjectGrammar();
    case OutputFormatInput::Kind::kJsonSchema: {
      grammar::JsonSchemaOptions options;
      options.strict = format.strict;
      return grammar::JsonSchemaToGrammar(format.text, options);
    }
    case OutputFormatInput::Kind::kRegex:
      return grammar::RegexToGrammar(format.text);
    case OutputFormatInput::Kind::kGrammar:
      return grammar::ParseGbnf(format.text);
    case OutputFormatInput::Kind::kChoice:
      return grammar::ChoiceGrammar(format.choices);
    case OutputFormatInput::Kind::kNone:
      break;
  }
  return InternalError("no grammar for a free-text format");
}

}  // namespace

OutputConstraints::OutputConstraints(const tokenizer::Tokenizer* tokenizer, size_t max_compiled)
    : tokenizer_(tokenizer), max_compiled_(max_compiled < 1 ? 1 : max_compiled) {}

OutputConstraints::~OutputConstraints() {
  if (builder_.joinable()) builder_.join();
}

void OutputConstraints::BuildVocabularyInBackground() {
  if (builder_.joinable() || vocabulary_built_.load()) return;
  try {
    builder_ = std::thread([this] { (void)Vocabulary(); });
  } catch (const std::system_error&) {
    // No thread to be had: the first structured request builds it.
  }
}

StatusOr<std::shared_ptr<const grammar::TokenVocabulary>> OutputConstraints::Vocabulary() {
  std::call_once(vocabulary_once_, [this] {
    const tokenizer::Vocab& vocab = tokenizer_->vocab();
    const size_t n = vocab.tokens.size();
    std::vector<std::string> bytes(n);
    std::vector<bool> never(n, false);
    for (size_t id = 0; id < n; ++id) {
      const tokenizer::TokenType type = vocab.types[id];
      never[id] = type == tokenizer::TokenType::kControl ||
                  type == tokenizer::TokenType::kUnknown || type == tokenizer::TokenType::kUnused;
      if (!never[id]) bytes[id] = tokenizer_->TokenToPiece(static_cast<int32_t>(id), false);
    }
    std::vector<int32_t> ends = vocab.EndOfGenerationIds();
    vocabulary_ =
        grammar::TokenVocabulary::Build(std::move(bytes), std::move(never), std::move(ends));
    vocabulary_built_.store(true);
  });
  return vocabulary_;
}

StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> OutputConstraints::Compiled(
    const OutputFormatInput& format) {
  const std::string key = KeyOf(format);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  // Compiled outside the lock: two requests with a new format may both compile it.
  const std::string_view field = FieldOf(format.kind);
  size_t bad = 0;
  if (!IsValidUtf8(format.text, &bad)) {
    return InvalidArgumentError(std::string(field) + " must be valid UTF-8 (invalid byte at " +
                                std::to_string(bad) + ")");
  }
  for (size_t i = 0; i < format.choices.size(); ++i) {
    if (!IsValidUtf8(format.choices[i], &bad)) {
      return InvalidArgumentError(std::string(field) + "[" + std::to_string(i) +
                                  "] must be valid UTF-8 (invalid byte at " + std::to_string(bad) +
                                  ")");
    }
  }
  // The grammar module's messages may quote the input; they go back in statuses and JSON.
  StatusOr<grammar::Grammar> g = GrammarOf(format);
  if (!g.ok()) {
    return InvalidArgumentError(std::string(field) + ": " + ToValidUtf8(g.status().message()));
  }
  StatusOr<std::shared_ptr<const grammar::TokenVocabulary>> vocabulary = Vocabulary();
  if (!vocabulary.ok()) return vocabulary.status();
  StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> compiled =
      grammar::CompiledGrammar::Compile(*g, *vocabulary);
  if (!compiled.ok()) {
    return InvalidArgumentError(std::string(field) + ": " +
                                ToValidUtf8(compiled.status().message()));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++compiled_total_;
  if (index_.find(key) == index_.end()) {
    lru_.emplace_front(key, *compiled);
    index_[key] = lru_.begin();
    while (lru_.size() > max_compiled_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  return *compiled;
}

StatusOr<std::shared_ptr<engine::TokenConstraint>> OutputConstraints::For(
    const OutputFormatInput& format) {
  if (format.kind == OutputFormatInput::Kind::kNone) {
    return std::shared_ptr<engine::TokenConstraint>();
  }
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const grammar::CompiledGrammar> compiled,
                          Compiled(format));
  return std::shared_ptr<engine::TokenConstraint>(
      std::make_shared<GrammarConstraint>(std::move(compiled)));
}

int64_t OutputConstraints::compiled_total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return compiled_total_;
}

}  // namespace strata::server
