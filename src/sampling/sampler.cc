#include "strata/sampling/sampler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>

#include "strata/sampling/deterministic_exp.h"

namespace strata::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Candidate {
  float value;  // a logit or an unnormalised probability, by stage
  int32_t id;
};

// The canonical order of candidates: larger value first, ties to the lower id. A strict total
// order (values are never NaN), so every selection below has exactly one answer.
bool Before(const Candidate& a, const Candidate& b) {
  return a.value > b.value || (a.value == b.value && a.id < b.id);
}

// !Before(cut, c): c is `cut` or canonically before it. Bitwise, so it compiles without
// branches.
bool NotAfter(const Candidate& c, const Candidate& cut) {
  return (c.value > cut.value) | ((c.value == cut.value) & (c.id <= cut.id));
}

// Radix select, most significant digits first: 11 + 11 + 10 bits of a 32-bit key.
constexpr int kRadixLevels = 3;
constexpr int kRadixShift[kRadixLevels] = {21, 10, 0};
constexpr uint32_t kRadixMask[kRadixLevels] = {0x7FF, 0x7FF, 0x3FF};
constexpr size_t kRadixBuckets = 2048;
// Neighbouring items often fall in one bucket; spreading them over separate histogram copies
// (combined in a fixed order) keeps each increment from waiting on the previous one.
constexpr size_t kHistogramCopies = 4;
// Up to this many items, RadixCut sorts instead.
constexpr size_t kSortBelow = 512;

// Per-thread buffers: the engine thread samples every sequence, so one set serves them all.
struct Scratch {
  std::vector<Candidate> candidates;  // a buffer of at least vocab_size entries once used
  std::vector<Candidate> top;
  std::vector<Candidate> radix[2];
  std::array<double, kHistogramCopies * kRadixBuckets> mass_histogram;
  std::array<uint32_t, kHistogramCopies * kRadixBuckets> count_histogram;
  std::vector<double> block_sums;
  std::vector<float> block_maxima;
  std::vector<Candidate> above_bound;
  std::vector<float> raw_logits;
  std::vector<TokenCount> counts;
};

// On the heap: its histograms (~100 KB) would otherwise sit in every thread's static TLS, which
// must fit the stack of threads other libraries start with small stacks (civetweb's 100 KB).
Scratch& ThreadScratch() {
  thread_local std::unique_ptr<Scratch> scratch = std::make_unique<Scratch>();
  return *scratch;
}

// An unsigned key in the same order as the float (no NaN; -0 and +0 equal, as they compare).
// Branch-free: logits' signs are random, so a branch here would mispredict half the time.
uint32_t OrderKey(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x + 0.0f);  // -0 + 0 = +0; all else unchanged
  const uint32_t flip =
      static_cast<uint32_t>(std::bit_cast<int32_t>(bits) >> 31) | 0x80000000u;  // ~ if negative
  return bits ^ flip;
}

float ValueOf(float x) { return x; }
float ValueOf(const Candidate& c) { return c.value; }
int32_t IdOf(float, size_t index) { return static_cast<int32_t>(index); }
int32_t IdOf(const Candidate& c, size_t) { return c.id; }

// What RadixCut accumulates: item counts (the k-th item) or their values (the nucleus).
enum class Weigh { kCount, kMass };

template <Weigh kWeigh>
double WeightOf(float value) {
  return kWeigh == Weigh::kCount ? 1.0 : static_cast<double>(value);
}

