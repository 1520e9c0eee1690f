// Sampling a step's rows on the device (CudaBackend::ForwardSampled after the model run): the
// rows' sampling inputs go up in one copy (structured output's token masks as bitmasks among
// them), the kernels of kernels/logit_processing.h and kernels/sampling.h run in the order that
// header gives (token masks, log-probabilities of the masked logits, penalties in place,
// sampling, the chosen tokens' log-probabilities), and the tokens and log-probabilities come
// back in one copy into pinned memory. Rows left to the host get their logits copied instead.
#include <algorithm>
#include <cstring>
#include <string>

#include "cuda_backend_impl.h"
#include "cuda_status.h"
#include "strata/kernels/logit_processing.h"
#include "strata/kernels/sampling.h"
#include "strata/sampling/token_mask.h"

namespace strata::backend::cuda {
namespace {

int64_t Align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// Byte offsets of the sampling inputs in sample_in (host staging and device alike).
struct SamplingInputLayout {
  int64_t params = 0;        // [rows] kernels::DeviceSamplingParams
  int64_t penalty_rows = 0;  // [penalized rows] kernels::DevicePenaltyRow
  int64_t logprob_rows = 0;  // [logprob rows] kernels::DeviceLogprobRow
  int64_t tokens = 0;        // [entries] int32
  int64_t counts = 0;        // [entries] int32
  int64_t mask_rows = 0;     // [masked rows] int32: each masked row's index
  int64_t mask_words = 0;    // [masked rows, mask_words_per_row] uint32
  int64_t total = 0;

