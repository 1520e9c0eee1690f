// WordPieceTokenizer::Load and FromJson: tokenizer.json into a WordPieceTokenizer, refusing
// every pipeline part the class does not implement (see the header).
#include <algorithm>

#include "json_util.h"
#include "strata/embedding/wordpiece_tokenizer.h"

namespace strata::embedding {

using internal::Json;

class WordPieceTokenizerLoader {
 public:
  explicit WordPieceTokenizerLoader(std::string what) : what_(std::move(what)) {}

  StatusOr<WordPieceTokenizer> Build(const Json& root) const {
    WordPieceTokenizer t;
    STRATA_RETURN_IF_ERROR(LoadModel(root, &t));
    STRATA_RETURN_IF_ERROR(LoadAddedTokens(root, &t));
    STRATA_RETURN_IF_ERROR(LoadNormalizer(root, &t));
    STRATA_RETURN_IF_ERROR(CheckPreTokenizer(root));
    STRATA_RETURN_IF_ERROR(LoadPostProcessor(root, &t));
    return t;
  }

 private:
  Status LoadModel(const Json& root, WordPieceTokenizer* t) const {
    const auto model = root.find("model");
    if (model == root.end() || !model->is_object()) {
      return InvalidArgumentError(what_ + ": 'model' is missing or not an object");
    }
    STRATA_ASSIGN_OR_RETURN(std::string type,
                            internal::GetString(*model, "type", what_ + ": model"));
    if (type != "WordPiece") {
      return UnimplementedError(what_ + ": model type '" + type +
                                "' is not supported (only WordPiece)");
    }
    const auto vocab = model->find("vocab");
    if (vocab == model->end() || !vocab->is_object() || vocab->empty()) {
      return InvalidArgumentError(what_ + ": model.vocab is missing or not an object");
    }
    const size_t n = vocab->size();
    if (n > static_cast<size_t>(INT32_MAX)) {
      return InvalidArgumentError(what_ + ": model.vocab is too large");
    }
    t->tokens_.assign(n, std::string());
    std::vector<bool> seen(n, false);
    t->vocab_.reserve(n);
    for (const auto& [text, id] : vocab->items()) {
      if (!id.is_number_unsigned() || id.get<uint64_t>() >= n || seen[id.get<uint64_t>()]) {
        return InvalidArgumentError(what_ + ": the id of vocabulary entry '" + text +
                                    "' is not a distinct integer in [0, " + std::to_string(n) +
                                    ")");
      }
      const auto i = static_cast<int32_t>(id.get<uint64_t>());
      seen[i] = true;
      t->tokens_[i] = text;
      t->vocab_.emplace(text, i);
    }
    STRATA_ASSIGN_OR_RETURN(std::string unk,
                            internal::GetString(*model, "unk_token", what_ + ": model"));
    const auto unk_id = t->TokenId(unk);
    if (!unk_id) {
      return InvalidArgumentError(what_ + ": unk_token '" + unk + "' is not in the vocab");
    }
    t->unk_id_ = *unk_id;
    STRATA_ASSIGN_OR_RETURN(
        t->continuing_prefix_,
        internal::GetString(*model, "continuing_subword_prefix", what_ + ": model"));
    STRATA_ASSIGN_OR_RETURN(
        int64_t max_chars, internal::GetInt(*model, "max_input_chars_per_word", what_ + ": model"));
    if (max_chars < 1) {
      return InvalidArgumentError(what_ + ": model.max_input_chars_per_word must be >= 1");
    }
    t->max_input_chars_per_word_ = static_cast<size_t>(max_chars);
    return OkStatus();
  }

  Status LoadAddedTokens(const Json& root, WordPieceTokenizer* t) const {
    const auto added = root.find("added_tokens");
    if (added == root.end() || added->is_null()) return OkStatus();
    if (!added->is_array()) {
      return InvalidArgumentError(what_ + ": 'added_tokens' is not an array");
    }
    for (const Json& token : *added) {
      if (!token.is_object()) {
        return InvalidArgumentError(what_ + ": an added token is not an object");
      }
      STRATA_ASSIGN_OR_RETURN(std::string content,
                              internal::GetString(token, "content", what_ + ": added token"));
      const std::string what = what_ + ": added token '" + content + "'";
      STRATA_ASSIGN_OR_RETURN(int64_t id, internal::GetInt(token, "id", what));
      if (content.empty() || id < 0 || id >= t->vocab_size()) {
        return UnimplementedError(what + " is empty or has an id outside the vocab");
      }
      for (const char* flag : {"normalized", "lstrip", "rstrip", "single_word"}) {
        if (!token.contains(flag)) continue;  // absent means false
        STRATA_ASSIGN_OR_RETURN(bool set, internal::GetBool(token, flag, what));
        if (set) {
          return UnimplementedError(what + " sets '" + flag + "', which is not supported");
        }
      }
      t->added_.push_back({content, static_cast<int32_t>(id)});
    }
    // Leftmost-longest: at each position the longest added token that matches wins.
    std::stable_sort(t->added_.begin(), t->added_.end(),
                     [](const auto& a, const auto& b) { return a.text.size() > b.text.size(); });
    return OkStatus();
  }