// Histograms `items` by one digit into `merged` (weights per bucket).
template <Weigh kWeigh, typename Item>
void Histogram(std::span<const Item> items, int level, Scratch& scratch,
               std::array<double, kRadixBuckets>& merged) {
  const int shift = kRadixShift[level];
  const uint32_t mask = kRadixMask[level];
  auto bucket = [&](const Item& item) { return (OrderKey(ValueOf(item)) >> shift) & mask; };
  auto run = [&](auto& histogram) {
    auto add = [&](size_t copy, const Item& item) {
      if constexpr (kWeigh == Weigh::kCount) {
        ++histogram[copy * kRadixBuckets + bucket(item)];
      } else {
        histogram[copy * kRadixBuckets + bucket(item)] += ValueOf(item);
      }
    };
    std::fill(histogram.begin(), histogram.end(), 0);
    size_t i = 0;
    for (; i + kHistogramCopies <= items.size(); i += kHistogramCopies) {
      for (size_t copy = 0; copy < kHistogramCopies; ++copy) add(copy, items[i + copy]);
    }
    for (; i < items.size(); ++i) add(0, items[i]);
    for (size_t b = 0; b <= mask; ++b) {
      double sum = 0.0;
      for (size_t copy = 0; copy < kHistogramCopies; ++copy) {
        sum += histogram[copy * kRadixBuckets + b];
      }
      merged[b] = sum;
    }
  };
  if constexpr (kWeigh == Weigh::kCount) {
    run(scratch.count_histogram);
  } else {
    run(scratch.mass_histogram);
  }
}

// One digit of RadixCut: histograms `items` by the digit, walks the buckets from the largest
// value down and stops at the bucket where the running weight `*acc` would reach `target`
// (adding the buckets above it to *acc). Gathers that bucket's items, in their order, into
// `out`; returns false when no bucket reaches the target.
template <Weigh kWeigh, typename Item>
bool RadixLevel(std::span<const Item> items, int level, double target, double* acc,
                Scratch& scratch, std::vector<Candidate>& out) {
  std::array<double, kRadixBuckets> merged;
  Histogram<kWeigh>(items, level, scratch, merged);
  const int shift = kRadixShift[level];
  const uint32_t mask = kRadixMask[level];
  int64_t boundary = -1;
  for (int64_t b = mask; b >= 0; --b) {
    if (*acc + merged[static_cast<size_t>(b)] >= target) {
      boundary = b;
      break;
    }
    *acc += merged[static_cast<size_t>(b)];
  }
  if (boundary < 0) return false;
  out.clear();
  for (size_t i = 0; i < items.size(); ++i) {
    const float value = ValueOf(items[i]);
    if (((OrderKey(value) >> shift) & mask) == static_cast<uint32_t>(boundary)) {
      out.push_back({value, IdOf(items[i], i)});
    }
  }
  return true;
}

template <typename Item>
Candidate CanonicalLast(std::span<const Item> items) {
  Candidate last{ValueOf(items[0]), IdOf(items[0], 0)};
  for (size_t i = 1; i < items.size(); ++i) {
    const Candidate c{ValueOf(items[i]), IdOf(items[i], i)};
    if (Before(last, c)) last = c;
  }
  return last;
}

// The cut of `items` (ascending ids; a plain value span means ids 0, 1, ...): the canonically
// first item c such that the items canonically up to and including c weigh at least `target`,
// or the canonically last item when all of them together fall short. With Weigh::kCount every
// item weighs 1 and the cut is the k-th item (target k); with Weigh::kMass an item weighs its
// value (>= 0) and the cut ends a nucleus.
//
// Three histogram passes over shrinking sets, no sorting: O(n) whatever the distribution (a
// plain sort below kSortBelow items).
// Every sum runs in an order this code fixes, never one a standard library chooses, and counts
// are exact; masses are exact up to double rounding (relative 1e-16).
template <Weigh kWeigh, typename Item>
Candidate RadixCut(std::span<const Item> items, double target, Scratch& scratch) {
  STRATA_CHECK(!items.empty());
  double acc = 0.0;
  if (items.size() <= kSortBelow) {
    // Few items: clearing the histograms would cost more than sorting. The order is strict and
    // total, so the sorted sequence (and the sum along it) is unique.
    std::vector<Candidate>& sorted = scratch.radix[0];
    sorted.clear();
    for (size_t i = 0; i < items.size(); ++i) {
      sorted.push_back({ValueOf(items[i]), IdOf(items[i], i)});
    }
    std::sort(sorted.begin(), sorted.end(), Before);
    for (const Candidate& c : sorted) {
      acc += WeightOf<kWeigh>(c.value);
      if (acc >= target) return c;
    }
    return sorted.back();
  }
  if (!RadixLevel<kWeigh>(items, 0, target, &acc, scratch, scratch.radix[0])) {
    return CanonicalLast(items);
  }
  for (int level = 1; level < kRadixLevels; ++level) {
    const std::vector<Candidate>& in = scratch.radix[(level - 1) % 2];
    if (!RadixLevel<kWeigh>(std::span<const Candidate>(in), level, target, &acc, scratch,
                            scratch.radix[level % 2])) {
      // Summed per sub-bucket, the bucket fell short of its own total by rounding: all of it.
      return CanonicalLast(std::span<const Candidate>(in));
    }
  }
  // All 32 key bits agree: one value, so canonical order is id order, which gathering kept.
  const std::vector<Candidate>& tied = scratch.radix[(kRadixLevels - 1) % 2];
  for (const Candidate& c : tied) {
    acc += WeightOf<kWeigh>(c.value);
    if (acc >= target) return c;
  }
  return tied.back();
}

