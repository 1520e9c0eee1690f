#include "strata/embedding/safetensors_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support/safetensors_builder.h"

namespace strata::embedding {
namespace {

using testing::SafetensorsBuilder;

StatusOr<SafetensorsFile> ParseBytes(const std::string& bytes) {
  return SafetensorsFile::Parse(
      MappedFile::FromBytes({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}));
}

void ExpectError(const std::string& bytes, StatusCode code, const std::string& needle) {
  const StatusOr<SafetensorsFile> file = ParseBytes(bytes);
  ASSERT_FALSE(file.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(file.status().code(), code) << file.status().ToString();
  EXPECT_NE(file.status().message().find(needle), std::string::npos)
      << "message '" << file.status().message() << "' lacks '" << needle << "'";
}

// A file with a header of our own over `data_bytes` zero bytes.
std::string WithHeader(const std::string& header, size_t data_bytes) {
  return SafetensorsBuilder::WithHeader(header, std::string(data_bytes, '\0'));
}

SafetensorsBuilder ValidBuilder() {
  SafetensorsBuilder b;
  b.AddF32("weight", {2, 3}, {1, 2, 3, 4, 5, 6})
      .Add("ids", "I64", {1, 2}, std::string(16, '\x01'))
      .Add("half", "F16", {3}, std::string("\x00\x3c\x00\x40\x00\xc0", 6))
      .Add("scalar", "BF16", {}, std::string("\x80\x3f", 2))
      .Add("empty", "F32", {0, 4}, "")
      .AddMetadata("format", "pt");
  return b;
}

TEST(SafetensorsFile, ParsesEveryTensorOfAValidFile) {
  const std::string bytes = ValidBuilder().Build();
  const auto file = ParseBytes(bytes);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_EQ(file->tensors().size(), 5u);
  ASSERT_EQ(file->metadata().size(), 1u);
  EXPECT_EQ(file->metadata()[0].first, "format");
  EXPECT_EQ(file->metadata()[0].second, "pt");
  EXPECT_EQ(file->data_offset() % 8, 0u);

  const SafetensorsTensorInfo* weight = file->FindTensor("weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(weight->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(weight->num_elements, 6u);
  EXPECT_EQ(weight->num_bytes, 24u);
  std::vector<float> values(6);
  const auto data = file->TensorData(*weight);
  ASSERT_EQ(data.size(), 24u);
  std::memcpy(values.data(), data.data(), 24);
  EXPECT_EQ(values, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // Zero copy: the span points into the bytes that were parsed.
  EXPECT_EQ(reinterpret_cast<const char*>(data.data()), bytes.data() + file->data_offset());

  const SafetensorsTensorInfo* scalar = file->FindTensor("scalar");
  ASSERT_NE(scalar, nullptr);
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->num_elements, 1u);
  EXPECT_EQ(scalar->num_bytes, 2u);
  const SafetensorsTensorInfo* empty = file->FindTensor("empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->num_bytes, 0u);
  EXPECT_TRUE(file->TensorData(*empty).empty());
  EXPECT_EQ(file->FindTensor("absent"), nullptr);
  // Sorted by data offset.
  for (size_t i = 1; i < file->tensors().size(); ++i) {
    EXPECT_LE(file->tensors()[i - 1].offset, file->tensors()[i].offset);
  }
}

TEST(SafetensorsFile, OpensAFileAsAMemoryMap) {
  const std::string path =
      ::testing::TempDir() + "safetensors_open_" + std::to_string(::getpid()) + ".safetensors";
  const std::string bytes = ValidBuilder().Build();
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->file_size(), bytes.size());
  EXPECT_EQ(file->tensors().size(), 5u);
  std::remove(path.c_str());

  const auto missing = SafetensorsFile::Open(path);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(SafetensorsFile, KnowsTheSizeOfEveryDtype) {
  const std::vector<std::pair<std::string, uint64_t>> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  for (const auto& [name, size] : sizes) {
    SafetensorsDtype dtype;
    ASSERT_TRUE(ParseSafetensorsDtype(name, &dtype)) << name;
    EXPECT_EQ(SafetensorsDtypeSize(dtype), size) << name;
    EXPECT_EQ(SafetensorsDtypeName(dtype), name);
    const std::string bytes =
        SafetensorsBuilder().Add("t", name, {3}, std::string(3 * size, '\0')).Build();
    EXPECT_TRUE(ParseBytes(bytes).ok()) << name;
  }
  SafetensorsDtype dtype;
  EXPECT_FALSE(ParseSafetensorsDtype("F128", &dtype));
}

TEST(SafetensorsFile, AcceptsAnEmptyHeaderObject) {
  const auto file = ParseBytes(WithHeader("{}", 0));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_TRUE(file->tensors().empty());
}

TEST(SafetensorsFile, RejectsFilesShorterThanTheLengthField) {
  for (size_t n = 0; n < 8; ++n) {
    ExpectError(std::string(n, '\0'), StatusCode::kInvalidArgument, "shorter than");
  }
}

TEST(SafetensorsFile, RejectsAHeaderLengthPastTheEndOfTheFile) {
  ExpectError(SafetensorsBuilder::WithRawLength(1000, "{}", ""), StatusCode::kDataLoss,
              "runs past the end");
}

TEST(SafetensorsFile, RejectsAHugeHeaderLengthUnread) {
  ExpectError(SafetensorsBuilder::WithRawLength(uint64_t{1} << 63, "{}", ""),
              StatusCode::kInvalidArgument, "exceeds the limit");
  ExpectError(SafetensorsBuilder::WithRawLength(~uint64_t{0}, "{}", ""),
              StatusCode::kInvalidArgument, "exceeds the limit");
  ExpectError(SafetensorsBuilder::WithRawLength(SafetensorsFile::kMaxHeaderBytes + 1, "{}", ""),
              StatusCode::kInvalidArgument, "exceeds the limit");
}

TEST(SafetensorsFile, RejectsEveryTruncationOfAValidFile) {
  const std::string bytes = ValidBuilder().Build();
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(ParseBytes(bytes.substr(0, n)).ok()) << "truncated to " << n << " bytes";
  }
  EXPECT_TRUE(ParseBytes(bytes).ok());
}

TEST(SafetensorsFile, RejectsHeadersThatAreNotAJsonObject) {
  ExpectError(WithHeader("", 0), StatusCode::kInvalidArgument, "does not start with '{'");
  ExpectError(WithHeader(" {}", 0), StatusCode::kInvalidArgument, "does not start with '{'");
  ExpectError(WithHeader("[1, 2]", 0), StatusCode::kInvalidArgument, "does not start with '{'");
  ExpectError(WithHeader("{\"a\": ", 0), StatusCode::kInvalidArgument, "not valid JSON");
  ExpectError(WithHeader("{\"a\": 1,}", 0), StatusCode::kInvalidArgument, "not valid JSON");
  ExpectError(WithHeader("{} trailing", 0), StatusCode::kInvalidArgument, "not valid JSON");
  ExpectError(WithHeader("{\"\xff\": 1}", 0), StatusCode::kInvalidArgument, "not valid JSON");
  ExpectError(WithHeader(std::string("{\"a\0\": 1}", 9), 0), StatusCode::kInvalidArgument,
              "not valid JSON");
}

TEST(SafetensorsFile, RejectsDuplicateKeys) {
  ExpectError(WithHeader("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                         "\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
                         1),
              StatusCode::kInvalidArgument, "'t' appears more than once");
  ExpectError(WithHeader("{\"t\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],"
                         "\"data_offsets\":[0,1]}}",
                         1),
              StatusCode::kInvalidArgument, "'dtype' appears more than once");
}

TEST(SafetensorsFile, RejectsDeepNestingWithoutBuildingIt) {
  const std::string deep =
      "{\"t\":" + std::string(1'000'000, '[') + std::string(1'000'000, ']') + "}";
  ExpectError(WithHeader(deep, 0), StatusCode::kInvalidArgument, "nests deeper");
  ExpectError(WithHeader("{\"t\":{\"dtype\":\"U8\",\"shape\":[[1]],\"data_offsets\":[0,1]}}", 1),
              StatusCode::kInvalidArgument, "nests deeper");
}

TEST(SafetensorsFile, RejectsMalformedTensorEntries) {
  const auto entry = [](const std::string& body, size_t data = 4) {
    return WithHeader("{\"t\":" + body + "}", data);
  };
  ExpectError(entry("[]"), StatusCode::kInvalidArgument, "not a JSON object");
  ExpectError(entry("{\"shape\":[4],\"data_offsets\":[0,4]}"), StatusCode::kInvalidArgument,
              "dtype is missing");
  ExpectError(entry("{\"dtype\":7,\"shape\":[4],\"data_offsets\":[0,4]}"),
              StatusCode::kInvalidArgument, "dtype is missing or not a string");
  ExpectError(entry("{\"dtype\":\"Q4_K\",\"shape\":[4],\"data_offsets\":[0,4]}"),
              StatusCode::kUnimplemented, "unknown dtype 'Q4_K'");
  ExpectError(entry("{\"dtype\":\"U8\",\"data_offsets\":[0,4]}"), StatusCode::kInvalidArgument,
              "shape is missing");
  ExpectError(entry("{\"dtype\":\"U8\",\"shape\":[-4],\"data_offsets\":[0,4]}"),
              StatusCode::kInvalidArgument, "non-negative integer");
  ExpectError(entry("{\"dtype\":\"U8\",\"shape\":[4.0],\"data_offsets\":[0,4]}"),
              StatusCode::kInvalidArgument, "non-negative integer");
  ExpectError(entry("{\"dtype\":\"U8\",\"shape\":[\"4\"],\"data_offsets\":[0,4]}"),
              StatusCode::kInvalidArgument, "non-negative integer");
  ExpectError(entry("{\"dtype\":\"U8\",\"shape\":[4]}"), StatusCode::kInvalidArgument,
              "data_offsets must be [begin, end]");
  ExpectError(entry("{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4,8]}"),
              StatusCode::kInvalidArgument, "data_offsets must be [begin, end]");
  ExpectError(entry("{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[-1,4]}"),
              StatusCode::kInvalidArgument, "data_offsets must be [begin, end]");
  ExpectError(entry("{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4],\"extra\":1}"),
              StatusCode::kInvalidArgument, "unknown field 'extra'");
}

TEST(SafetensorsFile, RejectsOffsetsOutsideTheDataSection) {
  ExpectError(WithHeader("{\"t\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,8]}}", 4),
              StatusCode::kInvalidArgument, "outside the data section");
  ExpectError(WithHeader("{\"t\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4),
              StatusCode::kInvalidArgument, "outside the data section");
  ExpectError(WithHeader("{\"t\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":"
                         "[18446744073709551612,18446744073709551615]}}",
                         4),
              StatusCode::kInvalidArgument, "outside the data section");
  ExpectError(WithHeader("{\"t\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":"
                         "[0,99999999999999999999999]}}",
                         4),
              StatusCode::kInvalidArgument, "data_offsets must be [begin, end]");
}

TEST(SafetensorsFile, RejectsSizesThatDisagreeWithShapeAndDtype) {
  ExpectError(WithHeader("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4),
              StatusCode::kInvalidArgument, "span 4 bytes but shape and dtype need 8");
  ExpectError(WithHeader("{\"t\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8),
              StatusCode::kInvalidArgument, "need 6");
  ExpectError(WithHeader("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
                         "\"data_offsets\":[0,4]}}",
                         4),
              StatusCode::kInvalidArgument, "overflows 64 bits");
  ExpectError(WithHeader("{\"t\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],"
                         "\"data_offsets\":[0,4]}}",
                         4),
              StatusCode::kInvalidArgument, "overflows 64 bits");
}

TEST(SafetensorsFile, RejectsOverlappingTensors) {
  ExpectError(WithHeader("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                         "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
                         6),
              StatusCode::kInvalidArgument, "(overlap)");
  ExpectError(WithHeader("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                         "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                         4),
              StatusCode::kInvalidArgument, "(overlap)");
}

TEST(SafetensorsFile, RejectsGapsAndTrailingBytes) {
  ExpectError(WithHeader("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                         "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}}",
                         6),
              StatusCode::kInvalidArgument, "(gap)");
  ExpectError(WithHeader("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 3),
              StatusCode::kInvalidArgument, "cover 2 bytes of a 3-byte data section");
}

TEST(SafetensorsFile, RejectsNonStringMetadata) {
  ExpectError(WithHeader("{\"__metadata__\":{\"format\":1}}", 0), StatusCode::kInvalidArgument,
              "value of 'format' is not a string");
  ExpectError(WithHeader("{\"__metadata__\":[]}", 0), StatusCode::kInvalidArgument,
              "__metadata__ is not a JSON object");
}

// Random corruptions of a valid file (bytes of the length field and the header flipped,
// inserted or deleted) must all come back as OK or a Status, never a crash; ASan and UBSan
// runs of this test check the memory side.
TEST(SafetensorsFile, SurvivesRandomCorruptionOfTheHeader) {
  const std::string valid = ValidBuilder().Build();
  const size_t header_end = 8 + ValidBuilder().Header().size();
  for (uint32_t seed = 0; seed < 64; ++seed) {
    std::mt19937 rng(seed);
    for (int round = 0; round < 50; ++round) {
      std::string bytes = valid;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t at = rng() % header_end;
        switch (rng() % 3) {
          case 0:
            bytes[at] = static_cast<char>(rng());
            break;
          case 1:
            bytes.insert(bytes.begin() + at, static_cast<char>(rng()));
            break;
          default:
            bytes.erase(bytes.begin() + at);
            break;
        }
      }
      const auto file = ParseBytes(bytes);
      if (!file.ok()) continue;
      // Whatever parsed must be consistent with the bytes it came from.
      for (const SafetensorsTensorInfo& t : file->tensors()) {
        const auto data = file->TensorData(t);
        EXPECT_EQ(data.size(), t.num_bytes);
        EXPECT_LE(file->data_offset() + t.offset + t.num_bytes, bytes.size());
      }
    }
  }
}

}  // namespace
}  // namespace strata::embedding
