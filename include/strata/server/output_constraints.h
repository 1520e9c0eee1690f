// OutputConstraints: the structured-output formats of requests (OutputFormatInput) as
// engine::TokenConstraints over one model's vocabulary.
//
// A format is compiled by the grammar module (JSON Schema, regular expression, GBNF grammar,
// choice list, any JSON object) against the model's vocabulary as the grammar module sees it:
// every token's output bytes (TokenToPiece), control/unknown/unused tokens never allowed, the
// model's end-of-generation tokens allowed exactly where the format may end. The vocabulary (a
// pass over it, ~0.1 s for 262k tokens) is built by BuildVocabularyInBackground, which the server
// calls at start-up, or else by the first structured request. Compiled formats are kept in a
// small LRU keyed by the format, so that requests with the same format share one CompiledGrammar
// and its token-mask caches.
//
// Thread rules: any thread (frontend threads translate requests concurrently).
#pragma once

#include <atomic>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "strata/common/status.h"
#include "strata/engine/token_constraint.h"
#include "strata/server/generation_input.h"
#include "strata/tokenizer/tokenizer.h"

namespace strata::grammar {
class CompiledGrammar;
class TokenVocabulary;
}  // namespace strata::grammar

namespace strata::server {

class OutputConstraints {
 public:
  // `tokenizer` must outlive this; `max_compiled` >= 1 formats are kept compiled.
  explicit OutputConstraints(const tokenizer::Tokenizer* tokenizer, size_t max_compiled = 64);
  ~OutputConstraints();

  // A fresh constraint (one per request) for `format`; null for Kind::kNone. INVALID_ARGUMENT
  // naming the field and the problem ("output_format.json_schema: /properties/age: ...") for a
  // format that does not compile or is over the grammar module's limits.
  StatusOr<std::shared_ptr<engine::TokenConstraint>> For(const OutputFormatInput& format);

  // Starts building the vocabulary on a thread of its own (joined by the destructor), so that the
  // first structured request does not pay for it; one that comes sooner waits for the rest of
  // the build. Call at most once. Without it the first structured request builds it.
  void BuildVocabularyInBackground();
  // Whether the vocabulary is built (by either), for tests.
  bool vocabulary_built() const { return vocabulary_built_.load(); }

  // Formats compiled so far (cache misses), for tests and logs.
  int64_t compiled_total() const;

 private:
  StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> Compiled(
      const OutputFormatInput& format);
  StatusOr<std::shared_ptr<const grammar::TokenVocabulary>> Vocabulary();

  const tokenizer::Tokenizer* tokenizer_;
  size_t max_compiled_;
  std::once_flag vocabulary_once_;
  StatusOr<std::shared_ptr<const grammar::TokenVocabulary>> vocabulary_{
      InternalError("the vocabulary is not built")};
  std::atomic<bool> vocabulary_built_{false};
  std::thread builder_;  // BuildVocabularyInBackground's; joined by the destructor

  mutable std::mutex mutex_;  // guards the LRU and the count
  using Entry = std::pair<std::string, std::shared_ptr<const grammar::CompiledGrammar>>;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  int64_t compiled_total_ = 0;
};

}  // namespace strata::server