struct ArgMax {
  float value;
  int32_t id;
};

// Independent accumulators break the dependency chain of a reduction so that it vectorises;
// the lanes are combined in a fixed order, so results do not depend on the compiler.
constexpr size_t kLanes = 16;

float MaxOf(std::span<const float> values) {
  float lanes[kLanes];
  std::fill(std::begin(lanes), std::end(lanes), kNegInf);
  size_t i = 0;
  for (; i + kLanes <= values.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      lanes[j] = values[i + j] > lanes[j] ? values[i + j] : lanes[j];
    }
  }
  float max = kNegInf;
  for (; i < values.size(); ++i) max = values[i] > max ? values[i] : max;
  for (const float lane : lanes) max = lane > max ? lane : max;
  return max;
}

// Calls fn(i), in ascending order, for every i with values[i] >= threshold, and stops early
// when fn returns false. Most values are below the threshold wherever this is used, so whole
// chunks are ruled out by one vectorised test.
template <typename Fn>
void ForEachAtLeast(std::span<const float> values, float threshold, Fn fn) {
  size_t start = 0;
  for (; start + kLanes <= values.size(); start += kLanes) {
    int any = 0;
    for (size_t j = 0; j < kLanes; ++j) any |= values[start + j] >= threshold;
    if (any == 0) continue;
    for (size_t i = start; i < start + kLanes; ++i) {
      if (values[i] >= threshold && !fn(i)) return;
    }
  }
  for (size_t i = start; i < values.size(); ++i) {
    if (values[i] >= threshold && !fn(i)) return;
  }
}

// The highest value and the lowest id holding it, by two passes: the maximum, then the first
// value that reaches it. (NaN never compares greater or equal, so NaN is passed over.)
ArgMax FindArgMaxTwoPass(std::span<const float> logits) {
  const float max = MaxOf(logits);
  size_t id = 0;
  ForEachAtLeast(logits, max, [&](size_t i) {
    id = i;
    return false;
  });
  return {max, static_cast<int32_t>(id)};
}

bool HasNan(std::span<const float> logits) {
  int lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= logits.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lanes[j] |= logits[i + j] != logits[i + j];
  }
  int any = 0;
  for (; i < logits.size(); ++i) any |= logits[i] != logits[i];
  for (const int lane : lanes) any |= lane;
  return any != 0;
}

// What one pass over the logits finds: as FindArgMaxTwoPass where `found` (false only when no
// value is above -inf; NaN aside), and whether any value is NaN.
struct LogitScan {
  ArgMax best;
  bool found;
  bool nan;
};

