// CachedResponse: one finished generation as a response cache stores it, and its byte encoding
// (the value a shared tier such as Redis holds).
//
// Encoding: a magic and format version, then the fields in a fixed order, integers
// little-endian, every length bounded. DecodeCachedResponse never trusts its input: a
// truncated, oversized or otherwise malformed value is DATA_LOSS (the caller drops the entry).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/cache/cache_selector.h"
#include "strata/common/status.h"
#include "strata/sampling/finish_reason.h"
#include "strata/sampling/logprobs.h"

namespace strata::cache {

struct CachedResponse {
  std::vector<int32_t> token_ids;                  // every generated token, in order
  std::string text;                                // the text the client was shown, whole
  std::vector<sampling::SampleLogprobs> logprobs;  // empty, or one per token
  sampling::FinishReason finish_reason = sampling::FinishReason::kStop;  // kStop or kLength
  int64_t prompt_tokens = 0;
  EntryLabels labels;  // the namespace and tags of the request that computed it
};

// Bounds DecodeCachedResponse enforces (and EncodeCachedResponse's callers respect).
inline constexpr size_t kMaxCachedTokens = 1 << 20;
inline constexpr size_t kMaxCachedTextBytes = 64 << 20;
inline constexpr size_t kMaxCachedTopLogprobs = 64;

std::string EncodeCachedResponse(const CachedResponse& response);
StatusOr<CachedResponse> DecodeCachedResponse(std::string_view bytes);

// Memory an entry holds, for a byte-bounded tier (the payload, not the allocator's overhead).
size_t CachedResponseBytes(const CachedResponse& response);

}  // namespace strata::cache
