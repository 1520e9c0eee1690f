// strata-bench-gpu: how close Strata's CUDA path gets to the device's memory bandwidth.
//
//   strata-bench-gpu [--model MODEL.gguf] [--copy-mib N] [--attn-context N] [--attn-seqs LIST]
//                    [--decode-batches LIST] [--decode-context N] [--decode-steps N]
//                    [--prefill-tokens N] [--prefill-batch N] [--reps R]
//
// Tests, each independent (a failure is reported and the next one runs):
//   copy       device-to-device cudaMemcpyAsync of --copy-mib MiB (default 2048), timed with
//              CUDA events, best of --reps; bandwidth counts the bytes read plus the bytes
//              written (2 x size / time). Every "% of copy" below is against this number.
//   attention  one layer of paged decode attention (kernels/paged_attention.h) at Llama-3-8B's
//              shape (32 query heads over 8 KV heads of 128, fp16 KV, blocks of 16 tokens,
//              block ids shuffled) for --attn-seqs sequences (default 32,64,128) of
//              --attn-context tokens (default 4096): KV bytes read / time.
//   decode     (needs --model and the CUDA backend) one decode step of the whole model through
//              CudaBackend at each --decode-batches size (default 1,8,32,128), every sequence at
//              position --decode-context (default 512): ms per step, tokens/s, and the roofline
//              (matrix bytes + KV bytes read per step) / copy bandwidth. The KV blocks below the
//              position are not prefilled (their contents do not change the work done).
//   prefill    (needs --model and the CUDA backend) one --prefill-tokens chunk (default 2048)
//              from position 0, then --prefill-batch (default 4) such chunks in one batch:
//              TFLOP/s counting 2 flops per weight per token plus causal attention;
//              --prefill-tokens 0 leaves it out.
//
// Output: one JSON object per measurement per line on stdout, then a human table (lines
// starting with '|'). Exit code 0 when every test that ran succeeded, 1 when one failed, 2 for
// a bad flag, 3 when there is no CUDA device (nothing measured).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "strata/common/tool_args.h"
#include "strata/kernels/paged_attention.h"
#include "strata/model/gguf_file.h"
#include "strata/model/model_config.h"
#include "strata/model/model_weights.h"
#ifdef STRATA_BENCH_HAVE_CUDA_BACKEND
#include "strata/backend/cuda/cuda_backend.h"
#endif

namespace {

constexpr strata::ToolArgs kArgs("strata-bench-gpu", /*usage_exit_code=*/2);

struct Options {
  std::string model;
  int64_t copy_mib = 2048;
  int64_t attn_context = 4096;
  std::vector<int64_t> attn_seqs = {32, 64, 128};
  std::vector<int64_t> decode_batches = {1, 8, 32, 128};
  int64_t decode_context = 512;
  int64_t decode_steps = 20;
  int64_t prefill_tokens = 2048;
  int64_t prefill_batch = 4;
  int reps = 5;
};

// One row of the final table; also printed as a JSON line when recorded.
struct Row {
  std::string test;
  std::string shape;
  std::string value;     // the headline number, with its unit
  std::string vs_bound;  // against the bandwidth (or roofline)
  std::string note;
};
std::vector<Row> g_rows;
bool g_failed = false;

void Json(const std::string& body) {
  std::printf("{%s}\n", body.c_str());
  std::fflush(stdout);
}

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n') ? ' ' : c;
  }
  return out;
}

void Fail(const std::string& test, const std::string& shape, const std::string& error) {
  g_failed = true;
  Json("\"test\":\"" + test + "\",\"shape\":\"" + shape + "\",\"error\":\"" + Escape(error) + "\"");
  g_rows.push_back({test, shape, "FAILED", "", error.substr(0, 80)});
}

std::vector<int64_t> ParseList(const std::string& flag, const char* value) {
  std::vector<int64_t> out;
  std::string item;
  const std::string s = std::string(value) + ",";
  for (char c : s) {
    if (c == ',') {
      if (item.empty()) kArgs.Fail(flag + " expects a comma-separated list of positive integers");
      out.push_back(kArgs.Int(flag, item.c_str(), 1));
      item.clear();
    } else {
      item += c;
    }
  }
  return out;
}

