#include "strata/embedding/sentence_encoder.h"

#include "strata/embedding/pooling.h"

namespace strata::embedding {

StatusOr<std::unique_ptr<SentenceEncoder>> SentenceEncoder::Load(
    const std::string& dir, const SentenceEncoderOptions& options) {
  STRATA_ASSIGN_OR_RETURN(BertConfig config, BertConfig::Load(dir + "/config.json"));
  STRATA_ASSIGN_OR_RETURN(WordPieceTokenizer tokenizer,
                          WordPieceTokenizer::Load(dir + "/tokenizer.json"));
  STRATA_ASSIGN_OR_RETURN(SentencePipeline pipeline, SentencePipeline::Load(dir));
  const std::string weights_path = dir + "/model.safetensors";
  STRATA_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(weights_path));
  StatusOr<BertWeights> weights = BertWeights::FromSafetensors(file, config);
  if (!weights.ok()) return weights.status().WithContext(weights_path);

  if (tokenizer.vocab_size() > config.vocab_size) {
    return FailedPreconditionError("tokenizer.json has " + std::to_string(tokenizer.vocab_size()) +
                                   " tokens but the model embeds only " +
                                   std::to_string(config.vocab_size));
  }
  int max_tokens = options.max_tokens;
  if (max_tokens == 0) {
    max_tokens = pipeline.max_seq_length > 0 ? pipeline.max_seq_length
                                             : static_cast<int>(config.max_position_embeddings);
  }
  if (max_tokens < 2 || max_tokens > config.max_position_embeddings) {
    return FailedPreconditionError("max_tokens must be between 2 and the model's " +
                                   std::to_string(config.max_position_embeddings) +
                                   " positions, got " + std::to_string(max_tokens));
  }
  if (options.max_batch_tokens < max_tokens) {
    return FailedPreconditionError("max_batch_tokens (" + std::to_string(options.max_batch_tokens) +
                                   ") must hold one text of max_tokens (" +
                                   std::to_string(max_tokens) + ")");
  }
  if (options.num_threads < 0) {
    return FailedPreconditionError("num_threads must be >= 0, got " +
                                   std::to_string(options.num_threads));
  }
  return std::unique_ptr<SentenceEncoder>(
      new SentenceEncoder(std::move(file), config, std::move(weights).value(), std::move(tokenizer),
                          pipeline, options, max_tokens));
}

SentenceEncoder::SentenceEncoder(SafetensorsFile file, BertConfig config, BertWeights weights,
                                 WordPieceTokenizer tokenizer, SentencePipeline pipeline,
                                 const SentenceEncoderOptions& options, int max_tokens)
    : file_(std::move(file)),
      config_(config),
      weights_(std::move(weights)),
      tokenizer_(std::move(tokenizer)),
      pipeline_(pipeline),
      max_tokens_(max_tokens),
      max_batch_tokens_(options.max_batch_tokens),
      pool_(options.num_threads),
      encoder_(config_, weights_, &pool_) {}

StatusOr<std::vector<std::vector<float>>> SentenceEncoder::Encode(
    std::span<const std::string> texts) {
  std::vector<std::vector<int32_t>> sequences;
  sequences.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    StatusOr<std::vector<int32_t>> ids = tokenizer_.Encode(texts[i], max_tokens_);
    if (!ids.ok()) return ids.status().WithContext("texts[" + std::to_string(i) + "]");
    sequences.push_back(std::move(ids).value());
  }
  std::vector<std::vector<float>> embeddings(texts.size());
  std::lock_guard<std::mutex> lock(mutex_);
  // Consecutive texts go into one pass while their tokens fit max_batch_tokens.
  size_t begin = 0;
  while (begin < sequences.size()) {
    size_t end = begin;
    int64_t tokens = 0;
    while (end < sequences.size() &&
           tokens + static_cast<int64_t>(sequences[end].size()) <= max_batch_tokens_) {
      tokens += static_cast<int64_t>(sequences[end].size());
      ++end;
    }
    EncodePass(std::span(sequences).subspan(begin, end - begin),
               std::span(embeddings).subspan(begin, end - begin));
    begin = end;
  }
  return embeddings;
}

void SentenceEncoder::EncodePass(std::span<const std::vector<int32_t>> sequences,
                                 std::span<std::vector<float>> out) {
  const int64_t dim = config_.hidden_size;
  encoder_.Forward(sequences, &hidden_);
  int64_t row = 0;
  for (size_t s = 0; s < sequences.size(); ++s) {
    const auto len = static_cast<int64_t>(sequences[s].size());
    out[s].resize(dim);
    MeanPool(hidden_.data() + row * dim, len, dim, out[s].data());
    if (pipeline_.normalize) L2Normalize(out[s].data(), dim);
    row += len;
  }
}

}  // namespace strata::embedding