// One pass over the row instead of three (the NaN test, the maximum, the first id reaching
// it): per 1024-value chunk, while it is in L1, its maximum and its NaN test; then the first
// chunk holding the highest maximum is searched for its first id.
LogitScan ScanLogits(std::span<const float> logits) {
  constexpr size_t kChunk = 1024;
  float best = kNegInf;
  size_t best_chunk = 0;
  bool nan = false;
  for (size_t i = 0; i < logits.size(); i += kChunk) {
    const std::span<const float> chunk = logits.subspan(i, std::min(kChunk, logits.size() - i));
    const float max = MaxOf(chunk);
    nan = nan || HasNan(chunk);
    if (max > best) {
      best = max;
      best_chunk = i;
    }
  }
  if (!(best > kNegInf)) return {{best, 0}, false, nan};
  size_t id = best_chunk;
  while (!(logits[id] >= best)) ++id;  // the chunk holds a value equal to its maximum
  return {{best, static_cast<int32_t>(id)}, true, nan};
}

// The highest value and the lowest id holding it.
ArgMax FindArgMax(std::span<const float> logits) {
  const LogitScan scan = ScanLogits(logits);
  return scan.found ? scan.best : FindArgMaxTwoPass(logits);
}

// Replaces NaN with -inf (a separate, rarely taken pass) and finds the argmax.
ArgMax SanitizeAndArgMax(std::span<float> logits) {
  const LogitScan scan = ScanLogits(logits);
  if (scan.nan) {
    for (float& x : logits) {
      if (std::isnan(x)) x = kNegInf;
    }
  }
  return scan.found ? scan.best : FindArgMaxTwoPass(logits);
}

// Weights are summed in blocks so that a draw can skip whole blocks; within a block, over
// interleaved lanes added in lane order. Fixed orders, so the sums are the same everywhere.
constexpr size_t kBlock = 1024;
constexpr size_t kSumLanes = 8;

template <typename Item>
double SumBlock(std::span<const Item> items) {
  double lanes[kSumLanes] = {};
  size_t i = 0;
  for (; i + kSumLanes <= items.size(); i += kSumLanes) {
    for (size_t j = 0; j < kSumLanes; ++j) lanes[j] += ValueOf(items[i + j]);
  }
  double sum = 0.0;
  for (const double lane : lanes) sum += lane;
  for (; i < items.size(); ++i) sum += ValueOf(items[i]);
  return sum;
}

// The loops over a whole row of weights, compiled for each x86-64 vector width and chosen when
// the library loads (GCC/Clang target_clones; elsewhere one build). Each clone runs the same
// IEEE operations in the same order per element, and the file is built with -ffp-contract=off
// so that no clone fuses them into FMAs: the weights, sums and survivors are the same bits
// whichever clone runs (SamplerMatchesReference checks them against a scalar reference).
// Not under ThreadSanitizer, whose runtime is not up yet when the loader runs the clones'
// resolvers (the TSan test binaries crash before main).
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && !defined(__SANITIZE_THREAD__)
#define STRATA_ROW_LOOP __attribute__((target_clones("default", "avx2", "avx512f")))
#else
#define STRATA_ROW_LOOP
#endif

// A logit's unnormalised probability. (logit - max) <= 0 before scaling, so no temperature
// overflows; the best token weighs 1.
float Weight(float logit, float max_logit, float inv_temperature) {
  return DeterministicExp((logit - max_logit) * inv_temperature);
}

// logits[i] = Weight(logits[i]), in place.
STRATA_ROW_LOOP void WeighRow(float* logits, size_t n, float max_logit, float inv_temperature) {
  for (size_t i = 0; i < n; ++i) logits[i] = Weight(logits[i], max_logit, inv_temperature);
}

STRATA_ROW_LOOP double SumFloatBlock(const float* items, size_t n) {
  return SumBlock(std::span<const float>(items, n));
}

// Appends {weights[i], i} for every weights[i] >= min_weight to `out` in id order; returns the
// count. Runs of 16 weights with no survivor (most of a model's row once the floor is set) are
// passed over after one vector compare; the others are written without a branch per id.
STRATA_ROW_LOOP size_t KeepAtLeast(const float* weights, size_t n, float min_weight,
                                   Candidate* out) {
  constexpr size_t kRun = 16;
  size_t count = 0;
  size_t i = 0;
  for (; i + kRun <= n; i += kRun) {
    uint32_t any = 0;
    for (size_t j = 0; j < kRun; ++j) any |= weights[i + j] >= min_weight ? 1u : 0u;
    if (any == 0) continue;
    for (size_t j = i; j < i + kRun; ++j) {
      out[count] = {weights[j], static_cast<int32_t>(j)};
      count += weights[j] >= min_weight;
    }
  }
  for (; i < n; ++i) {
    out[count] = {weights[i], static_cast<int32_t>(i)};
    count += weights[i] >= min_weight;
  }
  return count;
}

