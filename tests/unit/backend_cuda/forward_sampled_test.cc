// CudaBackend::ForwardSampled: rows sampled on the device get the token (and log-probabilities)
// the host reference (Sampler::SampleWithDraw) picks from the same logits with the same draw,
// penalty window and token mask (structured output's device bitmask), and the rows left to the
// host come back with exactly Forward's logits, on the
// eager path (prefill) and on the graph path (decode). Skipped without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "strata/backend/cuda/cuda_backend.h"
#include "strata/common/mapped_file.h"
#include "strata/model/gguf_file.h"
#include "strata/sampling/sampler.h"
#include "strata/sampling/token_mask.h"
#include "support/host_sampling_backend.h"
#include "unit/backend_cuda/synthetic_model.h"

namespace strata::backend::cuda {
namespace {

std::unique_ptr<testing::SyntheticModelFile> Open(const testing::SyntheticSpec& spec) {
  return testing::OpenSyntheticModel(spec);
}

// The penalty windows of the rows that have one: the row's three most likely tokens (so the
// penalties change the choice) and a few others, one out of the vocabulary.
std::vector<sampling::TokenCount> WindowFor(const std::vector<float>& row, int r) {
  std::vector<int32_t> order(row.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + 3, order.end(), [&](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  std::vector<sampling::TokenCount> w;
  for (int k = 0; k < 3; ++k) w.push_back({order[k], 1 + (k + r) % 3});
  w.push_back({static_cast<int32_t>((r * 97 + 11) % row.size()), 2});
  w.push_back({static_cast<int32_t>(row.size()) + 5, 1});
  // Distinct tokens, as a window gives them.
  std::sort(w.begin(), w.end(), [](auto a, auto b) { return a.token < b.token; });
  w.erase(std::unique(w.begin(), w.end(), [](auto a, auto b) { return a.token == b.token; }),
          w.end());
  return w;
}

// Row r's sampling: a mix of greedy, temperature, top-k, top-p and min-p rows on the device,
// rows with penalties and log-probabilities, and rows left to the host.
RowSampling RowFor(int r, std::mt19937& gen, std::span<const sampling::TokenCount> window) {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  RowSampling row;
  row.on_backend = r % 7 != 4;
  row.u = uniform(gen);
  switch (r % 7) {
    case 0:
      row.temperature = 0.0f;
      break;
    case 1:
      row.temperature = 1.0f;
      break;
    case 2:
      row.temperature = 0.7f;
      row.top_k = 5;
      break;
    case 3:
      row.temperature = 1.3f;
      row.top_p = 0.6f;
      row.min_p = 0.02f;
      break;
    case 5:
      row.temperature = 0.0f;
      row.penalties = window;
      row.repetition_penalty = 1.5f;
      row.frequency_penalty = 0.5f;
      row.presence_penalty = 0.25f;
      row.logprobs = 4;
      break;
    case 6:
      row.temperature = 0.8f;
      row.top_k = 20;
      row.penalties = window;
      row.repetition_penalty = 1.2f;
      row.presence_penalty = -0.5f;
      row.logprobs = 20;
      break;
    default:
      break;
  }
  return row;
}

// Row r's token mask when it has one (every third row): about a fifth of the vocabulary, never
// the row's most likely token, so the mask decides the choice.
std::vector<uint32_t> MaskFor(const std::vector<float>& row, int r) {
  if (r % 3 != 2) return {};
  std::vector<uint32_t> mask(sampling::TokenMaskWords(static_cast<int64_t>(row.size())), 0);
  const auto best = std::max_element(row.begin(), row.end()) - row.begin();
  for (size_t t = 0; t < row.size(); ++t) {
    if ((t * 7 + static_cast<size_t>(r)) % 5 == 0 && static_cast<ptrdiff_t>(t) != best) {
      mask[t / 32] |= 1u << (t % 32);
    }
  }
  return mask;
}

void ExpectSampledMatchesHost(CudaBackend& backend, const Batch& batch, int rows_wanted,
                              std::mt19937& gen, const char* what) {
  const int64_t vocab = backend.config().vocab_size;
  std::vector<float> logits;
  ASSERT_TRUE(backend.Forward(batch, &logits).ok()) << what;
  ASSERT_EQ(static_cast<int64_t>(logits.size()), rows_wanted * vocab) << what;
  std::vector<std::vector<sampling::TokenCount>> windows;
  for (int r = 0; r < rows_wanted; ++r) {
    windows.push_back(WindowFor(
        std::vector<float>(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab), r));
  }
  std::vector<std::vector<uint32_t>> masks;
  std::vector<RowSampling> rows;
  for (int r = 0; r < rows_wanted; ++r) {
    masks.push_back(MaskFor(
        std::vector<float>(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab), r));
    rows.push_back(RowFor(r, gen, windows[r]));
    rows.back().allowed = masks.back();
  }
  SampledStep step;
  Status st = backend.ForwardSampled(batch, rows, &step);
  ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
  ASSERT_EQ(step.tokens.size(), rows.size()) << what;
  int64_t host_row = 0;
  for (int r = 0; r < rows_wanted; ++r) {
    std::vector<float> row(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
    if (!rows[r].on_backend) {
      EXPECT_EQ(step.tokens[r], -1) << what << " row " << r;
      ASSERT_GE(static_cast<int64_t>(step.logits.size()), (host_row + 1) * vocab);
      const std::vector<float> got(step.logits.begin() + host_row * vocab,
                                   step.logits.begin() + (host_row + 1) * vocab);
      EXPECT_EQ(got, row) << what << " row " << r << ": host rows carry Forward's logits";
      ++host_row;
      continue;
    }
    if (!masks[r].empty()) {
      sampling::ApplyTokenMask(masks[r], row);
      ASSERT_GE(step.tokens[r], 0) << what << " row " << r;
      EXPECT_TRUE(masks[r][step.tokens[r] / 32] >> (step.tokens[r] % 32) & 1u)
          << what << " row " << r << ": token " << step.tokens[r] << " is masked";
    }
    EXPECT_EQ(step.tokens[r],
              sampling::Sampler::SampleWithDraw(strata::testing::ParamsOf(rows[r]),
                                                rows[r].penalties, row, rows[r].u, nullptr))
        << what << " row " << r;
  }
  EXPECT_EQ(static_cast<int64_t>(step.logits.size()), host_row * vocab) << what;
}

TEST(CudaForwardSampled, DeviceRowsMatchTheHostReferenceOnEagerAndGraphSteps) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  testing::SyntheticSpec spec;
  spec.vocab = 3001;  // several sampling blocks per row
  auto m = Open(spec);
  ASSERT_NE(m, nullptr);
  CudaBackendOptions options;
  options.kv_budget_bytes = int64_t{32} << 20;
  options.block_size = 4;
  auto created = CudaBackend::Create(*m->file, options);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  CudaBackend& backend = **created;
  EXPECT_TRUE(backend.samples_on_backend());

  std::mt19937 gen(3);
  constexpr int kSeqs = 10;
  std::vector<std::vector<int32_t>> prompts(kSeqs);
  std::vector<std::vector<kv::BlockId>> blocks(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    for (int k = 0; k < 6 + s; ++k) prompts[s].push_back((s * 13 + k * 7 + 1) % 3001);
    for (int b = 0; b < 8; ++b) blocks[s].push_back(s * 8 + b);
  }
  Batch prefill;
  for (int s = 0; s < kSeqs; ++s) prefill.sequences.push_back({prompts[s], 0, blocks[s]});
  ExpectSampledMatchesHost(backend, prefill, kSeqs, gen, "prefill (eager)");

  std::vector<std::vector<int32_t>> next(kSeqs);
  Batch decode;
  for (int s = 0; s < kSeqs; ++s) {
    next[s] = {static_cast<int32_t>((s * 5 + 2) % 3001)};
    decode.sequences.push_back(
        {next[s], static_cast<int64_t>(prompts[s].size()), blocks[s], LogitsWanted::kLast});
  }
  for (int round = 0; round < 3; ++round) {  // capture, then replays
    ExpectSampledMatchesHost(backend, decode, kSeqs, gen, "decode (graph)");
  }

  std::vector<RowSampling> wrong(kSeqs - 1);
  SampledStep step;
  EXPECT_EQ(backend.ForwardSampled(decode, wrong, &step).code(), StatusCode::kInvalidArgument);
  std::vector<RowSampling> too_many_logprobs(kSeqs);
  too_many_logprobs[3].on_backend = true;
  too_many_logprobs[3].logprobs = 21;
  EXPECT_EQ(backend.ForwardSampled(decode, too_many_logprobs, &step).code(),
            StatusCode::kInvalidArgument);
  std::vector<RowSampling> short_mask(kSeqs);
  const std::vector<uint32_t> words(sampling::TokenMaskWords(3001) - 1, ~uint32_t{0});
  short_mask[2].on_backend = true;
  short_mask[2].allowed = words;
  EXPECT_EQ(backend.ForwardSampled(decode, short_mask, &step).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::backend::cuda
