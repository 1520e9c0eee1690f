#include "strata/model/gguf_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "support/gguf_builder.h"

namespace strata::model {
namespace {

using testing::GgufBuilder;

StatusOr<GgufFile> ParseBytes(const std::vector<uint8_t>& bytes) {
  return GgufFile::Parse(MappedFile::FromBytes(bytes));
}

std::vector<uint8_t> Q8Block(int8_t q) {
  std::vector<uint8_t> block(34, 0);
  block[0] = 0x00;
  block[1] = 0x3c;  // d = 1.0 in fp16
  for (int i = 2; i < 34; ++i) block[i] = static_cast<uint8_t>(q);
  return block;
}

GgufBuilder ValidModel() {
  GgufBuilder b;
  b.AddString("general.architecture", "llama")
      .AddU32("llama.block_count", 2)
      .AddF32("llama.rope.freq_base", 10000.0f)
      .AddStringArray("tokenizer.ggml.tokens", {"<unk>", "a", "b"})
      .AddTensor("tok_embd", {4, 2}, 0, std::vector<uint8_t>(4 * 2 * 4, 1))
      .AddTensor("out", {32, 1}, 8, Q8Block(3));
  return b;
}

void ExpectError(const StatusOr<GgufFile>& result, StatusCode code, const std::string& needle) {
  ASSERT_FALSE(result.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(result.status().code(), code) << result.status().ToString();
  EXPECT_NE(result.status().message().find(needle), std::string::npos)
      << "message '" << result.status().message() << "' lacks '" << needle << "'";
}

TEST(GgufFile, ParsesMetadataAndTensorsOfAValidFile) {
  auto bytes = ValidModel().Build();
  auto file = ParseBytes(bytes);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  ASSERT_EQ(file->metadata().size(), 4u);
  EXPECT_EQ(file->metadata()[0].key, "general.architecture");
  EXPECT_EQ(*file->GetString("general.architecture"), "llama");
  EXPECT_EQ(*file->GetUint("llama.block_count"), 2u);
  EXPECT_FLOAT_EQ(static_cast<float>(*file->GetFloat("llama.rope.freq_base")), 10000.0f);
  auto tokens = file->GetArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ((*tokens)->array_size(), 3u);
  EXPECT_EQ((*tokens)->array_strings()[2], "b");

  ASSERT_EQ(file->tensors().size(), 2u);
  const GgufTensorInfo* out = file->FindTensor("out");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->type, GgmlType::kQ8_0);
  EXPECT_EQ(out->dims, (std::vector<uint64_t>{32, 1}));
  EXPECT_EQ(out->num_elements, 32u);
  EXPECT_EQ(out->num_bytes, 34u);
  EXPECT_EQ(out->offset % 32, 0u);
  auto data = file->TensorData(*out);
  ASSERT_EQ(data.size(), 34u);
  EXPECT_EQ(data[1], 0x3c);
  EXPECT_EQ(data[33], 3);
  EXPECT_EQ(file->FindTensor("missing"), nullptr);
}

TEST(GgufFile, ReadsEveryScalarTypeAndNestedArrays) {
  GgufBuilder b;
  std::vector<uint8_t> nested;  // [[1, 2], [3]] as arrays of int16
  GgufBuilder::Put<uint32_t>(&nested, GgufBuilder::kArray);
  GgufBuilder::Put<uint64_t>(&nested, 2);
  GgufBuilder::Put<uint32_t>(&nested, GgufBuilder::kI16);
  GgufBuilder::Put<uint64_t>(&nested, 2);
  GgufBuilder::Put<int16_t>(&nested, 1);
  GgufBuilder::Put<int16_t>(&nested, -2);
  GgufBuilder::Put<uint32_t>(&nested, GgufBuilder::kI16);
  GgufBuilder::Put<uint64_t>(&nested, 1);
  GgufBuilder::Put<int16_t>(&nested, 3);
  b.AddRawValue("u8", GgufBuilder::kU8, {200})
      .AddRawValue("i8", GgufBuilder::kI8, {0xff})
      .AddRawValue("u16", GgufBuilder::kU16, {0x34, 0x12})
      .AddRawValue("i16", GgufBuilder::kI16, {0xfe, 0xff})
      .AddU32("u32", 4000000000u)
      .AddI32("i32", -7)
      .AddF32("f32", 0.5f)
      .AddBool("bool", true)
      .AddString("str", "hello")
      .AddU64("u64", 1ull << 40)
      .AddRawValue("i64", GgufBuilder::kI64, std::vector<uint8_t>(8, 0xff))
      .AddRawValue("f64", GgufBuilder::kF64, {0, 0, 0, 0, 0, 0, 0xf0, 0x3f})
      .AddArray<float>("floats", GgufBuilder::kF32, {1.5f, -2.0f})
      .AddRawValue("nested", GgufBuilder::kArray, nested);
  auto bytes = b.Build();
  auto file = ParseBytes(bytes);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(*file->GetUint("u8"), 200u);
  EXPECT_EQ(*file->GetInt("i8"), -1);
  EXPECT_EQ(*file->GetUint("u16"), 0x1234u);
  EXPECT_EQ(*file->GetInt("i16"), -2);
  EXPECT_EQ(*file->GetUint("u32"), 4000000000u);
  EXPECT_EQ(*file->GetInt("i32"), -7);
  EXPECT_EQ(*file->GetFloat("f32"), 0.5);
  EXPECT_TRUE(*file->GetBool("bool"));
  EXPECT_EQ(*file->GetString("str"), "hello");
  EXPECT_EQ(*file->GetUint("u64"), 1ull << 40);
  EXPECT_EQ(*file->GetInt("i64"), -1);
  EXPECT_EQ(*file->GetFloat("f64"), 1.0);
  const GgufValue* floats = file->Find("floats");
  ASSERT_NE(floats, nullptr);
  EXPECT_EQ(floats->array_type(), GgufValueType::kFloat32);
  EXPECT_EQ(floats->ArrayFloat(1), -2.0);
  const GgufValue* n = file->Find("nested");
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->array_values().size(), 2u);
  EXPECT_EQ(n->array_values()[0].ArrayInt(1), -2);
  EXPECT_EQ(n->array_values()[1].ArrayInt(0), 3);
}

TEST(GgufFile, TypedGettersNameTheKeyOnMismatch) {
  auto bytes = ValidModel().AddI32("negative", -3).Build();
  auto file = ParseBytes(bytes);
  ASSERT_TRUE(file.ok());
  auto missing = file->GetUint("llama.context_length");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("llama.context_length"), std::string::npos);
  auto wrong = file->GetString("llama.block_count");
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("llama.block_count"), std::string::npos);
  EXPECT_EQ(file->GetUint("negative").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*file->GetInt("negative"), -3);
  EXPECT_EQ(file->GetBool("general.architecture").status().code(), StatusCode::kInvalidArgument);
}