#define CUDA_OR_FAIL(test, shape, expr)                                             \
  do {                                                                              \
    const cudaError_t err_ = (expr);                                                \
    if (err_ != cudaSuccess) {                                                      \
      Fail(test, shape, std::string(#expr " failed: ") + cudaGetErrorString(err_)); \
      return;                                                                       \
    }                                                                               \
  } while (0)

// A device allocation freed on scope exit.
struct DeviceMemory {
  void* p = nullptr;
  cudaError_t Alloc(size_t bytes) { return cudaMalloc(&p, bytes); }
  ~DeviceMemory() {
    if (p != nullptr) cudaFree(p);
  }
};

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() {
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  float Ms() const {
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return ms;
  }
};

// (a) Device-to-device copy bandwidth in bytes/s (0 on failure).
double BenchCopy(const Options& o) {
  double best = 0;
  const std::string shape = std::to_string(o.copy_mib) + " MiB";
  [&] {
    const size_t bytes = static_cast<size_t>(o.copy_mib) << 20;
    DeviceMemory a, b;
    CUDA_OR_FAIL("copy", shape, a.Alloc(bytes));
    CUDA_OR_FAIL("copy", shape, b.Alloc(bytes));
    CUDA_OR_FAIL("copy", shape, cudaMemset(a.p, 1, bytes));
    Events ev;
    double best_ms = 1e30;
    for (int r = 0; r < o.reps + 1; ++r) {  // the first is a warm-up
      cudaEventRecord(ev.start);
      CUDA_OR_FAIL("copy", shape, cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice));
      cudaEventRecord(ev.stop);
      CUDA_OR_FAIL("copy", shape, cudaEventSynchronize(ev.stop));
      if (r > 0) best_ms = std::min(best_ms, static_cast<double>(ev.Ms()));
    }
    best = 2.0 * static_cast<double>(bytes) / (best_ms * 1e-3);
    Json("\"test\":\"copy\",\"bytes\":" + std::to_string(bytes) +
         ",\"best_ms\":" + Fmt("%.4f", best_ms) + ",\"bytes_per_s\":" + Fmt("%.6g", best) +
         ",\"counted\":\"read+write\"");
    g_rows.push_back({"copy (D2D, read+write)", shape, Fmt("%.0f GB/s", best / 1e9), "100%",
                      "the bandwidth bound below"});
  }();
  return best;
}

// (b) One layer of paged decode attention at the 8B shape.
void BenchAttention(const Options& o, double bw) {
  constexpr int32_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlock = 16;
  for (int64_t seqs64 : o.attn_seqs) {
    const auto seqs = static_cast<int32_t>(seqs64);
    const auto ctx = static_cast<int32_t>(o.attn_context);
    const std::string shape = std::to_string(seqs) + " seqs x " + std::to_string(ctx) + " ctx";
    [&] {
      const int32_t blocks_per_seq = (ctx + kBlock - 1) / kBlock;
      const int64_t num_blocks = int64_t{seqs} * blocks_per_seq;
      const size_t kv_bytes =
          static_cast<size_t>(num_blocks) * kBlock * kKvHeads * kHeadDim * sizeof(uint16_t);
      DeviceMemory k, v, q, out, tables, offsets, lens, workspace;
      CUDA_OR_FAIL("attention", shape, k.Alloc(kv_bytes));
      CUDA_OR_FAIL("attention", shape, v.Alloc(kv_bytes));
      // 0x3c3c is fp16 1.06: finite keys and values.
      CUDA_OR_FAIL("attention", shape, cudaMemset(k.p, 0x3c, kv_bytes));
      CUDA_OR_FAIL("attention", shape, cudaMemset(v.p, 0x3c, kv_bytes));
      const size_t q_bytes = size_t{4} * seqs * kHeads * kHeadDim;
      CUDA_OR_FAIL("attention", shape, q.Alloc(q_bytes));
      CUDA_OR_FAIL("attention", shape, out.Alloc(q_bytes));
      CUDA_OR_FAIL("attention", shape, cudaMemset(q.p, 0, q_bytes));
      // Shuffled block ids, as a long-running server's free list hands them out.
      std::vector<int32_t> table(static_cast<size_t>(num_blocks));
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), std::mt19937(42));
      std::vector<int32_t> offs(seqs), ctx_lens(seqs, ctx);
      for (int32_t s = 0; s < seqs; ++s) offs[s] = s * blocks_per_seq;
      CUDA_OR_FAIL("attention", shape, tables.Alloc(table.size() * 4));
      CUDA_OR_FAIL("attention", shape, offsets.Alloc(offs.size() * 4));
      CUDA_OR_FAIL("attention", shape, lens.Alloc(ctx_lens.size() * 4));
      cudaMemcpy(tables.p, table.data(), table.size() * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(offsets.p, offs.data(), offs.size() * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(lens.p, ctx_lens.data(), ctx_lens.size() * 4, cudaMemcpyHostToDevice);

      strata::kernels::PagedAttentionDecodeArgs args;
      args.kv = {k.p,      v.p,   strata::kernels::KvElementType::kF16, kKvHeads, kHeadDim,
                 kHeadDim, kBlock};
      args.q = static_cast<const float*>(q.p);
      args.block_tables = static_cast<const int32_t*>(tables.p);
      args.block_table_offsets = static_cast<const int32_t*>(offsets.p);
      args.context_lens = static_cast<const int32_t*>(lens.p);
      args.num_seqs = seqs;
      args.num_heads = kHeads;
      args.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
      args.out = static_cast<float*>(out.p);
      const auto plan =
          strata::kernels::PlanPagedAttentionDecode(seqs, kHeads, kKvHeads, kHeadDim, ctx, 0);
      if (plan.workspace_bytes > 0) {
        CUDA_OR_FAIL("attention", shape, workspace.Alloc(plan.workspace_bytes));
      }
      auto launch = [&] {
        return static_cast<cudaError_t>(strata::kernels::LaunchPagedAttentionDecode(
            args, plan, workspace.p, plan.workspace_bytes, nullptr));
      };
      for (int i = 0; i < 3; ++i) CUDA_OR_FAIL("attention", shape, launch());
      CUDA_OR_FAIL("attention", shape, cudaDeviceSynchronize());
      Events ev;
      double best_ms = 1e30;
      constexpr int kIters = 10;
      for (int r = 0; r < o.reps; ++r) {
        cudaEventRecord(ev.start);
        for (int i = 0; i < kIters; ++i) CUDA_OR_FAIL("attention", shape, launch());
        cudaEventRecord(ev.stop);
        CUDA_OR_FAIL("attention", shape, cudaEventSynchronize(ev.stop));
        best_ms = std::min(best_ms, static_cast<double>(ev.Ms()) / kIters);
      }
      const double read = 2.0 * static_cast<double>(kv_bytes);  // K and V
      const double bps = read / (best_ms * 1e-3);
      const double pct = bw > 0 ? 100.0 * bps / bw : 0;
      Json("\"test\":\"attention\",\"seqs\":" + std::to_string(seqs) +
           ",\"context\":" + std::to_string(ctx) + ",\"kv_bytes\":" + Fmt("%.0f", read) +
           ",\"ms\":" + Fmt("%.4f", best_ms) + ",\"bytes_per_s\":" + Fmt("%.6g", bps) +
           ",\"pct_of_copy\":" + Fmt("%.1f", pct) +
           ",\"partitions\":" + std::to_string(plan.num_partitions));
      g_rows.push_back({"paged attention decode (1 layer)", shape, Fmt("%.0f GB/s", bps / 1e9),
                        bw > 0 ? Fmt("%.0f%% of copy", pct) : "n/a", Fmt("%.3f ms", best_ms)});
    }();
  }
}

#ifdef STRATA_BENCH_HAVE_CUDA_BACKEND
// Weights one token reads from each matrix, in elements (2 flops each per token).
double MatrixElements(const strata::model::ModelWeights& w, bool with_output) {
  double n = with_output ? static_cast<double>(w.output.rows) * w.output.cols : 0;
  for (const auto& l : w.layers) {
    for (const auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) {
      n += static_cast<double>(m->rows) * m->cols;
    }
  }
  return n;
}

void BenchBackend(const Options& o, double bw) {
  const std::string shape = o.model;
  auto file = strata::model::GgufFile::Open(o.model);
  if (!file.ok()) return Fail("backend", shape, file.status().ToString());
  auto config = strata::model::ModelConfig::FromGguf(*file);
  if (!config.ok()) return Fail("backend", shape, config.status().ToString());
  auto weights = strata::model::ModelWeights::FromGguf(*file, &*config);
  if (!weights.ok()) return Fail("backend", shape, weights.status().ToString());
  const double matrix_bytes = static_cast<double>(weights->MatrixBytes());

  const auto create_start = std::chrono::steady_clock::now();
  strata::backend::cuda::CudaBackendOptions options;
  auto backend = strata::backend::cuda::CudaBackend::Create(*file, options);
  if (!backend.ok()) return Fail("backend", shape, backend.status().ToString());
  const double create_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - create_start).count();
  const strata::backend::KvGeometry geo = (*backend)->kv_geometry();
  Json("\"test\":\"backend_create\",\"seconds\":" + Fmt("%.2f", create_s) +
       ",\"weight_bytes\":" + std::to_string((*backend)->weight_bytes()) +
       ",\"kv_bytes\":" + std::to_string((*backend)->kv_bytes()) + ",\"num_blocks\":" +
       std::to_string(geo.num_blocks) + ",\"block_size\":" + std::to_string(geo.block_size));
  const int64_t vocab = config->vocab_size;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(3, static_cast<int32_t>(vocab - 1));

  // Block ids 0..n-1 handed to each sequence in turn; every test starts over (the KV written
  // by an earlier test is simply overwritten).
  auto give_blocks = [&](int64_t seqs, int64_t tokens_each,
                         std::vector<std::vector<strata::kv::BlockId>>* out) {
    const int64_t per_seq = (tokens_each + geo.block_size - 1) / geo.block_size;
    if (seqs * per_seq > geo.num_blocks) return false;
    out->assign(seqs, {});
    int64_t next = 0;
    for (auto& ids : *out) {
      for (int64_t i = 0; i < per_seq; ++i) ids.push_back(static_cast<strata::kv::BlockId>(next++));
    }
    return true;
  };

  // ---- decode -------------------------------------------------------------------------------
  // A block's bytes cover every layer's K and V (as KvGeometry's CPU implementation counts
  // them); without the number, fp16 K and V of every layer.
  const double kv_bytes_per_token =
      geo.bytes_per_block > 0
          ? static_cast<double>(geo.bytes_per_block) / geo.block_size
          : 2.0 * static_cast<double>(config->n_layers * config->n_kv_heads *
                                      (config->head_dim_k + config->head_dim_v));
  for (int64_t batch_size : o.decode_batches) {
    const std::string dshape =
        "batch " + std::to_string(batch_size) + " @ ctx " + std::to_string(o.decode_context);
    std::vector<std::vector<strata::kv::BlockId>> blocks;
    const int64_t warmup = 3;
    if (!give_blocks(batch_size, o.decode_context + warmup + o.decode_steps + 1, &blocks)) {
      Fail("decode", dshape, "the KV pool holds too few blocks");
      continue;
    }
    std::vector<int32_t> tokens(batch_size);
    std::vector<float> logits;
    double total_s = 0;
    bool ok = true;
    for (int64_t step = 0; step < warmup + o.decode_steps && ok; ++step) {
      strata::backend::Batch batch;
      for (int64_t s = 0; s < batch_size; ++s) {
        tokens[s] = token(rng);
        batch.sequences.push_back({std::span(&tokens[s], 1), o.decode_context + step, blocks[s],
                                   strata::backend::LogitsWanted::kLast});
      }
      const auto t0 = std::chrono::steady_clock::now();
      strata::Status st = (*backend)->Forward(batch, &logits);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!st.ok()) {
        Fail("decode", dshape, st.ToString());
        ok = false;
      }
      if (step >= warmup) total_s += s;
    }
    if (!ok) continue;
    const double step_s = total_s / static_cast<double>(o.decode_steps);
    const double kv_read = kv_bytes_per_token * static_cast<double>(batch_size) *
                           static_cast<double>(o.decode_context);
    const double roofline_s = bw > 0 ? (matrix_bytes + kv_read) / bw : 0;
    const double finite =
        std::count_if(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); });
    Json("\"test\":\"decode\",\"batch\":" + std::to_string(batch_size) + ",\"context\":" +
         std::to_string(o.decode_context) + ",\"ms_per_step\":" + Fmt("%.4f", step_s * 1e3) +
         ",\"tokens_per_s\":" + Fmt("%.1f", batch_size / step_s) + ",\"matrix_bytes\":" +
         Fmt("%.0f", matrix_bytes) + ",\"kv_bytes\":" + Fmt("%.0f", kv_read) +
         ",\"roofline_ms\":" + Fmt("%.4f", roofline_s * 1e3) +
         ",\"pct_of_roofline\":" + Fmt("%.1f", roofline_s > 0 ? 100 * roofline_s / step_s : 0) +
         ",\"finite_logits_fraction\":" + Fmt("%.4f", logits.empty() ? 0 : finite / logits.size()));
    g_rows.push_back({"decode step (CudaBackend)", dshape,
                      Fmt("%.2f ms", step_s * 1e3) + Fmt(", %.0f tok/s", batch_size / step_s),
                      roofline_s > 0 ? Fmt("%.0f%% of roofline", 100 * roofline_s / step_s) : "n/a",
                      Fmt("roofline %.2f ms", roofline_s * 1e3)});
  }

  // ---- prefill ------------------------------------------------------------------------------
  const double layer_elems = MatrixElements(*weights, /*with_output=*/false);
  const double attn_width = static_cast<double>(config->n_heads * config->head_dim_k);
  for (int64_t seqs : {int64_t{1}, o.prefill_batch}) {
    const int64_t n = o.prefill_tokens;
    if (n == 0) break;  // --prefill-tokens 0: no prefill test
    const std::string pshape = std::to_string(seqs) + " x " + std::to_string(n) + " tokens";
    std::vector<std::vector<strata::kv::BlockId>> blocks;
    if (!give_blocks(seqs, n, &blocks)) {
      Fail("prefill", pshape, "the KV pool holds too few blocks");
      continue;
    }
    std::vector<std::vector<int32_t>> prompts(seqs, std::vector<int32_t>(n));
    for (auto& p : prompts) {
      for (int32_t& t : p) t = token(rng);
    }
    strata::backend::Batch batch;
    for (int64_t s = 0; s < seqs; ++s) {
      batch.sequences.push_back({prompts[s], 0, blocks[s], strata::backend::LogitsWanted::kLast});
    }
    std::vector<float> logits;
    double best_s = 1e30;
    bool ok = true;
    for (int r = 0; r < 1 + std::min(o.reps, 3) && ok; ++r) {  // the first is a warm-up
      const auto t0 = std::chrono::steady_clock::now();
      strata::Status st = (*backend)->Forward(batch, &logits);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!st.ok()) {
        Fail("prefill", pshape, st.ToString());
        ok = false;
      }
      if (r > 0) best_s = std::min(best_s, s);
    }
    if (!ok) continue;
    // 2 flops per weight per token, the output row once per sequence, and causal attention:
    // q.k and p.v over n(n+1)/2 pairs per head per layer, 2 flops each.
    const double dn = static_cast<double>(n);
    const double flops =
        static_cast<double>(seqs) *
        (2 * layer_elems * dn +
         2.0 * static_cast<double>(weights->output.rows) * weights->output.cols +
         4.0 * static_cast<double>(config->n_layers) * attn_width * dn * (dn + 1) / 2);
    const double tflops = flops / best_s / 1e12;
    Json("\"test\":\"prefill\",\"seqs\":" + std::to_string(seqs) +
         ",\"tokens_each\":" + std::to_string(n) + ",\"seconds\":" + Fmt("%.4f", best_s) +
         ",\"tokens_per_s\":" + Fmt("%.0f", static_cast<double>(seqs) * dn / best_s) +
         ",\"tflops\":" + Fmt("%.1f", tflops));
    g_rows.push_back({"prefill (CudaBackend)", pshape, Fmt("%.1f TFLOP/s", tflops), "",
                      Fmt("%.0f tok/s", static_cast<double>(seqs) * dn / best_s)});
  }
}
#endif

