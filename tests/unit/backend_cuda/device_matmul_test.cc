// The CUDA backend's MatMul on every path against a float64 reference over the dequantized
// weights, and an fp16 weight copy against the per-call dequantization (device only). Error bound
// per output: tolerance * sum_c |W[r, c] * x[t, c]|, with
//   3e-5 for the paths that keep weights exact (quantized kernel, fp32 and split-fp16 GEMMs:
//        fp32 accumulation; split activations carry ~22 bits),
//   2e-3 for dequantized-to-fp16 GEMMs (weights and activations rounded to 11 bits each).
#include "backend/cuda/device_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "strata/backend/cuda/cuda_backend.h"
#include "strata/kernels/dequantize.h"
#include "strata/model/dequantize.h"
#include "unit/backend_cuda/synthetic_model.h"

namespace strata::backend::cuda {
namespace {

using model::GgmlType;

struct Shape {
  GgmlType type;
  int64_t rows;
  int64_t cols;
  int64_t tokens;
};

void CheckMatMul(const Shape& shape) {
  const std::string what = std::string(model::GgmlTypeName(shape.type)) + " " +
                           std::to_string(shape.rows) + "x" + std::to_string(shape.cols) +
                           " tokens=" + std::to_string(shape.tokens);
  std::mt19937 rng(static_cast<uint32_t>(shape.rows * 31 + shape.tokens));
  const std::vector<uint8_t> w = testing::SyntheticMatrix(shape.type, shape.rows, shape.cols, rng);
  std::vector<float> wf(shape.rows * shape.cols);
  ASSERT_TRUE(model::Dequantize(shape.type, w, wf.size(), wf.data()).ok());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(shape.tokens * shape.cols);
  for (float& v : x) v = normal(rng);
  const int64_t ldy = shape.rows + 3;  // a padded output stride

  auto stream = Stream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  auto cublas_ws = DeviceBuffer::Allocate(int64_t{4} << 20, "cublas");
  ASSERT_TRUE(cublas_ws.ok());
  auto handle = CublasHandle::Create(stream->get(), cublas_ws->get(), cublas_ws->bytes());
  ASSERT_TRUE(handle.ok()) << handle.status().ToString();
  auto d_w = DeviceBuffer::Allocate(static_cast<int64_t>(w.size()), "w");
  auto d_x = DeviceBuffer::Allocate(static_cast<int64_t>(x.size() * 4), "x");
  auto d_y = DeviceBuffer::Allocate(shape.tokens * ldy * 4, "y");
  auto d_deq = DeviceBuffer::Allocate(shape.rows * shape.cols * 2, "dequant");
  auto d_xf16 = DeviceBuffer::Allocate((2 * shape.tokens * shape.cols + 128) * 2, "x f16");
  ASSERT_TRUE(d_w.ok() && d_x.ok() && d_y.ok() && d_deq.ok() && d_xf16.ok());
  ASSERT_EQ(cudaMemcpy(d_w->get(), w.data(), w.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_x->get(), x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  // Sentinels in the padding columns must survive.
  std::vector<float> y(shape.tokens * ldy, -7.0f);
  ASSERT_EQ(cudaMemcpy(d_y->get(), y.data(), y.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  // A pageable cudaMemcpy may return before its DMA lands, and MatMul runs on a non-blocking
  // stream that does not wait for the legacy stream: wait for the copies here.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  DeviceMatrix m;
  m.name = "w";
  m.type = shape.type;
  m.data = d_w->get();
  m.rows = shape.rows;
  m.cols = shape.cols;
  MatMulContext ctx;
  ctx.stream = stream->get();
  ctx.cublas = handle->get();
  ctx.dequant_f16 = d_deq->get();
  ctx.dequant_f16_elements = shape.rows * shape.cols;
  ctx.x_f16 = d_xf16->get();
  ctx.x_f16_elements = 2 * shape.tokens * shape.cols + 128;
  const Status s = MatMul(ctx, m, d_x->as<float>(), shape.tokens, d_y->as<float>(), ldy);
  ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
  ASSERT_EQ(cudaStreamSynchronize(stream->get()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(y.data(), d_y->get(), y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);

  const double tolerance =
      ChooseMatMulPath(shape.type, shape.tokens) == MatMulPath::kDequantF16Gemm ? 2e-3 : 3e-5;
  double worst = 0.0;
  for (int64_t t = 0; t < shape.tokens; ++t) {
    for (int64_t r = 0; r < shape.rows; ++r) {
      double want = 0.0;
      double magnitude = 0.0;
      for (int64_t c = 0; c < shape.cols; ++c) {
        const double p = static_cast<double>(wf[r * shape.cols + c]) * x[t * shape.cols + c];
        want += p;
        magnitude += std::fabs(p);
      }
      const double err = std::fabs(y[t * ldy + r] - want);
      worst = std::max(worst, err / magnitude);
      ASSERT_LE(err, tolerance * magnitude) << what << ": token " << t << " row " << r << " got "
                                            << y[t * ldy + r] << " want " << want;
    }
    for (int64_t r = shape.rows; r < ldy; ++r) {
      ASSERT_EQ(y[t * ldy + r], -7.0f) << what << ": padding column " << r << " was written";
    }
  }
  ::testing::Test::RecordProperty("worst_" + what, std::to_string(worst));
}

TEST(DeviceMatMul, EveryPathMatchesTheFloat64Reference) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  for (GgmlType type :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    for (int64_t tokens : {1, 7, 16, 17, 33}) {
      CheckMatMul({type, 97, 512, tokens});
      if (HasFatalFailure()) return;
    }
    CheckMatMul({type, 256, 256, 128});
    if (HasFatalFailure()) return;
  }
}

// A matrix with its fp16 copy (DeviceMatrix::f16) gives the per-call dequantization's results
// bit for bit, and needs no workspace.
TEST(DeviceMatMul, AnFp16CopyGivesTheDequantizedPathsResultsBitForBit) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t kRows = 97;
  constexpr int64_t kCols = 512;
  constexpr int64_t kTokens = 33;
  auto stream = Stream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  auto cublas_ws = DeviceBuffer::Allocate(int64_t{4} << 20, "cublas");
  ASSERT_TRUE(cublas_ws.ok());
  auto handle = CublasHandle::Create(stream->get(), cublas_ws->get(), cublas_ws->bytes());
  ASSERT_TRUE(handle.ok()) << handle.status().ToString();
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const std::string what(model::GgmlTypeName(type));
    ASSERT_EQ(ChooseMatMulPath(type, kTokens), MatMulPath::kDequantF16Gemm);
    std::mt19937 rng(7);
    const std::vector<uint8_t> w = testing::SyntheticMatrix(type, kRows, kCols, rng);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(kTokens * kCols);
    for (float& v : x) v = normal(rng);
    auto d_w = DeviceBuffer::Allocate(static_cast<int64_t>(w.size()), "w");
    auto d_x = DeviceBuffer::Allocate(static_cast<int64_t>(x.size() * 4), "x");
    auto d_y = DeviceBuffer::Allocate(kTokens * kRows * 4, "y");
    auto d_deq = DeviceBuffer::Allocate(kRows * kCols * 2, "dequant");
    auto d_copy = DeviceBuffer::Allocate(kRows * kCols * 2, "fp16 copy");
    auto d_xf16 = DeviceBuffer::Allocate((2 * kTokens * kCols + 128) * 2, "x f16");
    ASSERT_TRUE(d_w.ok() && d_x.ok() && d_y.ok() && d_deq.ok() && d_copy.ok() && d_xf16.ok());
    ASSERT_EQ(cudaMemcpy(d_w->get(), w.data(), w.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_x->get(), x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

    DeviceMatrix m;
    m.name = "w";
    m.type = type;
    m.data = d_w->get();
    m.rows = kRows;
    m.cols = kCols;
    MatMulContext ctx;
    ctx.stream = stream->get();
    ctx.cublas = handle->get();
    ctx.dequant_f16 = d_deq->get();
    ctx.dequant_f16_elements = kRows * kCols;
    ctx.x_f16 = d_xf16->get();
    ctx.x_f16_elements = 2 * kTokens * kCols + 128;
    auto run = [&](const MatMulContext& c, const DeviceMatrix& mat, std::vector<float>* y) {
      ASSERT_EQ(cudaMemsetAsync(d_y->get(), 0, static_cast<size_t>(d_y->bytes()), stream->get()),
                cudaSuccess);
      const Status s = MatMul(c, mat, d_x->as<float>(), kTokens, d_y->as<float>(), kRows);
      ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
      ASSERT_EQ(cudaStreamSynchronize(stream->get()), cudaSuccess);
      y->resize(kTokens * kRows);
      ASSERT_EQ(cudaMemcpy(y->data(), d_y->get(), y->size() * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
    };
    std::vector<float> per_call;
    run(ctx, m, &per_call);
    if (HasFatalFailure()) return;

    ASSERT_EQ(kernels::LaunchDequantizeToF16(m.data, static_cast<kernels::DequantizeType>(type),
                                             d_copy->get(), kRows * kCols, stream->get()),
              0);
    ASSERT_EQ(cudaStreamSynchronize(stream->get()), cudaSuccess);
    m.f16 = d_copy->get();
    MatMulContext no_workspace = ctx;
    no_workspace.dequant_f16 = nullptr;
    no_workspace.dequant_f16_elements = 0;
    std::vector<float> copied;
    run(no_workspace, m, &copied);
    if (HasFatalFailure()) return;
    ASSERT_EQ(std::memcmp(copied.data(), per_call.data(), copied.size() * 4), 0) << what;
    for (float v : copied) ASSERT_TRUE(std::isfinite(v)) << what;

    // Without a copy and without a workspace the call is refused, not run out of bounds.
    m.f16 = nullptr;
    const Status refused =
        MatMul(no_workspace, m, d_x->as<float>(), kTokens, d_y->as<float>(), kRows);
    EXPECT_EQ(refused.code(), StatusCode::kInternal) << what << ": " << refused.ToString();
  }
}

}  // namespace
}  // namespace strata::backend::cuda
