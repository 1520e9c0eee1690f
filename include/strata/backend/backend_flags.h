// The backend flags every command-line tool and benchmark takes, parsed in one place so that
// `--backend cuda` means the same everywhere (strata-server reads the same settings through
// ServerConfig instead):
//   --backend auto|cpu|cuda   --device N   --gpu-memory-fraction F   --cuda-graphs true|false
//   --cuda-f16-weights auto|on|off   --threads N   --kv-budget-bytes N   --kv-dtype f16|f32|q8_0
//   --matmul-precision fp32|int8
// Every one takes a value.
//
// Thread rules: pure functions.
#pragma once

#include <string_view>

#include "strata/backend/backend_factory.h"
#include "strata/common/status.h"

namespace strata::backend {

// The flags' lines for a tool's --help (each line starts with two spaces and ends with '\n').
extern const char kBackendFlagsUsage[];

// Whether `flag` is one of the flags above.
bool IsBackendFlag(std::string_view flag);

// Applies `flag value` to *spec. INVALID_ARGUMENT naming the flag and the value for anything
// malformed or out of range; *spec is unchanged then.
[[nodiscard]] Status ApplyBackendFlag(std::string_view flag, std::string_view value,
                                      BackendSpec* spec);

}  // namespace strata::backend
