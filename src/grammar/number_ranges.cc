#include "number_ranges.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace strata::grammar::internal {
namespace {

using Rect = std::vector<std::pair<char, char>>;  // one digit range per position

// Equal-length digit strings a <= b: the strings between them as a union of rectangles.
void Rects(const std::string& a, const std::string& b, Rect prefix, std::vector<Rect>* out) {
  if (a.empty()) {
    out->push_back(std::move(prefix));
    return;
  }
  const std::string ra = a.substr(1), rb = b.substr(1);
  if (a[0] == b[0]) {
    prefix.push_back({a[0], a[0]});
    Rects(ra, rb, std::move(prefix), out);
    return;
  }
  const bool lo_full = ra.find_first_not_of('0') == std::string::npos;
  const bool hi_full = rb.find_first_not_of('9') == std::string::npos;
  if (!lo_full) {
    Rect p = prefix;
    p.push_back({a[0], a[0]});
    Rects(ra, std::string(ra.size(), '9'), std::move(p), out);
  }
  const char start = static_cast<char>(a[0] + (lo_full ? 0 : 1));
  const char end = static_cast<char>(b[0] - (hi_full ? 0 : 1));
  if (start <= end) {
    Rect p = prefix;
    p.push_back({start, end});
    for (size_t i = 0; i < ra.size(); ++i) p.push_back({'0', '9'});
    out->push_back(std::move(p));
  }
  if (!hi_full) {
    Rect p = prefix;
    p.push_back({b[0], b[0]});
    Rects(std::string(rb.size(), '0'), rb, std::move(p), out);
  }
}

std::string RenderRect(const Rect& r, size_t dot_before = std::string::npos) {
  std::string out;
  for (size_t i = 0; i < r.size(); ++i) {
    if (i == dot_before) out += " \".\"";
    if (!out.empty()) out += ' ';
    if (r[i].first == r[i].second) {
      out += std::string("\"") + r[i].first + "\"";
    } else {
      out += std::string("[") + r[i].first + "-" + r[i].second + "]";
    }
  }
  return out.empty() ? "\"\"" : out;
}

// Non-negative integers in [lo, hi] as alternatives (decimal, no leading zeros).
void UintAlternatives(uint64_t lo, uint64_t hi, std::vector<std::string>* alts) {
  uint64_t pow = 1;
  for (int len = 1; len <= 19 && lo <= hi; ++len) {
    const uint64_t len_lo = len == 1 ? 0 : pow;
    const uint64_t len_hi = pow * 10 - 1;
    pow *= 10;
    if (hi < len_lo || lo > len_hi) continue;
    const uint64_t a = std::max(lo, len_lo), b = std::min(hi, len_hi);
    std::vector<Rect> rects;
    Rects(std::to_string(a), std::to_string(b), {}, &rects);
    for (const Rect& r : rects) alts->push_back(RenderRect(r));
  }
}

std::string Join(const std::vector<std::string>& alts) {
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

bool Satisfies(double v, const std::optional<NumberBound>& lower,
               const std::optional<NumberBound>& upper) {
  if (lower && (lower->exclusive ? !(v > lower->value) : !(v >= lower->value))) return false;
  if (upper && (upper->exclusive ? !(v < upper->value) : !(v <= upper->value))) return false;
  return true;
}

// Smallest integer satisfying the lower bound, capped.
int64_t LowInt(const std::optional<NumberBound>& lower) {
  if (!lower) return -kMaxBoundedInteger;
  const double v = lower->exclusive ? std::floor(lower->value) + 1 : std::ceil(lower->value);
  if (v > static_cast<double>(kMaxBoundedInteger)) return kMaxBoundedInteger + 1;
  return std::max<int64_t>(static_cast<int64_t>(std::max(v, -1e18)), -kMaxBoundedInteger);
}

int64_t HighInt(const std::optional<NumberBound>& upper) {
  if (!upper) return kMaxBoundedInteger;
  const double v = upper->exclusive ? std::ceil(upper->value) - 1 : std::floor(upper->value);
  if (v < -static_cast<double>(kMaxBoundedInteger)) return -kMaxBoundedInteger - 1;
  return std::min<int64_t>(static_cast<int64_t>(std::min(v, 1e18)), kMaxBoundedInteger);
}

int64_t FloorCapped(double v) {
  return static_cast<int64_t>(std::clamp(std::floor(v), -1e16, 1e16));
}

}  // namespace

std::string IntegerRangeGbnf(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (hi >= 0) UintAlternatives(static_cast<uint64_t>(std::max<int64_t>(lo, 0)), hi, &alts);
  if (lo < 0) {
    std::vector<std::string> neg;
    UintAlternatives(static_cast<uint64_t>(std::max<int64_t>(1, -std::min<int64_t>(hi, -1))),
                     static_cast<uint64_t>(-lo), &neg);
    alts.push_back("\"-\" " + Join(neg));
  }
  return Join(alts);
}

std::optional<std::string> BoundedIntegerGbnf(std::optional<NumberBound> lower,
                                              std::optional<NumberBound> upper) {
  const int64_t lo = LowInt(lower), hi = HighInt(upper);
  if (lo > hi) return std::nullopt;
  return IntegerRangeGbnf(lo, hi);
}

std::optional<std::string> BoundedNumberGbnf(std::optional<NumberBound> lower,
                                             std::optional<NumberBound> upper) {
  // Fraction forms keep at most 15 significant digits (9 + 6), so decimal order survives the
  // conversion to double and "k.dddddd" stays strictly between k and k + 1.
  constexpr int64_t kMaxFractionInt = 999999999;
  const std::string kFraction = "\".\" [0-9]{1,6}";
  std::vector<std::string> alts;
  if (auto ints = BoundedIntegerGbnf(lower, upper)) alts.push_back(*ints);
  const int64_t lo_i = LowInt(lower), hi_i = HighInt(upper);
  // k.ddd in [k, k + 1): k >= lo_i and k + 1 <= upper.
  {
    const int64_t a = std::max<int64_t>(0, lo_i);
    const int64_t b =
        std::min(kMaxFractionInt, upper ? FloorCapped(upper->value) - 1 : kMaxFractionInt);
    if (a <= b) alts.push_back(IntegerRangeGbnf(a, b) + " " + kFraction);
  }
  // -k.ddd in (-(k + 1), -k]: -k <= hi_i and -(k + 1) >= lower.
  {
    const int64_t c = std::max<int64_t>(0, -hi_i);
    const int64_t d =
        std::min(kMaxFractionInt, lower ? FloorCapped(-lower->value) - 1 : kMaxFractionInt);
    if (c <= d) alts.push_back("\"-\" " + IntegerRangeGbnf(c, d) + " " + kFraction);
  }
  if (!alts.empty()) return Join(alts);
  // A narrow interval inside one unit interval: numbers with exactly p fraction digits.
  if (!lower || !upper) return std::nullopt;
  const bool negative = upper->value <= 0;
  for (int p = 1; p <= 9; ++p) {
    const double scale = std::pow(10.0, p);
    // Work on magnitudes: for negative intervals the bounds swap.
    const double mag_lo = negative ? -upper->value : lower->value;
    const double mag_hi = negative ? -lower->value : upper->value;
    if (mag_hi * scale > 1e15) break;
    int64_t n_lo = static_cast<int64_t>(std::floor(mag_lo * scale)) - 1;
    int64_t n_hi = static_cast<int64_t>(std::ceil(mag_hi * scale)) + 1;
    auto text = [&](int64_t n) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%s%lld.%0*lld", negative ? "-" : "",
                    static_cast<long long>(n / static_cast<int64_t>(scale)), p,
                    static_cast<long long>(n % static_cast<int64_t>(scale)));
      return std::string(buf);
    };
    auto ok = [&](int64_t n) {
      return n >= 0 && Satisfies(std::strtod(text(n).c_str(), nullptr), lower, upper);
    };
    while (n_lo <= n_hi && !ok(n_lo)) ++n_lo;
    while (n_hi >= n_lo && !ok(n_hi)) --n_hi;
    if (n_lo > n_hi) continue;
    const int64_t s = static_cast<int64_t>(scale);
    if (n_lo / s != n_hi / s) continue;  // not inside one unit interval: handled above
    char int_part[32];
    std::snprintf(int_part, sizeof(int_part), "%lld", static_cast<long long>(n_lo / s));
    char f_lo[32], f_hi[32];
    std::snprintf(f_lo, sizeof(f_lo), "%0*lld", p, static_cast<long long>(n_lo % s));
    std::snprintf(f_hi, sizeof(f_hi), "%0*lld", p, static_cast<long long>(n_hi % s));
    std::vector<Rect> rects;
    Rects(f_lo, f_hi, {}, &rects);
    std::vector<std::string> fr;
    for (const Rect& r : rects) fr.push_back(RenderRect(r));
    return std::string(negative ? "\"-\" " : "") + "\"" + int_part + ".\" " + Join(fr);
  }
  return std::nullopt;
}

}  // namespace strata::grammar::internal
