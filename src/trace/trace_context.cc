#include "strata/trace/trace_context.h"

#include <algorithm>
#include <random>

namespace strata::trace {
namespace {

constexpr size_t kVersion00Size = 55;  // "00-" 32 "-" 16 "-" 2

// The value of a lowercase hex digit, or -1 (the spec allows no uppercase).
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Decodes 2 * out.size() lowercase hex digits; false on any other character.
bool DecodeHex(std::string_view hex, std::span<uint8_t> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = HexValue(hex[2 * i]);
    const int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
}

template <size_t N>
std::array<uint8_t, N> RandomNonZero() {
  // One generator per thread: no lock, and ids from different threads stay independent.
  thread_local std::mt19937_64 generator = [] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device(),
                       device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }();
  std::array<uint8_t, N> bytes{};
  do {
    for (size_t i = 0; i < N; i += 8) {
      const uint64_t word = generator();
      for (size_t j = 0; j < 8 && i + j < N; ++j) {
        bytes[i + j] = static_cast<uint8_t>(word >> (8 * j));
      }
    }
  } while (AllZero(bytes));
  return bytes;
}

}  // namespace

std::optional<TraceContext> ParseTraceparent(std::string_view value) {
  if (value.size() < kVersion00Size) return std::nullopt;
  if (value[2] != '-' || value[35] != '-' || value[52] != '-') return std::nullopt;
  uint8_t version = 0;
  uint8_t flags = 0;
  if (!DecodeHex(value.substr(0, 2), std::span(&version, 1))) return std::nullopt;
  if (version == 0xff) return std::nullopt;
  if (version == 0 && value.size() != kVersion00Size) return std::nullopt;
  // A later version may append fields, each after a '-'.
  if (value.size() > kVersion00Size && value[kVersion00Size] != '-') return std::nullopt;
  TraceContext context;
  if (!DecodeHex(value.substr(3, 32), context.trace_id) ||
      !DecodeHex(value.substr(36, 16), context.span_id) ||
      !DecodeHex(value.substr(53, 2), std::span(&flags, 1))) {
    return std::nullopt;
  }
  if (AllZero(context.trace_id) || AllZero(context.span_id)) return std::nullopt;
  context.sampled = (flags & 0x01) != 0;
  return context;
}

std::string FormatTraceparent(const TraceId& trace_id, const SpanId& span_id, bool sampled) {
  std::string out;
  out.reserve(kVersion00Size);
  out += "00-";
  out += ToHex(trace_id);
  out += '-';
  out += ToHex(span_id);
  out += sampled ? "-01" : "-00";
  return out;
}

TraceId NewTraceId() { return RandomNonZero<16>(); }

SpanId NewSpanId() { return RandomNonZero<8>(); }

std::string ToHex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (const uint8_t b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 0x0f];
  }
  return out;
}

}  // namespace strata::trace
