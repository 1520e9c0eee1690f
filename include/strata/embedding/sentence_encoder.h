// SentenceEncoder: text in, sentence embedding out, as sentence-transformers computes it for
// all-MiniLM-L6-v2 (and any BERT model folder with the same pipeline): WordPiece tokens
// ([CLS] ... [SEP], cut to max_tokens), the BERT encoder's last hidden states, their mean over
// the text's tokens, then L2 normalization (when the folder's modules.json has it).
//
// A model folder holds config.json, tokenizer.json and model.safetensors, and optionally
// sentence-transformers' modules.json, 1_Pooling/config.json and sentence_bert_config.json
// (SentencePipeline). scripts/setup extracts all-MiniLM-L6-v2's into models/all-minilm-l6-v2/.
//
// Thread rules: Load once; then any thread may call Encode. Calls are serialized by an internal
// mutex (one forward pass at a time, fanned out over the encoder's own thread pool).
// tokenizer() may be used concurrently with anything.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "strata/backend/cpu/thread_pool.h"
#include "strata/common/status.h"
#include "strata/embedding/bert_config.h"
#include "strata/embedding/bert_encoder.h"
#include "strata/embedding/bert_weights.h"
#include "strata/embedding/safetensors_file.h"
#include "strata/embedding/sentence_pipeline.h"
#include "strata/embedding/wordpiece_tokenizer.h"

namespace strata::embedding {

struct SentenceEncoderOptions {
  // Threads of the encoder's pool, the calling thread included; 0 means
  // std::thread::hardware_concurrency().
  int num_threads = 0;
  // Tokens per text, [CLS] and [SEP] included; longer texts are cut. 0 means what
  // sentence-transformers cuts at: sentence_bert_config.json's max_seq_length (256 for
  // all-MiniLM-L6-v2), else the model's max_position_embeddings (512). At most
  // max_position_embeddings.
  int max_tokens = 0;
  // Most tokens in one forward pass; Encode splits larger inputs into several passes, which
  // bounds its scratch memory at about (5 * hidden + intermediate) * 4 bytes per token.
  int64_t max_batch_tokens = 8192;
};

class SentenceEncoder {
 public:
  // Loads the folder `dir`. NOT_FOUND for a missing file, INVALID_ARGUMENT naming a malformed
  // file or field, UNIMPLEMENTED for a model or pipeline this module does not run,
  // FAILED_PRECONDITION when tokenizer and model do not fit together or the options do not
  // fit the model.
  static StatusOr<std::unique_ptr<SentenceEncoder>> Load(
      const std::string& dir, const SentenceEncoderOptions& options = {});

  // One embedding of dimension() floats per text, in order (unit length when normalizing).
  // Texts are UTF-8; INVALID_ARGUMENT naming the first that is not. An empty span gives an
  // empty result. The embedding of a text does not depend on the other texts of the call
  // beyond fp32 rounding (the matrix products choose kernels by token count).
  StatusOr<std::vector<std::vector<float>>> Encode(std::span<const std::string> texts);

  int dimension() const { return static_cast<int>(config_.hidden_size); }
  int max_tokens() const { return max_tokens_; }
  const WordPieceTokenizer& tokenizer() const { return tokenizer_; }
  const BertConfig& config() const { return config_; }
  const SentencePipeline& pipeline() const { return pipeline_; }

 private:
  SentenceEncoder(SafetensorsFile file, BertConfig config, BertWeights weights,
                  WordPieceTokenizer tokenizer, SentencePipeline pipeline,
                  const SentenceEncoderOptions& options, int max_tokens);

  // Embeds one forward pass's sequences into out (one embedding each, in order).
  void EncodePass(std::span<const std::vector<int32_t>> sequences,
                  std::span<std::vector<float>> out);

  // Declaration order matters: the weights view the file, the encoder views both.
  SafetensorsFile file_;
  BertConfig config_;
  BertWeights weights_;
  WordPieceTokenizer tokenizer_;
  SentencePipeline pipeline_;
  int max_tokens_;
  int64_t max_batch_tokens_;
  backend::cpu::ThreadPool pool_;
  std::mutex mutex_;  // guards encoder_ and hidden_
  BertEncoder encoder_;
  std::vector<float> hidden_;
};

}  // namespace strata::embedding