double SumBlockOf(std::span<const float> items) {
  return SumFloatBlock(items.data(), items.size());
}
double SumBlockOf(std::span<const Candidate> items) { return SumBlock(items); }

// Fills `blocks` with the weights of consecutive kBlock-sized blocks of `items`; returns their
// sum, added in block order.
template <typename Item>
double SumBlocks(std::span<const Item> items, std::vector<double>& blocks) {
  blocks.clear();
  double total = 0.0;
  for (size_t start = 0; start < items.size(); start += kBlock) {
    blocks.push_back(SumBlockOf(items.subspan(start, std::min(kBlock, items.size() - start))));
    total += blocks.back();
  }
  return total;
}

// Inverse CDF within one block: the index of the first item whose running weight exceeds
// `target`; when rounding leaves the running sum short, the last item of positive weight. An
// item of weight 0 is never chosen.
template <typename Item>
size_t DrawInBlock(std::span<const Item> items, double target) {
  double acc = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const float w = ValueOf(items[i]);
    if (w <= 0.0f) continue;
    acc += w;
    last_positive = i;
    if (acc > target) return i;
  }
  return last_positive;
}

// Inverse CDF over `items` in their order, given their block sums and `total` from
// SumBlocks(): the id of the first item whose running weight exceeds u * total. Whole blocks
// are skipped by their sums, then the block holding the target is scanned.
template <typename Item>
int32_t Draw(std::span<const Item> items, std::span<const double> blocks, double total, double u) {
  const double target = u * total;
  double acc = 0.0;
  size_t block = 0;
  size_t last_positive_block = 0;
  for (; block < blocks.size(); ++block) {
    if (blocks[block] > 0.0) last_positive_block = block;
    if (acc + blocks[block] > target) break;
    acc += blocks[block];
  }
  // Rounding can leave the target past the last block: take the last block with any weight.
  if (block == blocks.size()) block = last_positive_block;
  const size_t start = block * kBlock;
  // The block's running sum may round differently from its lane sum; DrawInBlock() then falls
  // back to the block's last item of positive weight.
  const size_t index =
      start +
      DrawInBlock(items.subspan(start, std::min(kBlock, items.size() - start)), target - acc);
  return IdOf(items[index], index);
}

// The k-th (1 <= k <= values.size()) of `values` in canonical order (ids are indices).
//
// For small k, a cheap bound first: of the maxima of 256-value blocks, the k-th largest, t, is
// at most the k-th largest value overall (k distinct values reach it), so every one of the k
// is >= t. Only the few values >= t then go through the radix select.
Candidate KthLargest(std::span<const float> values, size_t k, Scratch& scratch) {
  STRATA_CHECK(k >= 1 && k <= values.size());
  constexpr size_t kMaxBlock = 256;
  const size_t num_blocks = (values.size() + kMaxBlock - 1) / kMaxBlock;
  if (k > num_blocks / 4) {
    return RadixCut<Weigh::kCount>(values, static_cast<double>(k), scratch);
  }
  std::vector<float>& maxima = scratch.block_maxima;
  maxima.clear();
  for (size_t start = 0; start < values.size(); start += kMaxBlock) {
    maxima.push_back(MaxOf(values.subspan(start, std::min(kMaxBlock, values.size() - start))));
  }
  // Only the k-th value matters, which is unique, so the library's algorithm does not.
  std::nth_element(maxima.begin(), maxima.begin() + static_cast<ptrdiff_t>(k - 1), maxima.end(),
                   std::greater<float>());
  const float bound = maxima[k - 1];
  std::vector<Candidate>& above = scratch.above_bound;
  above.clear();
  ForEachAtLeast(values, bound, [&](size_t i) {
    above.push_back({values[i], static_cast<int32_t>(i)});
    return true;
  });
  return RadixCut<Weigh::kCount>(std::span<const Candidate>(above), static_cast<double>(k),
                                 scratch);
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, std::span<const int32_t> prompt_tokens)
    : params_(params), rng_(params.seed), penalties_(params) {
  STRATA_CHECK(params_.temperature >= 0.0f);
  STRATA_CHECK(params_.top_k >= 0);
  STRATA_CHECK(params_.top_p > 0.0f && params_.top_p <= 1.0f);
  STRATA_CHECK(params_.min_p >= 0.0f && params_.min_p <= 1.0f);
  STRATA_CHECK(params_.logprobs >= 0);
  if (penalties_.enabled()) {
    // Only the tail of a long prompt can still be in a bounded window.
    size_t first = 0;
    if (params_.penalty_last_n > 0 &&
        prompt_tokens.size() > static_cast<size_t>(params_.penalty_last_n)) {
      first = prompt_tokens.size() - static_cast<size_t>(params_.penalty_last_n);
    }
    for (size_t i = first; i < prompt_tokens.size(); ++i) penalties_.Push(prompt_tokens[i]);
  }
}

