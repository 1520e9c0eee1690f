// Comparing secrets without leaking where they differ.
#pragma once

#include <string_view>

namespace strata {

// Equal strings, in time that depends only on their lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace strata
