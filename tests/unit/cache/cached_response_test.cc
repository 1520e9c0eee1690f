#include "strata/cache/cached_response.h"

#include <gtest/gtest.h>

#include <string>

namespace strata::cache {
namespace {

CachedResponse Sample(bool with_logprobs) {
  CachedResponse r;
  r.token_ids = {5, 17, 99999, 0};
  r.text = "héllo, world\n";
  r.finish_reason = sampling::FinishReason::kLength;
  r.prompt_tokens = 42;
  r.labels.cache_namespace = "tenant:a";
  r.labels.tags = {"docs", "v:2"};
  if (with_logprobs) {
    for (int32_t id : r.token_ids) {
      sampling::SampleLogprobs lp;
      lp.chosen = {id, -0.25f};
      lp.top = {{id, -0.25f}, {id + 1, -1.5f}};
      r.logprobs.push_back(lp);
    }
  }
  return r;
}

TEST(CachedResponse, RoundTripsEveryField) {
  for (bool with_logprobs : {false, true}) {
    const CachedResponse in = Sample(with_logprobs);
    StatusOr<CachedResponse> out = DecodeCachedResponse(EncodeCachedResponse(in));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->token_ids, in.token_ids);
    EXPECT_EQ(out->text, in.text);
    EXPECT_EQ(out->finish_reason, in.finish_reason);
    EXPECT_EQ(out->prompt_tokens, in.prompt_tokens);
    EXPECT_EQ(out->labels.cache_namespace, "tenant:a");
    EXPECT_EQ(out->labels.tags, (std::vector<std::string>{"docs", "v:2"}));
    ASSERT_EQ(out->logprobs.size(), in.logprobs.size());
    for (size_t i = 0; i < in.logprobs.size(); ++i) {
      EXPECT_EQ(out->logprobs[i].chosen.token, in.logprobs[i].chosen.token);
      EXPECT_EQ(out->logprobs[i].chosen.logprob, in.logprobs[i].chosen.logprob);
      ASSERT_EQ(out->logprobs[i].top.size(), 2u);
      EXPECT_EQ(out->logprobs[i].top[1].token, in.logprobs[i].top[1].token);
    }
  }
}

TEST(CachedResponse, EveryTruncationIsDataLoss) {
  const std::string bytes = EncodeCachedResponse(Sample(true));
  for (size_t n = 0; n < bytes.size(); ++n) {
    StatusOr<CachedResponse> out = DecodeCachedResponse(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(out.ok()) << "prefix of " << n << " bytes decoded";
    EXPECT_EQ(out.status().code(), StatusCode::kDataLoss);
  }
}

TEST(CachedResponse, GarbageIsRejected) {
  std::string bytes = EncodeCachedResponse(Sample(false));
  EXPECT_FALSE(DecodeCachedResponse(bytes + "x").ok()) << "trailing bytes";
  std::string bad_magic = bytes;
  bad_magic[0] ^= 1;
  EXPECT_FALSE(DecodeCachedResponse(bad_magic).ok());
  std::string bad_reason = bytes;
  bad_reason[8] = 2;  // kCancelled is never stored
  EXPECT_FALSE(DecodeCachedResponse(bad_reason).ok());
  std::string huge_count = bytes;
  huge_count[20] = '\xff';  // token count's low byte: far more tokens than bytes
  huge_count[23] = '\x7f';
  EXPECT_FALSE(DecodeCachedResponse(huge_count).ok());
  EXPECT_FALSE(DecodeCachedResponse("").ok());
}

TEST(CachedResponse, BytesGrowWithTheContent) {
  CachedResponse small = Sample(false);
  CachedResponse big = Sample(true);
  big.text.append(1000, 'x');
  EXPECT_GT(CachedResponseBytes(big), CachedResponseBytes(small) + 1000);
}

}  // namespace
}  // namespace strata::cache
