#include "strata/model/gguf_writer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "strata/model/gguf_file.h"

namespace strata::model {
namespace {

std::string TempPath(const std::string& name) { return ::testing::TempDir() + name; }

std::vector<uint8_t> Pattern(size_t n, uint8_t salt) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + salt);
  return v;
}

void ExpectError(const Status& s, StatusCode code, const std::string& needle) {
  ASSERT_FALSE(s.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string::npos)
      << "message '" << s.message() << "' lacks '" << needle << "'";
}

TEST(GgufWriter, MetadataAndTensorBytesRoundTripThroughGgufFile) {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("a.u32", 7);
  w.AddInt32("a.i32", -3);
  w.AddUint64("a.u64", uint64_t{1} << 40);
  w.AddFloat32("a.f32", 0.5f);
  w.AddBool("a.bool", true);
  w.AddStringArray("a.strings", {"x", "", "zz"});
  const std::vector<float> floats = {1.5f, -2.0f};
  w.AddFloat32Array("a.floats", floats);
  const std::vector<int32_t> ints = {4, -5, 6};
  w.AddInt32Array("a.ints", ints);
  // Odd sizes, so every tensor but the first needs padding to reach its offset.
  ASSERT_TRUE(w.AddTensor("f32", {3, 1}, GgmlType::kF32).ok());
  ASSERT_TRUE(w.AddTensor("f16", {5, 7}, GgmlType::kF16).ok());
  ASSERT_TRUE(w.AddTensor("q4k", {256, 2}, GgmlType::kQ4_K).ok());
  EXPECT_EQ(w.TensorBytes(0), 12u);
  EXPECT_EQ(w.TensorBytes(1), 70u);
  EXPECT_EQ(w.TensorBytes(2), 288u);
  const std::string path = TempPath("gguf_writer_roundtrip.gguf");
  ASSERT_TRUE(w.Open(path).ok());
  const std::vector<uint8_t> a = Pattern(12, 1), b = Pattern(70, 2), c = Pattern(288, 3);
  ASSERT_TRUE(w.WriteTensorData(a).ok());
  // A tensor may arrive in pieces.
  ASSERT_TRUE(w.WriteTensorData(std::span(b).first(33)).ok());
  ASSERT_TRUE(w.WriteTensorData(std::span(b).subspan(33)).ok());
  ASSERT_TRUE(w.WriteTensorData(c).ok());
  ASSERT_TRUE(w.Close().ok());

  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(*file->GetString("general.architecture"), "llama");
  EXPECT_EQ(*file->GetUint("a.u32"), 7u);
  EXPECT_EQ(*file->GetInt("a.i32"), -3);
  EXPECT_EQ(*file->GetUint("a.u64"), uint64_t{1} << 40);
  EXPECT_DOUBLE_EQ(*file->GetFloat("a.f32"), 0.5);
  EXPECT_TRUE(*file->GetBool("a.bool"));
  auto strings = file->GetArray("a.strings");
  ASSERT_TRUE(strings.ok());
  ASSERT_EQ((*strings)->array_size(), 3u);
  EXPECT_EQ((*strings)->array_strings()[2], "zz");
  auto fl = file->GetArray("a.floats");
  ASSERT_TRUE(fl.ok());
  EXPECT_EQ((*fl)->ArrayFloat(1), -2.0);
  auto in = file->GetArray("a.ints");
  ASSERT_TRUE(in.ok());
  EXPECT_EQ((*in)->ArrayInt(1), -5);

  ASSERT_EQ(file->tensors().size(), 3u);
  const std::vector<uint8_t>* expected[] = {&a, &b, &c};
  for (size_t i = 0; i < 3; ++i) {
    const GgufTensorInfo& t = file->tensors()[i];
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
    auto data = file->TensorData(t);
    EXPECT_EQ(std::vector<uint8_t>(data.begin(), data.end()), *expected[i]) << t.name;
  }
  EXPECT_EQ(file->tensors()[1].dims, (std::vector<uint64_t>{5, 7}));
  EXPECT_EQ(file->tensors()[2].type, GgmlType::kQ4_K);
  std::remove(path.c_str());
}

TEST(GgufWriter, NonDefaultAlignmentIsWrittenAndHonoured) {
  GgufWriter w(64);
  ASSERT_TRUE(w.AddTensor("a", {1}, GgmlType::kF32).ok());
  ASSERT_TRUE(w.AddTensor("b", {1}, GgmlType::kF32).ok());
  const std::string path = TempPath("gguf_writer_align.gguf");
  ASSERT_TRUE(w.Open(path).ok());
  const std::vector<uint8_t> four = Pattern(4, 9);
  ASSERT_TRUE(w.WriteTensorData(four).ok());
  ASSERT_TRUE(w.WriteTensorData(four).ok());
  ASSERT_TRUE(w.Close().ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->alignment(), 64u);
  EXPECT_EQ(file->tensors()[1].offset, 64u);
  EXPECT_EQ(file->data_offset() % 64, 0u);
  std::remove(path.c_str());
}

TEST(GgufWriter, RejectsBadTensorDeclarations) {
  GgufWriter w;
  ExpectError(w.AddTensor("q", {100, 2}, GgmlType::kQ4_K), StatusCode::kInvalidArgument,
              "not a multiple of Q4_K's block size 256");
  ExpectError(w.AddTensor("z", {4, 0}, GgmlType::kF32), StatusCode::kInvalidArgument, "dims");
  ExpectError(w.AddTensor("d", {}, GgmlType::kF32), StatusCode::kInvalidArgument, "1 to 4 dims");
  ExpectError(w.AddTensor(std::string(65, 'n'), {4}, GgmlType::kF32), StatusCode::kInvalidArgument,
              "1 to 64 bytes");
  ASSERT_TRUE(w.AddTensor("t", {4}, GgmlType::kF32).ok());
  ExpectError(w.AddTensor("t", {4}, GgmlType::kF32), StatusCode::kInvalidArgument, "twice");
}

TEST(GgufWriter, ReportsDataWrittenOutOfOrderOrIncomplete) {
  GgufWriter w;
  ASSERT_TRUE(w.AddTensor("t", {4}, GgmlType::kF32).ok());
  const std::vector<uint8_t> bytes(20, 0);
  ExpectError(w.WriteTensorData(bytes), StatusCode::kFailedPrecondition, "before Open");
  ExpectError(w.Close(), StatusCode::kFailedPrecondition, "before Open");
  const std::string path = TempPath("gguf_writer_incomplete.gguf");
  ASSERT_TRUE(w.Open(path).ok());
  ExpectError(w.AddTensor("late", {4}, GgmlType::kF32), StatusCode::kFailedPrecondition,
              "after Open");
  ExpectError(w.WriteTensorData(bytes), StatusCode::kInvalidArgument, "only 16 remain");
  ASSERT_TRUE(w.WriteTensorData(std::span(bytes).first(8)).ok());
  ExpectError(w.Close(), StatusCode::kFailedPrecondition, "only 8 of its 16 bytes");
  std::remove(path.c_str());
}

TEST(GgufWriter, OpenNamesAPathItCannotCreate) {
  GgufWriter w;
  ExpectError(w.Open("/nonexistent-dir/x.gguf"), StatusCode::kInternal, "/nonexistent-dir/x.gguf");
}

}  // namespace
}  // namespace strata::model
