// kernels::LaunchApplyTokenMask against sampling::ApplyTokenMask: the same logits after the
// mask, bit for bit, on masked rows picked out of a larger batch (the others untouched), for
// vocabularies that do and do not fill their last word. Skipped without a device.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "strata/kernels/logit_processing.h"
#include "strata/sampling/token_mask.h"
#include "support/device_buffer.h"

namespace strata::kernels {
namespace {

using test::DeviceBuffer;

TEST(TokenMaskKernel, MatchesTheHostMaskOnTheChosenRowsOnly) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  for (const int64_t vocab :
       {int64_t{1}, int64_t{31}, int64_t{64}, int64_t{3001}, int64_t{262144}}) {
    const int64_t ld = vocab + 3;  // rows wider than the vocabulary: the tail is left alone
    constexpr int64_t kRows = 5;
    const std::vector<int32_t> masked = {3, 0, 4};
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    std::normal_distribution<float> dist(0.0f, 2.0f);
    std::vector<float> logits(static_cast<size_t>(kRows * ld));
    for (float& v : logits) v = dist(rng);
    const size_t words = sampling::TokenMaskWords(vocab);
    std::vector<uint32_t> all_words;
    for (size_t i = 0; i < masked.size(); ++i) {
      for (size_t w = 0; w < words; ++w) {
        // Empty, full and random words.
        all_words.push_back(w % 7 == 0 ? 0u : w % 7 == 1 ? ~uint32_t{0} : rng());
      }
    }
    std::vector<float> want = logits;
    for (size_t i = 0; i < masked.size(); ++i) {
      sampling::ApplyTokenMask(std::span<const uint32_t>(all_words).subspan(i * words, words),
                               std::span<float>(want).subspan(static_cast<size_t>(masked[i] * ld),
                                                              static_cast<size_t>(vocab)));
    }
    DeviceBuffer<float> d_logits(logits);
    DeviceBuffer<int32_t> d_rows(masked);
    DeviceBuffer<uint32_t> d_words(all_words);
    ASSERT_TRUE(d_logits.ok() && d_rows.ok() && d_words.ok());
    ASSERT_EQ(LaunchApplyTokenMask(d_logits.get(), vocab, ld, d_rows.get(),
                                   static_cast<int32_t>(masked.size()), d_words.get(), nullptr),
              0);
    const std::vector<float> got = d_logits.Download();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << "vocab " << vocab << " element " << i;
    }
  }
}

TEST(TokenMaskKernel, RefusesBadShapesWithoutLaunching) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  DeviceBuffer<float> logits(std::vector<float>(64, 1.0f));
  DeviceBuffer<int32_t> rows(std::vector<int32_t>{0});
  DeviceBuffer<uint32_t> words(std::vector<uint32_t>{1u, 1u});
  EXPECT_NE(LaunchApplyTokenMask(logits.get(), 0, 64, rows.get(), 1, words.get(), nullptr), 0);
  EXPECT_NE(LaunchApplyTokenMask(logits.get(), 64, 32, rows.get(), 1, words.get(), nullptr), 0);
  EXPECT_NE(LaunchApplyTokenMask(logits.get(), 64, 64, rows.get(), -1, words.get(), nullptr), 0);
  EXPECT_NE(LaunchApplyTokenMask(logits.get(), 64, 64, rows.get(), 1, nullptr, nullptr), 0);
  EXPECT_EQ(LaunchApplyTokenMask(logits.get(), 64, 64, rows.get(), 0, words.get(), nullptr), 0);
}

}  // namespace
}  // namespace strata::kernels