TEST(GgufFile, AcceptsVersion2AndCustomAlignment) {
  GgufBuilder b(2);
  b.AddU32("general.alignment", 64).SetAlignment(64);
  b.AddTensor("a", {3}, 0, std::vector<uint8_t>(12, 0))
      .AddTensor("b", {5}, 0, std::vector<uint8_t>(20, 0));
  auto bytes = b.Build();
  auto file = ParseBytes(bytes);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->version(), 2u);
  EXPECT_EQ(file->alignment(), 64u);
  EXPECT_EQ(file->data_offset() % 64, 0u);
  EXPECT_EQ(file->FindTensor("b")->offset, 64u);
}

TEST(GgufFile, RejectsBadMagicAndUnsupportedVersions) {
  ExpectError(ParseBytes({}), StatusCode::kInvalidArgument, "magic");
  ExpectError(ParseBytes({'G', 'G', 'U', 'X', 3, 0, 0, 0}), StatusCode::kInvalidArgument, "magic");
  ExpectError(ParseBytes(GgufBuilder(1).Build()), StatusCode::kUnimplemented, "version 1");
  ExpectError(ParseBytes(GgufBuilder(7).Build()), StatusCode::kUnimplemented, "version 7");
  ExpectError(ParseBytes(GgufBuilder(0x03000000).Build()), StatusCode::kUnimplemented,
              "big-endian");
}