  Status LoadNormalizer(const Json& root, WordPieceTokenizer* t) const {
    const auto normalizer = root.find("normalizer");
    if (normalizer == root.end() || normalizer->is_null()) {
      t->normalize_ = false;
      return OkStatus();
    }
    if (!normalizer->is_object()) {
      return InvalidArgumentError(what_ + ": 'normalizer' is not an object");
    }
    STRATA_ASSIGN_OR_RETURN(std::string type,
                            internal::GetString(*normalizer, "type", what_ + ": normalizer"));
    if (type != "BertNormalizer") {
      return UnimplementedError(what_ + ": normalizer '" + type +
                                "' is not supported (only BertNormalizer)");
    }
    BertNormalizerOptions options;
    STRATA_ASSIGN_OR_RETURN(options.clean_text,
                            internal::GetBool(*normalizer, "clean_text", what_ + ": normalizer"));
    STRATA_ASSIGN_OR_RETURN(
        options.handle_chinese_chars,
        internal::GetBool(*normalizer, "handle_chinese_chars", what_ + ": normalizer"));
    STRATA_ASSIGN_OR_RETURN(options.lowercase,
                            internal::GetBool(*normalizer, "lowercase", what_ + ": normalizer"));
    const auto strip = normalizer->find("strip_accents");
    if (strip == normalizer->end() || strip->is_null()) {
      options.strip_accents = options.lowercase;  // the library's default
    } else {
      STRATA_ASSIGN_OR_RETURN(options.strip_accents, internal::GetBool(*normalizer, "strip_accents",
                                                                       what_ + ": normalizer"));
    }
    t->normalizer_ = BertNormalizer(options);
    return OkStatus();
  }

  Status CheckPreTokenizer(const Json& root) const {
    const auto pre = root.find("pre_tokenizer");
    if (pre == root.end() || !pre->is_object()) {
      return UnimplementedError(what_ + ": a BertPreTokenizer is required");
    }
    STRATA_ASSIGN_OR_RETURN(std::string type,
                            internal::GetString(*pre, "type", what_ + ": pre_tokenizer"));
    if (type != "BertPreTokenizer") {
      return UnimplementedError(what_ + ": pre_tokenizer '" + type +
                                "' is not supported (only BertPreTokenizer)");
    }
    return OkStatus();
  }

  Status LoadPostProcessor(const Json& root, WordPieceTokenizer* t) const {
    const auto post = root.find("post_processor");
    if (post == root.end() || !post->is_object()) {
      return UnimplementedError(what_ + ": a [CLS] A [SEP] post_processor is required");
    }
    STRATA_ASSIGN_OR_RETURN(std::string type,
                            internal::GetString(*post, "type", what_ + ": post_processor"));
    if (type == "BertProcessing") {
      STRATA_ASSIGN_OR_RETURN(t->cls_id_, PairId(*post, "cls", *t));
      STRATA_ASSIGN_OR_RETURN(t->sep_id_, PairId(*post, "sep", *t));
      return OkStatus();
    }
    if (type != "TemplateProcessing") {
      return UnimplementedError(what_ + ": post_processor '" + type +
                                "' is not supported (TemplateProcessing, BertProcessing)");
    }
    const auto single = post->find("single");
    const auto specials = post->find("special_tokens");
    const Status shape =
        UnimplementedError(what_ +
                           ": post_processor.single must be [SpecialToken, Sequence A, "
                           "SpecialToken] with one id each");
    if (single == post->end() || !single->is_array() || single->size() != 3 ||
        specials == post->end() || !specials->is_object()) {
      return shape;
    }
    const Json& seq = (*single)[1];
    if (!seq.is_object() || !seq.contains("Sequence")) return shape;
    int32_t ids[2];
    for (int k = 0; k < 2; ++k) {
      const Json& item = (*single)[k == 0 ? 0 : 2];
      if (!item.is_object() || !item.contains("SpecialToken") ||
          !item["SpecialToken"].is_object()) {
        return shape;
      }
      const auto name = item["SpecialToken"].find("id");
      if (name == item["SpecialToken"].end() || !name->is_string()) return shape;
      const auto special = specials->find(name->get<std::string>());
      if (special == specials->end() || !special->is_object()) return shape;
      const auto list = special->find("ids");
      if (list == special->end() || !list->is_array() || list->size() != 1 ||
          !(*list)[0].is_number_unsigned() ||
          (*list)[0].get<uint64_t>() >= static_cast<uint64_t>(t->vocab_size())) {
        return shape;
      }
      ids[k] = static_cast<int32_t>((*list)[0].get<uint64_t>());
    }
    t->cls_id_ = ids[0];
    t->sep_id_ = ids[1];
    return OkStatus();
  }

  // BertProcessing's "cls"/"sep": ["[CLS]", 101].
  StatusOr<int32_t> PairId(const Json& post, const char* key, const WordPieceTokenizer& t) const {
    const auto pair = post.find(key);
    if (pair == post.end() || !pair->is_array() || pair->size() != 2 ||
        !(*pair)[1].is_number_unsigned() ||
        (*pair)[1].get<uint64_t>() >= static_cast<uint64_t>(t.vocab_size())) {
      return InvalidArgumentError(what_ + ": post_processor." + key +
                                  " must be [text, id] with an id in the vocab");
    }
    return static_cast<int32_t>((*pair)[1].get<uint64_t>());
  }

  std::string what_;  // the file, for messages
};

StatusOr<WordPieceTokenizer> WordPieceTokenizer::Load(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string text, internal::ReadTextFile(path));
  return FromJson(text, path);
}

StatusOr<WordPieceTokenizer> WordPieceTokenizer::FromJson(std::string_view json,
                                                          const std::string& what) {
  STRATA_ASSIGN_OR_RETURN(Json root, internal::ParseJsonObject(json, what));
  return WordPieceTokenizerLoader(what).Build(root);
}

}  // namespace strata::embedding
