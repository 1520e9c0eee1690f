// JSONL datasets for strata-bench: one request per non-blank line,
//   {"prompt": "text", "output_tokens": 128}
//   {"prompt_token_ids": [1, 2, 3], "output_tokens": 16}
// Exactly one of "prompt" (a string) and "prompt_token_ids" (an array of integers >= 0);
// "output_tokens" (an integer >= 1) is optional and defaults to the caller's value. Other keys
// are ignored.
//
// Thread rules: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bench/load/workload.h"
#include "strata/common/status.h"

namespace strata::bench {

// Parses JSONL `text`. kInvalidArgument naming the (1-based) line on a malformed line or a
// dataset without entries.
StatusOr<std::vector<RequestSpec>> ParseDataset(std::string_view text,
                                                int64_t default_output_tokens);

// Reads and parses the file at `path`; kNotFound when it cannot be read.
StatusOr<std::vector<RequestSpec>> LoadDataset(const std::string& path,
                                               int64_t default_output_tokens);

}  // namespace strata::bench
