#include "strata/engine/request_limits.h"

#include <string>

namespace strata::engine {

Status CheckRequestFits(int64_t prompt_tokens, int64_t max_tokens,
                        const RequestCapacity& capacity) {
  if (prompt_tokens <= 0) return InvalidArgumentError("the prompt must not be empty");
  if (max_tokens < 1) {
    return InvalidArgumentError("max_tokens must be at least 1, got " + std::to_string(max_tokens));
  }
  const std::string asked = "prompt (" + std::to_string(prompt_tokens) + " tokens) + max_tokens (" +
                            std::to_string(max_tokens) + ")";
  // Written so that no sum overflows whatever max_tokens is.
  if (max_tokens > capacity.context_tokens - prompt_tokens) {
    return InvalidArgumentError(asked + " exceed the model's context of " +
                                std::to_string(capacity.context_tokens) +
                                " tokens; shorten the prompt or lower max_tokens");
  }
  const int64_t kv_tokens = prompt_tokens + max_tokens - 1;
  const int64_t blocks = (kv_tokens + capacity.block_size - 1) / capacity.block_size;
  if (blocks > capacity.kv_blocks) {
    return InvalidArgumentError(
        asked + " need " + std::to_string(blocks) + " KV cache blocks of " +
        std::to_string(capacity.block_size) + " tokens, but the whole cache holds " +
        std::to_string(capacity.kv_blocks) + "; shorten the prompt or lower max_tokens");
  }
  return OkStatus();
}

}  // namespace strata::engine
