#include "strata/embedding/bert_weights.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/safetensors_builder.h"

namespace strata::embedding {
namespace {

using testing::SafetensorsBuilder;

StatusOr<SafetensorsFile> Parse(const std::string& bytes) {
  return SafetensorsFile::Parse(
      MappedFile::FromBytes({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}));
}

std::vector<float> Values(const FloatTensor& t) { return {t.data(), t.data() + t.size()}; }

TEST(FloatTensor, ViewsAlignedF32InPlaceAndCopiesMisalignedF32) {
  // "pad" (3 bytes) puts "b" 3 bytes past an 8-byte boundary.
  const std::string bytes = SafetensorsBuilder()
                                .AddF32("a", {2}, {1.5f, -2.0f})
                                .Add("pad", "U8", {3}, "xyz")
                                .AddF32("b", {2}, {3.0f, 4.0f})
                                .Build();
  const auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const auto a = FloatTensor::FromSafetensors(*file, *file->FindTensor("a"));
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->owns_data());
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(a->data()),
            file->TensorData(*file->FindTensor("a")).data());
  EXPECT_EQ(Values(*a), (std::vector<float>{1.5f, -2.0f}));
  const auto b = FloatTensor::FromSafetensors(*file, *file->FindTensor("b"));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->owns_data());
  EXPECT_EQ(Values(*b), (std::vector<float>{3.0f, 4.0f}));
}

TEST(FloatTensor, ConvertsF16AndBf16Exactly) {
  const std::string bytes = SafetensorsBuilder()
                                .Add("h", "F16", {3}, std::string("\x00\x3c\x00\xc0\x01\x00", 6))
                                .Add("b", "BF16", {2}, std::string("\x80\x3f\x20\xc1", 4))
                                .Build();
  const auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const auto h = FloatTensor::FromSafetensors(*file, *file->FindTensor("h"));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(Values(*h), (std::vector<float>{1.0f, -2.0f, 5.9604645e-08f}));  // + a subnormal
  const auto b = FloatTensor::FromSafetensors(*file, *file->FindTensor("b"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Values(*b), (std::vector<float>{1.0f, -10.0f}));
}

TEST(FloatTensor, HandlesEmptyTensorsAndRefusesOtherDtypes) {
  const std::string bytes = SafetensorsBuilder()
                                .Add("pad", "U8", {1}, "x")
                                .Add("empty", "F32", {0, 3}, "")
                                .Add("ids", "I64", {1}, std::string(8, '\0'))
                                .Add("no_ids", "I64", {0}, "")
                                .Build();
  const auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const auto empty = FloatTensor::FromSafetensors(*file, *file->FindTensor("empty"));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->size(), 0);
  for (const char* name : {"ids", "no_ids"}) {
    const auto ids = FloatTensor::FromSafetensors(*file, *file->FindTensor(name));
    EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument) << name;
  }
}

}  // namespace
}  // namespace strata::embedding