void PrintTable() {
  std::printf("\n| test | shape | result | vs bound | note |\n|---|---|---|---|---|\n");
  for (const Row& r : g_rows) {
    std::printf("| %s | %s | %s | %s | %s |\n", r.test.c_str(), r.shape.c_str(), r.value.c_str(),
                r.vs_bound.c_str(), r.note.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::puts("usage: strata-bench-gpu [--model MODEL.gguf] [flags]; see the source's header");
      return 0;
    }
    if (i + 1 >= argc) kArgs.Fail(arg + " needs a value (or is unknown)");
    const char* v = argv[++i];
    if (arg == "--model") {
      o.model = v;
    } else if (arg == "--copy-mib") {
      o.copy_mib = kArgs.Int(arg, v, 1);
    } else if (arg == "--attn-context") {
      o.attn_context = kArgs.Int(arg, v, 1);
    } else if (arg == "--attn-seqs") {
      o.attn_seqs = ParseList(arg, v);
    } else if (arg == "--decode-batches") {
      o.decode_batches = ParseList(arg, v);
    } else if (arg == "--decode-context") {
      o.decode_context = kArgs.Int(arg, v, 1);
    } else if (arg == "--decode-steps") {
      o.decode_steps = kArgs.Int(arg, v, 1);
    } else if (arg == "--prefill-tokens") {
      o.prefill_tokens = kArgs.Int(arg, v, 0);
    } else if (arg == "--prefill-batch") {
      o.prefill_batch = kArgs.Int(arg, v, 1);
    } else if (arg == "--reps") {
      o.reps = static_cast<int>(kArgs.Int(arg, v, 1));
    } else {
      kArgs.Fail("unknown flag '" + arg + "'");
    }
  }

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    Json("\"test\":\"device\",\"error\":\"no CUDA device: nothing measured\"");
    std::fprintf(stderr, "strata-bench-gpu: no CUDA device: nothing measured\n");
    return 3;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  Json("\"test\":\"device\",\"name\":\"" + Escape(prop.name) +
       "\",\"memory_bytes\":" + std::to_string(prop.totalGlobalMem) +
       ",\"sm_count\":" + std::to_string(prop.multiProcessorCount));

  const double bw = BenchCopy(o);
  BenchAttention(o, bw);
#ifdef STRATA_BENCH_HAVE_CUDA_BACKEND
  if (!o.model.empty()) {
    BenchBackend(o, bw);
  } else {
    g_rows.push_back({"decode/prefill (CudaBackend)", "-", "skipped", "", "no --model given"});
  }
#else
  Json("\"test\":\"backend\",\"skipped\":\"built without the CUDA backend (strata_backend_cuda)\"");
  g_rows.push_back(
      {"decode/prefill (CudaBackend)", "-", "skipped", "", "built without strata_backend_cuda"});
#endif
  PrintTable();
  return g_failed ? 1 : 0;
}
