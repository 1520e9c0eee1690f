// FinishReason: why a sequence stopped generating, as reported to the client.
#pragma once

#include <string_view>

namespace strata::sampling {

enum class FinishReason {
  kStop,       // an end-of-generation token, a stop token id or a stop string
  kLength,     // max_tokens generated, or the model's context is full
  kCancelled,  // the client cancelled or its deadline passed
  kError,      // the engine failed the request (e.g. a device error)
};

// The OpenAI spelling where one exists: "stop", "length"; then "cancelled", "error".
std::string_view FinishReasonName(FinishReason reason);

}  // namespace strata::sampling
