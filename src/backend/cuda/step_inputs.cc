#include "step_inputs.h"

#include <algorithm>
#include <cstring>

namespace strata::backend::cuda {
namespace {

int64_t Align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

template <typename T>
T* At(uint8_t* base, int64_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

}  // namespace

StepShape ShapeOfBatch(const Batch& batch, int32_t block_size) {
  StepShape s;
  s.num_seqs = static_cast<int64_t>(batch.sequences.size());
  s.decode_only = !batch.sequences.empty();
  for (const SequenceSlice& seq : batch.sequences) {
    const int64_t len = static_cast<int64_t>(seq.tokens.size());
    const int64_t end = seq.start_pos + len;
    s.num_tokens += len;
    s.num_rows += LogitsRows(seq);
    s.table_len += (end + block_size - 1) / block_size;
    s.max_query_len = std::max(s.max_query_len, static_cast<int32_t>(len));
    s.max_context = std::max(s.max_context, end);
    s.decode_only = s.decode_only && len == 1;
  }
  return s;
}

std::vector<RowRun> LogitRowRuns(const Batch& batch) {
  std::vector<RowRun> runs;
  int64_t t = 0;
  int64_t row = 0;
  for (const SequenceSlice& seq : batch.sequences) {
    const int64_t len = static_cast<int64_t>(seq.tokens.size());
    const int64_t wanted = LogitsRows(seq);
    if (wanted > 0) {
      const int64_t src = t + len - wanted;
      if (!runs.empty() && runs.back().src + runs.back().count == src) {
        runs.back().count += wanted;
      } else {
        runs.push_back(RowRun{src, row, wanted});
      }
      row += wanted;
    }
    t += len;
  }
  return runs;
}

DecodeFirstStep OrderDecodeFirst(const Batch& batch) {
  DecodeFirstStep step;
  const size_t n = batch.sequences.size();
  std::vector<size_t> order;
  order.reserve(n);
  for (size_t s = 0; s < n; ++s) {
    if (batch.sequences[s].tokens.size() == 1) order.push_back(s);
  }
  step.num_decode = static_cast<int64_t>(order.size());
  for (size_t s = 0; s < n; ++s) {
    if (batch.sequences[s].tokens.size() != 1) order.push_back(s);
  }
  // Each slice's first logits row in batch order.
  std::vector<int64_t> first_row(n);
  int64_t row = 0;
  for (size_t s = 0; s < n; ++s) {
    first_row[s] = row;
    row += LogitsRows(batch.sequences[s]);
  }
  step.batch.sequences.reserve(n);
  int64_t t = 0;
  for (const size_t s : order) {
    const SequenceSlice& seq = batch.sequences[s];
    step.batch.sequences.push_back(seq);
    const int64_t len = static_cast<int64_t>(seq.tokens.size());
    const int64_t wanted = LogitsRows(seq);
    if (wanted > 0) {
      const RowRun run{t + len - wanted, first_row[s], wanted};
      RowRun* last = step.runs.empty() ? nullptr : &step.runs.back();
      if (last != nullptr && last->src + last->count == run.src &&
          last->dst + last->count == run.dst) {
        last->count += wanted;
      } else {
        step.runs.push_back(run);
      }
    }
    t += len;
  }
  return step;
}

StepLayout StepLayout::For(int64_t max_tokens, int64_t max_seqs, int64_t max_table) {
  StepLayout l;
  int64_t at = 0;
  auto take = [&](int64_t bytes) {
    const int64_t offset = at;
    at += Align256(bytes);
    return offset;
  };
  l.tokens = take(max_tokens * 4);
  l.positions = take(max_tokens * 8);
  l.slots = take(max_tokens * 8);
  l.context_lens = take(max_seqs * 4);
  l.table_offsets = take(max_seqs * 4);
  l.cu_seqlens = take((max_seqs + 1) * 4);
  l.block_table = take(max_table * 4);
  l.total_bytes = at;
  return l;
}

StepInputs StepInputs::At(const void* base, const StepLayout& layout) {
  const auto* b = static_cast<const uint8_t*>(base);
  StepInputs in;
  in.tokens = reinterpret_cast<const int32_t*>(b + layout.tokens);
  in.positions = reinterpret_cast<const int64_t*>(b + layout.positions);
  in.slots = reinterpret_cast<const int64_t*>(b + layout.slots);
  in.context_lens = reinterpret_cast<const int32_t*>(b + layout.context_lens);
  in.table_offsets = reinterpret_cast<const int32_t*>(b + layout.table_offsets);
  in.cu_seqlens = reinterpret_cast<const int32_t*>(b + layout.cu_seqlens);
  in.block_table = reinterpret_cast<const int32_t*>(b + layout.block_table);
  return in;
}

int64_t FillStepInputs(const Batch& batch, int32_t block_size, int64_t padded_seqs,
                       const StepLayout& layout, uint8_t* host) {
  auto* tokens = At<int32_t>(host, layout.tokens);
  auto* positions = At<int64_t>(host, layout.positions);
  auto* slots = At<int64_t>(host, layout.slots);
  auto* context_lens = At<int32_t>(host, layout.context_lens);
  auto* offsets = At<int32_t>(host, layout.table_offsets);
  auto* cu = At<int32_t>(host, layout.cu_seqlens);
  auto* table = At<int32_t>(host, layout.block_table);
  int64_t t = 0;
  int64_t table_len = 0;
  cu[0] = 0;
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceSlice& seq = batch.sequences[s];
    const int64_t len = static_cast<int64_t>(seq.tokens.size());
    const int64_t end = seq.start_pos + len;
    const int64_t blocks = (end + block_size - 1) / block_size;
    offsets[s] = static_cast<int32_t>(table_len);
    for (int64_t b = 0; b < blocks; ++b) table[table_len + b] = seq.block_ids[b];
    table_len += blocks;
    context_lens[s] = static_cast<int32_t>(end);
    for (int64_t i = 0; i < len; ++i, ++t) {
      const int64_t pos = seq.start_pos + i;
      tokens[t] = seq.tokens[i];
      positions[t] = pos;
      slots[t] =
          static_cast<int64_t>(seq.block_ids[pos / block_size]) * block_size + pos % block_size;
    }
    cu[s + 1] = static_cast<int32_t>(t);
  }
  for (int64_t s = static_cast<int64_t>(batch.sequences.size()); s < padded_seqs; ++s, ++t) {
    tokens[t] = 0;
    positions[t] = 0;
    slots[t] = -1;
    context_lens[s] = 0;
    offsets[s] = 0;
    cu[s + 1] = static_cast<int32_t>(t + 1);
  }
  return layout.block_table + table_len * 4;
}

}  // namespace strata::backend::cuda