  static SamplingInputLayout For(int64_t rows, int64_t penalty_rows, int64_t logprob_rows,
                                 int64_t entries, int64_t masked_rows, int64_t words_per_row) {
    SamplingInputLayout l;
    int64_t at = 0;
    auto take = [&](int64_t bytes) {
      const int64_t offset = at;
      at += Align256(bytes);
      return offset;
    };
    l.params = take(rows * static_cast<int64_t>(sizeof(kernels::DeviceSamplingParams)));
    l.penalty_rows = take(penalty_rows * static_cast<int64_t>(sizeof(kernels::DevicePenaltyRow)));
    l.logprob_rows = take(logprob_rows * static_cast<int64_t>(sizeof(kernels::DeviceLogprobRow)));
    l.tokens = take(entries * 4);
    l.counts = take(entries * 4);
    l.mask_rows = take(masked_rows * 4);
    l.mask_words = take(masked_rows * words_per_row * 4);
    l.total = at;
    return l;
  }
};

template <typename T>
T* At(uint8_t* base, int64_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

}  // namespace

Status CudaBackend::Impl::EnsureSamplingCapacity(int64_t in_bytes, int64_t saved_bytes,
                                                 int64_t out_bytes) {
  auto grow_device = [](DeviceBuffer* b, int64_t bytes, const char* what) -> Status {
    if (b->bytes() >= bytes && b->bytes() > 0) return OkStatus();
    b->Reset();
    STRATA_ASSIGN_OR_RETURN(*b, DeviceBuffer::Allocate(std::max<int64_t>(2 * bytes, 4096), what));
    return OkStatus();
  };
  auto grow_pinned = [](PinnedBuffer* b, int64_t bytes, const char* what) -> Status {
    if (b->bytes() >= bytes && b->bytes() > 0) return OkStatus();
    b->Reset();
    STRATA_ASSIGN_OR_RETURN(*b, PinnedBuffer::Allocate(std::max<int64_t>(2 * bytes, 4096), what));
    return OkStatus();
  };
  STRATA_RETURN_IF_ERROR(grow_device(&sample_in, in_bytes, "sampling inputs"));
  STRATA_RETURN_IF_ERROR(grow_pinned(&sample_in_host, in_bytes, "sampling inputs"));
  STRATA_RETURN_IF_ERROR(grow_device(&sample_saved, saved_bytes, "penalized logits"));
  STRATA_RETURN_IF_ERROR(grow_device(&sample_out, out_bytes, "sampled tokens"));
  STRATA_RETURN_IF_ERROR(grow_pinned(&sample_out_host, out_bytes, "sampled tokens"));
  return OkStatus();
}

Status CudaBackend::Impl::FinishSampled(float* logits, std::span<const RowSampling> rows,
                                        SampledStep* out) {
  cudaStream_t s = stream.get();
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t vocab = config.vocab_size;
  int64_t host_rows = 0;
  int64_t backend_rows = 0;
  int64_t penalty_rows = 0;
  int64_t logprob_rows = 0;
  int64_t entries = 0;
  int64_t masked_rows = 0;
  const auto words_per_row = static_cast<int64_t>(sampling::TokenMaskWords(vocab));
  bool all_greedy = true;
  for (const RowSampling& r : rows) {
    if (!r.on_backend) {
      ++host_rows;
      continue;
    }
    ++backend_rows;
    all_greedy &= r.temperature <= 0.0f;
    if (!r.penalties.empty()) {
      ++penalty_rows;
      entries += static_cast<int64_t>(r.penalties.size());
    }
    logprob_rows += r.logprobs > 0 ? 1 : 0;
    masked_rows += r.allowed.empty() ? 0 : 1;
  }
  // Runs on error paths too: the step's pinned staging must not be rewritten while read.
  auto fail = [&](Status st) {
    cudaStreamSynchronize(s);
    return st;
  };
  const SamplingInputLayout in = SamplingInputLayout::For(
      all_greedy ? 0 : n, penalty_rows, logprob_rows, entries, masked_rows, words_per_row);
  const int64_t out_logprobs = Align256(n * 4);
  const int64_t out_bytes =
      out_logprobs + logprob_rows * static_cast<int64_t>(sizeof(kernels::DeviceRowLogprobs));
  if (backend_rows > 0) {
    if (Status st = EnsureSamplingCapacity(in.total, entries * 4, out_bytes); !st.ok()) {
      return fail(st);
    }
    uint8_t* host = sample_in_host.data();
    auto* params = At<kernels::DeviceSamplingParams>(host, in.params);
    auto* prow = At<kernels::DevicePenaltyRow>(host, in.penalty_rows);
    auto* lrow = At<kernels::DeviceLogprobRow>(host, in.logprob_rows);
    auto* tokens = At<int32_t>(host, in.tokens);
    auto* counts = At<int32_t>(host, in.counts);
    auto* mask_rows = At<int32_t>(host, in.mask_rows);
    auto* mask_words = At<uint32_t>(host, in.mask_words);
    int32_t p = 0;
    int32_t l = 0;
    int32_t e = 0;
    int32_t m = 0;
    for (int64_t i = 0; i < n; ++i) {
      const RowSampling& r = rows[static_cast<size_t>(i)];
      if (!all_greedy) {
        // Rows the host samples get a cheap greedy pass; their tokens are not used.
        kernels::DeviceSamplingParams& sp = params[i];
        sp = kernels::DeviceSamplingParams{};
        sp.temperature = r.on_backend ? r.temperature : 0.0f;
        sp.top_k = r.top_k;
        sp.top_p = r.top_p;
        sp.min_p = r.min_p;
        sp.u = r.u;
      }
      if (!r.on_backend) continue;
      if (!r.allowed.empty()) {
        mask_rows[m] = static_cast<int32_t>(i);
        std::memcpy(mask_words + m * words_per_row, r.allowed.data(),
                    static_cast<size_t>(words_per_row) * sizeof(uint32_t));
        ++m;
      }
      int32_t penalty_index = -1;
      if (!r.penalties.empty()) {
        penalty_index = p;
        prow[p++] = {static_cast<int32_t>(i),
                     e,
                     static_cast<int32_t>(r.penalties.size()),
                     r.repetition_penalty,
                     r.frequency_penalty,
                     r.presence_penalty};
        for (const sampling::TokenCount& c : r.penalties) {
          tokens[e] = c.token;
          counts[e] = c.count;
          ++e;
        }
      }
      if (r.logprobs > 0) lrow[l++] = {static_cast<int32_t>(i), r.logprobs, penalty_index};
    }
    const bool upload = in.total > 0;
    if (upload) {
      if (const cudaError_t err = cudaMemcpyAsync(
              sample_in.get(), host, static_cast<size_t>(in.total), cudaMemcpyHostToDevice, s);
          err != cudaSuccess) {
        return fail(CudaStatus(err, "copying the sampling inputs"));
      }
    }
    uint8_t* dev = static_cast<uint8_t*>(sample_in.get());
    const auto* d_prow = At<const kernels::DevicePenaltyRow>(dev, in.penalty_rows);
    const auto* d_lrow = At<const kernels::DeviceLogprobRow>(dev, in.logprob_rows);
    const auto* d_tokens = At<const int32_t>(dev, in.tokens);
    auto* sampled = static_cast<int32_t*>(sample_out.get());
    auto* d_logprobs =
        At<kernels::DeviceRowLogprobs>(static_cast<uint8_t*>(sample_out.get()), out_logprobs);
    auto* saved = static_cast<float*>(sample_saved.get());
    auto launched = [&](int err, const char* what) {
      return err == 0 ? OkStatus() : CudaStatus(static_cast<cudaError_t>(err), what);
    };
    Status st = launched(
        kernels::LaunchApplyTokenMask(logits, vocab, vocab, At<const int32_t>(dev, in.mask_rows), m,
                                      At<const uint32_t>(dev, in.mask_words), s),
        "launching the token mask kernel");
    if (st.ok()) {
      st = launched(kernels::LaunchLogprobs(logits, vocab, vocab, d_lrow, l, d_logprobs, s),
                    "launching the log-probability kernel");
    }
    if (st.ok()) {
      st = launched(kernels::LaunchApplyPenalties(logits, vocab, vocab, d_prow, p, d_tokens,
                                                  At<const int32_t>(dev, in.counts), saved, s),
                    "launching the penalty kernel");
    }
    if (st.ok()) {
      st = all_greedy
               ? launched(kernels::LaunchArgMax(logits, n, vocab, vocab, sampled, s),
                          "launching the argmax kernel")
               : launched(kernels::LaunchSample(
                              logits, n, vocab, vocab,
                              At<const kernels::DeviceSamplingParams>(dev, in.params), sampled, s),
                          "launching the sampling kernel");
    }
    if (st.ok()) {
      st = launched(kernels::LaunchChosenLogprobs(logits, vocab, vocab, d_lrow, l, sampled, d_prow,
                                                  d_tokens, saved, d_logprobs, s),
                    "launching the chosen-token log-probability kernel");
    }
    if (!st.ok()) return fail(st);
    if (const cudaError_t err =
            cudaMemcpyAsync(sample_out_host.data(), sample_out.get(),
                            static_cast<size_t>(out_bytes), cudaMemcpyDeviceToHost, s);
        err != cudaSuccess) {
      return fail(CudaStatus(err, "copying the sampled tokens"));
    }
  }
  out->logits.resize(static_cast<size_t>(host_rows * vocab));
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (rows[static_cast<size_t>(i)].on_backend) continue;
    if (const cudaError_t e =
            cudaMemcpyAsync(out->logits.data() + k * vocab, logits + i * vocab,
                            static_cast<size_t>(vocab) * sizeof(float), cudaMemcpyDeviceToHost, s);
        e != cudaSuccess) {
      return fail(CudaStatus(e, "copying the logits to the host"));
    }
    ++k;
  }
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  out->tokens.assign(static_cast<size_t>(n), -1);
  out->logprobs.clear();
  if (backend_rows == 0) return OkStatus();
  const auto* tokens = reinterpret_cast<const int32_t*>(sample_out_host.data());
  for (int64_t i = 0; i < n; ++i) {
    if (rows[static_cast<size_t>(i)].on_backend) out->tokens[static_cast<size_t>(i)] = tokens[i];
  }
  if (logprob_rows > 0) {
    out->logprobs.resize(static_cast<size_t>(n));
    const auto* lp =
        reinterpret_cast<const kernels::DeviceRowLogprobs*>(sample_out_host.data() + out_logprobs);
    for (int64_t i = 0; i < n; ++i) {
      const RowSampling& r = rows[static_cast<size_t>(i)];
      if (!r.on_backend || r.logprobs <= 0) continue;
      sampling::SampleLogprobs& dst = out->logprobs[static_cast<size_t>(i)];
      dst.chosen = {lp->chosen.token, lp->chosen.logprob};
      const int64_t top = std::min<int64_t>(r.logprobs, vocab);
      dst.top.clear();
      for (int64_t t = 0; t < top; ++t) dst.top.push_back({lp->top[t].token, lp->top[t].logprob});
      ++lp;
    }
  }
  return OkStatus();
}

}  // namespace strata::backend::cuda
