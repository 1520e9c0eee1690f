// CheckRequestFits: the one statement of whether a request can ever run, used by every path
// that admits one (Engine::Submit, Scheduler::Add, Generator) so the rule and its message
// exist once. A request fits when
//   - its prompt is not empty and max_tokens >= 1,
//   - prompt + max_tokens <= the context (tokens the model may see), and
//   - its KV fits the whole cache: prompt + max_tokens - 1 tokens (the last generated token is
//     never run through a forward, so its KV is never written), in whole blocks.
// INVALID_ARGUMENT otherwise, with a message that says what to shorten. No sum overflows for
// any int64 max_tokens.
#pragma once

#include <cstdint>

#include "strata/common/status.h"

namespace strata::engine {

struct RequestCapacity {
  int64_t context_tokens = 0;  // prompt + max_tokens at most
  int64_t kv_blocks = 0;       // blocks in the whole KV cache
  int64_t block_size = 1;      // tokens per block
};

[[nodiscard]] Status CheckRequestFits(int64_t prompt_tokens, int64_t max_tokens,
                                      const RequestCapacity& capacity);

}  // namespace strata::engine
