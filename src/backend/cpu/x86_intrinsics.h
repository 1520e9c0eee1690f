// <immintrin.h> for the matmul kernel families. GCC 12 flags the deliberately undefined
// operands of some AVX-512 intrinsics as maybe uninitialized once they are inlined (GCC bug
// 105593, fixed in 13); the warnings point into the header, so they are silenced there only.
// Internal to src/backend/cpu.
#pragma once

#if defined(__x86_64__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