void Sampler::Accept(int32_t token) { penalties_.Push(token); }

double Sampler::DrawForBackend() { return params_.temperature > 0.0f ? rng_.NextDouble() : 0.0; }

int32_t Sampler::SampleWithDraw(const SamplingParams& params, std::span<const TokenCount> counts,
                                std::span<float> logits, double u, SampleLogprobs* logprobs) {
  STRATA_CHECK(!logits.empty());
  STRATA_CHECK(logits.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()));
  const ArgMax raw_best = SanitizeAndArgMax(logits);
  Scratch& scratch = ThreadScratch();
  const bool want_logprobs = logprobs != nullptr && params.logprobs > 0;
  if (want_logprobs) scratch.raw_logits.assign(logits.begin(), logits.end());

  ArgMax best = raw_best;
  if (!counts.empty()) {
    ApplyPenalties(params, counts, logits);
    best = FindArgMax(logits);
  }
  int32_t chosen = best.id;
  if (params.temperature > 0.0f && std::isfinite(best.value)) {
    chosen = SampleStochastic(params, logits, best.value, u);
  }
  if (want_logprobs) {
    FillLogprobs(params.logprobs, scratch.raw_logits, raw_best.value, chosen, logprobs);
  }
  return chosen;
}

int32_t Sampler::Sample(std::span<float> logits) {
  // One draw per sampled token whatever the logits hold, as DrawForBackend, so the generator's
  // stream does not depend on where the token was sampled.
  const double u = DrawForBackend();
  std::vector<TokenCount>& counts = ThreadScratch().counts;
  counts.clear();
  penalties_.AppendCounts(&counts);
  return SampleWithDraw(params_, counts, logits, u, &logprobs_);
}

