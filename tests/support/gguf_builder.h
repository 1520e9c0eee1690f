// GgufBuilder: writes small GGUF files in memory for tests and fuzz seeds.
//
// Produces well-formed files by default; the raw helpers (AddRawValue, SetTensorOffset,
// Build(truncate_to)) let tests corrupt exactly one thing at a time.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace strata::testing {

class GgufBuilder {
 public:
  // GGUF value type codes (see strata::model::GgufValueType).
  enum Type : uint32_t {
    kU8 = 0,
    kI8 = 1,
    kU16 = 2,
    kI16 = 3,
    kU32 = 4,
    kI32 = 5,
    kF32 = 6,
    kBool = 7,
    kString = 8,
    kArray = 9,
    kU64 = 10,
    kI64 = 11,
    kF64 = 12,
  };

  explicit GgufBuilder(uint32_t version = 3) : version_(version) {}

  GgufBuilder& AddU32(std::string_view key, uint32_t v) { return AddScalar(key, kU32, v); }
  GgufBuilder& AddI32(std::string_view key, int32_t v) { return AddScalar(key, kI32, v); }
  GgufBuilder& AddU64(std::string_view key, uint64_t v) { return AddScalar(key, kU64, v); }
  GgufBuilder& AddF32(std::string_view key, float v) { return AddScalar(key, kF32, v); }
  GgufBuilder& AddBool(std::string_view key, bool v) {
    return AddScalar(key, kBool, static_cast<uint8_t>(v));
  }
  GgufBuilder& AddString(std::string_view key, std::string_view v) {
    Bytes value;
    PutString(&value, v);
    return AddRawValue(key, kString, value);
  }
  GgufBuilder& AddStringArray(std::string_view key, const std::vector<std::string>& items) {
    Bytes value;
    Put<uint32_t>(&value, kString);
    Put<uint64_t>(&value, items.size());
    for (const auto& s : items) PutString(&value, s);
    return AddRawValue(key, kArray, value);
  }
  template <typename T>
  GgufBuilder& AddArray(std::string_view key, Type elem_type, const std::vector<T>& items) {
    Bytes value;
    Put<uint32_t>(&value, elem_type);
    Put<uint64_t>(&value, items.size());
    for (const T& v : items) Put<T>(&value, v);
    return AddRawValue(key, kArray, value);
  }
  // A key whose value bytes (after the type code) are given verbatim.
  GgufBuilder& AddRawValue(std::string_view key, uint32_t type, const std::vector<uint8_t>& value) {
    PutString(&kv_, key);
    Put<uint32_t>(&kv_, type);
    for (uint8_t byte : value) kv_.push_back(byte);
    ++kv_count_;
    return *this;
  }

  // A tensor of `type` (ggml code) with `dims` (ggml order) and its raw bytes; placed after the
  // previous tensor at the next aligned offset.
  GgufBuilder& AddTensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type,
                         std::vector<uint8_t> data) {
    tensors_.push_back({std::string(name), std::move(dims), type, std::move(data), ~uint64_t{0}});
    return *this;
  }
  // Overrides the recorded data offset of tensor `index` (to build broken files).
  GgufBuilder& SetTensorOffset(size_t index, uint64_t offset) {
    tensors_.at(index).offset_override = offset;
    return *this;
  }
  GgufBuilder& SetAlignment(uint64_t alignment) {
    alignment_ = alignment;
    return *this;
  }
  // Overrides the header counts (to build broken files).
  GgufBuilder& SetCounts(uint64_t tensor_count, uint64_t kv_count) {
    tensor_count_override_ = tensor_count;
    kv_count_override_ = kv_count;
    return *this;
  }

  std::vector<uint8_t> Build() const {
    Bytes out;
    for (char c : std::string_view("GGUF")) out.push_back(static_cast<uint8_t>(c));
    Put<uint32_t>(&out, version_);
    Put<uint64_t>(
        &out, tensor_count_override_ != ~uint64_t{0} ? tensor_count_override_ : tensors_.size());
    Put<uint64_t>(&out, kv_count_override_ != ~uint64_t{0} ? kv_count_override_ : kv_count_);
    for (uint8_t byte : kv_) out.push_back(byte);
    std::vector<uint64_t> offsets;
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
      offset = (offset + alignment_ - 1) / alignment_ * alignment_;
      offsets.push_back(offset);
      PutString(&out, t.name);
      Put<uint32_t>(&out, static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) Put<uint64_t>(&out, d);
      Put<uint32_t>(&out, t.type);
      Put<uint64_t>(&out, t.offset_override != ~uint64_t{0} ? t.offset_override : offset);
      offset += t.data.size();
    }
    if (!tensors_.empty()) {
      while (out.size() % alignment_ != 0) out.push_back(0);
      size_t base = out.size();
      for (size_t i = 0; i < tensors_.size(); ++i) {
        out.resize(base + offsets[i], 0);
        for (uint8_t byte : tensors_[i].data) out.push_back(byte);
      }
    }
    return out;
  }

  using Bytes = std::vector<uint8_t>;
  template <typename T>
  static void Put(Bytes* out, T v) {
    uint8_t buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    for (uint8_t byte : buf) out->push_back(byte);
  }
  static void PutString(Bytes* out, std::string_view s) {
    Put<uint64_t>(out, s.size());
    for (char c : s) out->push_back(static_cast<uint8_t>(c));
  }

 private:
  template <typename T>
  GgufBuilder& AddScalar(std::string_view key, Type type, T v) {
    Bytes value;
    Put<T>(&value, v);
    return AddRawValue(key, type, value);
  }

  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::vector<uint8_t> data;
    uint64_t offset_override;
  };

  uint32_t version_;
  uint64_t alignment_ = 32;
  Bytes kv_;
  uint64_t kv_count_ = 0;
  std::vector<Tensor> tensors_;
  uint64_t tensor_count_override_ = ~uint64_t{0};
  uint64_t kv_count_override_ = ~uint64_t{0};
};

}  // namespace strata::testing
