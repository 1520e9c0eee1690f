// SentencePipeline: what a sentence-transformers model folder says about the steps after the
// transformer (modules.json, 1_Pooling/config.json, sentence_bert_config.json). Each file is
// optional; absent ones mean all-MiniLM-L6-v2's pipeline: mean pooling, then L2 normalization.
// A pipeline this module does not run (CLS or max pooling, a Dense layer, ...) is UNIMPLEMENTED
// naming the file and the part, so a model is never silently embedded differently from
// sentence-transformers.
#pragma once

#include <string>

#include "strata/common/status.h"

namespace strata::embedding {

struct SentencePipeline {
  // sentence_bert_config.json's max_seq_length: the token cut sentence-transformers applies
  // ([CLS] and [SEP] included); 0 when the file is absent.
  int max_seq_length = 0;
  // Whether modules.json ends in a Normalize module (true when modules.json is absent).
  bool normalize = true;

  static StatusOr<SentencePipeline> Load(const std::string& dir);
};

}  // namespace strata::embedding