int32_t Sampler::SampleStochastic(const SamplingParams& params, std::span<float> logits,
                                  float max_logit, double u) {
  Scratch& scratch = ThreadScratch();
  const size_t vocab_size = logits.size();
  // Filters below compact in place without branching on each token where which tokens survive
  // is unpredictable: write every one, advance past the survivors.
  if (scratch.candidates.size() < vocab_size) scratch.candidates.resize(vocab_size);
  Candidate* const candidates = scratch.candidates.data();
  size_t count = 0;

  const float inv_temperature = 1.0f / params.temperature;

  double total = 0.0;  // mass of the tokens top_k keeps, before min_p and top_p
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab_size) {
    const Candidate kth = KthLargest(logits, static_cast<size_t>(params.top_k), scratch);
    ForEachAtLeast(logits, kth.value, [&](size_t i) {
      const Candidate c{logits[i], static_cast<int32_t>(i)};
      if (NotAfter(c, kth)) candidates[count++] = c;
      return true;
    });
    for (size_t i = 0; i < count; ++i) {
      candidates[i].value = Weight(candidates[i].value, max_logit, inv_temperature);
      total += candidates[i].value;
    }
    if (params.min_p > 0.0f) {
      size_t kept = 0;
      for (size_t i = 0; i < count; ++i) {
        const Candidate c = candidates[i];
        candidates[kept] = c;
        kept += c.value >= params.min_p;
      }
      count = kept;
    }
  } else {
    WeighRow(logits.data(), vocab_size, max_logit, inv_temperature);
    total = SumBlocks(std::span<const float>(logits), scratch.block_sums);
    if (params.top_p >= 1.0f && params.min_p <= 0.0f) {
      return Draw(std::span<const float>(logits), scratch.block_sums, total, u);
    }
    // Every token below `floor` can be dropped up front: min_p drops it anyway, and for top_p
    // such tokens together weigh less than vocab_size * (1 - top_p) * total / vocab_size, so
    // the survivors alone reach top_p and hold the whole nucleus. The best token (weight 1)
    // always survives: total <= vocab_size, and the clamp covers its rounding.
    double floor = params.min_p;
    if (params.top_p < 1.0f) {
      floor = std::max(floor, (1.0 - params.top_p) * total / static_cast<double>(vocab_size));
    }
    floor = std::min(floor, 1.0);
    const float min_weight = std::max(static_cast<float>(floor), std::numeric_limits<float>::min());
    count = KeepAtLeast(logits.data(), vocab_size, min_weight, candidates);
  }

  if (params.top_p < 1.0f) {
    const Candidate cut =
        RadixCut<Weigh::kMass>(std::span<const Candidate>(candidates, count),
                               static_cast<double>(params.top_p) * total, scratch);
    size_t kept = 0;
    for (size_t i = 0; i < count; ++i) {
      const Candidate c = candidates[i];
      candidates[kept] = c;
      kept += NotAfter(c, cut);
    }
    count = kept;
  }
  STRATA_CHECK(count > 0);

  const std::span<const Candidate> survivors(candidates, count);
  const double kept_mass = SumBlocks(survivors, scratch.block_sums);
  return Draw(survivors, scratch.block_sums, kept_mass, u);
}

void Sampler::FillLogprobs(int32_t n_top, std::span<const float> raw_logits, float raw_max,
                           int32_t chosen, SampleLogprobs* out) {
  Scratch& scratch = ThreadScratch();
  // log-softmax(x)_i = x_i - (max + log sum exp(x - max)).
  double lanes[kSumLanes] = {};
  size_t i = 0;
  for (; i + kSumLanes <= raw_logits.size(); i += kSumLanes) {
    for (size_t j = 0; j < kSumLanes; ++j) {
      lanes[j] += DeterministicExp(raw_logits[i + j] - raw_max);
    }
  }
  double sum = 0.0;
  for (const double lane : lanes) sum += lane;
  for (; i < raw_logits.size(); ++i) sum += DeterministicExp(raw_logits[i] - raw_max);
  const float log_normalizer = raw_max + static_cast<float>(std::log(sum));
  // Without a finite maximum there is no distribution; report the maxima as certain.
  auto logprob = [&](float x) {
    if (std::isfinite(raw_max)) return x - log_normalizer;
    return x == raw_max ? 0.0f : kNegInf;
  };

  out->chosen = {chosen, logprob(raw_logits[static_cast<size_t>(chosen)])};
  const size_t n = std::min(static_cast<size_t>(n_top), raw_logits.size());
  const Candidate nth = KthLargest(raw_logits, n, scratch);
  std::vector<Candidate>& top = scratch.top;
  top.clear();
  ForEachAtLeast(raw_logits, nth.value, [&](size_t k) {
    const Candidate c{raw_logits[k], static_cast<int32_t>(k)};
    if (NotAfter(c, nth)) top.push_back(c);
    return true;
  });
  std::sort(top.begin(), top.end(), Before);  // at most kMaxLogprobs entries
  out->top.clear();
  for (const Candidate& c : top) out->top.push_back({c.id, logprob(c.value)});
}

}  // namespace strata::sampling
