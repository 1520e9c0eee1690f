// Sentence-transformers' pooling and normalization steps (sentence_transformers.models.Pooling
// with pooling_mode_mean_tokens, then models.Normalize). Pure; any thread.
#pragma once

#include <cstdint>

namespace strata::embedding {

// out[d] = mean over t < num_tokens of hidden[t * dim + d], summed in double.
//   hidden: [num_tokens, dim] (the tokens of one text, padding excluded); out: [dim].
// num_tokens == 0 gives zeros (sentence-transformers clamps the count to 1e-9 likewise).
void MeanPool(const float* hidden, int64_t num_tokens, int64_t dim, float* out);

// v /= max(||v||_2, 1e-12), in place (torch.nn.functional.normalize's eps).
void L2Normalize(float* v, int64_t n);

}  // namespace strata::embedding