TEST(GgufFile, EveryTruncationOfAValidFileIsAnErrorNotACrash) {
  auto bytes = ValidModel().Build();
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + len);
    auto file = ParseBytes(prefix);
    EXPECT_FALSE(file.ok()) << "a " << len << "-byte prefix parsed";
  }
}

TEST(GgufFile, RejectsCountsThatCannotFitBeforeAllocating) {
  ExpectError(ParseBytes(GgufBuilder().SetCounts(0, uint64_t{1} << 60).Build()),
              StatusCode::kDataLoss, "metadata count");
  ExpectError(ParseBytes(GgufBuilder().SetCounts(uint64_t{1} << 60, 0).Build()),
              StatusCode::kDataLoss, "tensor count");
  std::vector<uint8_t> huge_array;
  GgufBuilder::Put<uint32_t>(&huge_array, GgufBuilder::kString);
  GgufBuilder::Put<uint64_t>(&huge_array, uint64_t{1} << 62);
  ExpectError(ParseBytes(GgufBuilder().AddRawValue("big", GgufBuilder::kArray, huge_array).Build()),
              StatusCode::kDataLoss, "'big'");
  std::vector<uint8_t> overflow_array;  // count * 8 overflows uint64
  GgufBuilder::Put<uint32_t>(&overflow_array, GgufBuilder::kU64);
  GgufBuilder::Put<uint64_t>(&overflow_array, ~uint64_t{0} / 4);
  ExpectError(
      ParseBytes(GgufBuilder().AddRawValue("ovf", GgufBuilder::kArray, overflow_array).Build()),
      StatusCode::kDataLoss, "'ovf'");
  std::vector<uint8_t> long_string;
  GgufBuilder::Put<uint64_t>(&long_string, ~uint64_t{0});
  ExpectError(
      ParseBytes(GgufBuilder().AddRawValue("name", GgufBuilder::kString, long_string).Build()),
      StatusCode::kDataLoss, "'name'");
}

TEST(GgufFile, RejectsArraysNestedTooDeeply) {
  std::vector<uint8_t> value;
  for (uint32_t i = 0; i < GgufFile::kMaxArrayNesting + 1; ++i) {
    GgufBuilder::Put<uint32_t>(&value, GgufBuilder::kArray);
    GgufBuilder::Put<uint64_t>(&value, 1);
  }
  GgufBuilder::Put<uint32_t>(&value, GgufBuilder::kU8);
  GgufBuilder::Put<uint64_t>(&value, 0);
  ExpectError(ParseBytes(GgufBuilder().AddRawValue("deep", GgufBuilder::kArray, value).Build()),
              StatusCode::kInvalidArgument, "nested deeper");
}

TEST(GgufFile, RejectsMalformedMetadata) {
  ExpectError(ParseBytes(GgufBuilder().AddU32("k", 1).AddU32("k", 2).Build()),
              StatusCode::kInvalidArgument, "'k' appears more than once");
  ExpectError(ParseBytes(GgufBuilder().AddRawValue("t", 13, {0}).Build()),
              StatusCode::kInvalidArgument, "unknown value type 13");
  ExpectError(ParseBytes(GgufBuilder().AddRawValue("flag", GgufBuilder::kBool, {2}).Build()),
              StatusCode::kInvalidArgument, "'flag'");
  ExpectError(ParseBytes(GgufBuilder().AddU32("", 1).Build()), StatusCode::kInvalidArgument,
              "empty");
  ExpectError(ParseBytes(GgufBuilder().AddU32("general.alignment", 48).Build()),
              StatusCode::kInvalidArgument, "general.alignment");
  ExpectError(ParseBytes(GgufBuilder().AddU32("general.alignment", 0).Build()),
              StatusCode::kInvalidArgument, "general.alignment");
}

