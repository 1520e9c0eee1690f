// libFuzzer target: ParseGbnf on arbitrary text, checked as grammar_walk.h describes (an
// INVALID_ARGUMENT error, or a grammar that compiles and that a matcher walks consistently).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar_walk.h"
#include "strata/grammar/gbnf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  strata::fuzz::CheckFrontEnd(strata::grammar::ParseGbnf(text), text);
  return 0;
}