TEST(GgufFile, RejectsMalformedTensorInfos) {
  auto one = [](std::vector<uint64_t> dims, uint32_t type, size_t bytes) {
    return GgufBuilder().AddTensor("w", std::move(dims), type, std::vector<uint8_t>(bytes, 0));
  };
  ExpectError(ParseBytes(one({}, 0, 4).Build()), StatusCode::kInvalidArgument, "'w': n_dims");
  ExpectError(ParseBytes(one({1, 1, 1, 1, 1}, 0, 4).Build()), StatusCode::kInvalidArgument,
              "n_dims");
  ExpectError(ParseBytes(one({4, 0}, 0, 0).Build()), StatusCode::kInvalidArgument, "dimension 1");
  ExpectError(ParseBytes(one({1ull << 40, 1ull << 40}, 0, 0).Build()), StatusCode::kInvalidArgument,
              "overflows");
  ExpectError(ParseBytes(one({4}, 4, 16).Build()), StatusCode::kInvalidArgument,
              "unknown tensor type 4");
  ExpectError(ParseBytes(one({4}, 99, 16).Build()), StatusCode::kInvalidArgument, "type 99");
  ExpectError(ParseBytes(one({48}, 8, 34).Build()), StatusCode::kInvalidArgument,
              "not a multiple of the Q8_0 block size 32");
  ExpectError(ParseBytes(GgufBuilder()
                             .AddTensor("x", {1}, 0, {0, 0, 0, 0})
                             .AddTensor("x", {1}, 0, {0, 0, 0, 0})
                             .Build()),
              StatusCode::kInvalidArgument, "'x' appears more than once");
  std::string long_name(GgufFile::kMaxTensorNameBytes + 1, 'n');
  ExpectError(ParseBytes(GgufBuilder().AddTensor(long_name, {1}, 0, {0, 0, 0, 0}).Build()),
              StatusCode::kInvalidArgument, "name longer");
}

TEST(GgufFile, RejectsTensorDataOutsideTheFileMisalignedOrOverlapping) {
  auto outside = ValidModel().SetTensorOffset(1, 1 << 20).Build();
  ExpectError(ParseBytes(outside), StatusCode::kDataLoss, "'out'");
  auto misaligned = ValidModel().SetTensorOffset(1, 8).Build();
  ExpectError(ParseBytes(misaligned), StatusCode::kInvalidArgument,
              "not a multiple of the alignment");
  auto wrap = ValidModel().SetTensorOffset(1, ~uint64_t{0} - 31).Build();
  ExpectError(ParseBytes(wrap), StatusCode::kDataLoss, "'out'");
  auto overlap = GgufBuilder()
                     .AddTensor("a", {16}, 0, std::vector<uint8_t>(64, 0))
                     .AddTensor("b", {16}, 0, std::vector<uint8_t>(64, 0))
                     .SetTensorOffset(1, 32)
                     .Build();
  ExpectError(ParseBytes(overlap), StatusCode::kInvalidArgument, "overlaps");
  auto cut = ValidModel().Build();
  cut.resize(cut.size() - 1);
  ExpectError(ParseBytes(cut), StatusCode::kDataLoss, "'out'");
}

TEST(GgufFile, OpenNamesTheFileAndMapsFromDisk) {
  auto missing = GgufFile::Open("/nonexistent/model.gguf");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/model.gguf"), std::string::npos);

  std::string path = ::testing::TempDir() + "gguf_file_test.gguf";
  auto bytes = ValidModel().Build();
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->TensorData(*file->FindTensor("out"))[33], 3);

  bytes.resize(20);
  f = std::fopen(path.c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  auto broken = GgufFile::Open(path);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find(path), std::string::npos);
  std::remove(path.c_str());

  auto dir = GgufFile::Open(::testing::TempDir());
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::model
