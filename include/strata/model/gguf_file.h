// GgufFile: a strict, zero-copy reader of GGUF v2/v3 model files.
//
// The file is memory-mapped; tensor data is never copied (TensorData returns a span into the
// map). Every count, length, offset and size read from the file is checked against the bytes
// that remain, with overflow-safe arithmetic, before anything is allocated or read, so a
// malformed or hostile file yields a Status naming the key or tensor at fault and never a
// crash, a hang or an unbounded allocation.
//
// Thread safety: a GgufFile is immutable after Open/Parse; any thread may read it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "strata/common/mapped_file.h"
#include "strata/common/status.h"
#include "strata/model/ggml_type.h"

namespace strata::model {

// On-disk metadata value types (GGUF specification).
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view GgufValueTypeName(GgufValueType type);

// One metadata value. Scalars are widened on read: integers to int64/uint64, floats to double.
// Strings and string arrays are views into the mapped file (valid while the GgufFile lives);
// they are byte strings, not necessarily UTF-8.
class GgufValue {
 public:
  GgufValueType type() const { return type_; }

  bool is_integer() const;
  bool is_float() const {
    return type_ == GgufValueType::kFloat32 || type_ == GgufValueType::kFloat64;
  }
  bool is_array() const { return type_ == GgufValueType::kArray; }

  // Scalars. Each is meaningful only for the matching type family; see GgufFile's typed getters
  // for checked access by key.
  uint64_t as_uint() const { return u_; }  // unsigned integers and bool
  int64_t as_int() const { return i_; }    // signed integers
  double as_float() const { return f_; }
  bool as_bool() const { return u_ != 0; }
  std::string_view as_string() const { return str_; }

  // Arrays: element type, count and accessors. Numeric elements are read from the mapped
  // bytes on demand (little-endian); string elements are views; nested arrays are values.
  GgufValueType array_type() const { return array_type_; }
  uint64_t array_size() const { return array_size_; }
  std::span<const uint8_t> array_bytes() const { return array_bytes_; }  // numeric arrays only
  const std::vector<std::string_view>& array_strings() const { return strings_; }
  const std::vector<GgufValue>& array_values() const { return nested_; }  // nested arrays only

  // Element i of a numeric array, widened. i < array_size(); the element type must match.
  int64_t ArrayInt(uint64_t i) const;   // any integer or bool element type
  double ArrayFloat(uint64_t i) const;  // float32 / float64 element type

  // Human-readable rendering for tools: scalars in full, arrays as "[type x N] first items…".
  std::string DebugString(size_t max_items = 8) const;

 private:
  friend class GgufParser;

  GgufValueType type_ = GgufValueType::kUint8;
  uint64_t u_ = 0;
  int64_t i_ = 0;
  double f_ = 0;
  std::string_view str_;
  GgufValueType array_type_ = GgufValueType::kUint8;
  uint64_t array_size_ = 0;
  std::span<const uint8_t> array_bytes_;
  std::vector<std::string_view> strings_;
  std::vector<GgufValue> nested_;
};

struct GgufKeyValue {
  std::string_view key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  // ggml order: dims[0] is the innermost (row length); at most 4 dims, each >= 1.
  std::vector<uint64_t> dims;
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;        // from the start of the data section; a multiple of alignment
  uint64_t num_elements = 0;  // product of dims
  uint64_t num_bytes = 0;     // num_elements / block_size * type_size
};

class GgufFile {
 public:
  // Limits that keep a hostile file from making the reader allocate or recurse unboundedly.
  static constexpr uint32_t kMaxTensorDims = 4;
  static constexpr uint64_t kMaxTensorNameBytes = 64;  // GGUF specification
  static constexpr uint64_t kMaxDim = uint64_t{1} << 40;
  static constexpr uint32_t kMaxArrayNesting = 8;

  // Maps and parses `path`. The Status message names the file and the key or tensor at fault.
  static StatusOr<GgufFile> Open(const std::string& path);

  // Parses an already-mapped file (or caller-owned bytes, see MappedFile::FromBytes).
  static StatusOr<GgufFile> Parse(MappedFile file);

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // bytes from file start
  uint64_t file_size() const { return file_.size(); }
  // The whole file as mapped (for a digest of the model's identity).
  std::span<const uint8_t> bytes() const { return file_.bytes(); }

  // Metadata in file order; Find returns nullptr when the key is absent.
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  const GgufValue* Find(std::string_view key) const;

  // Typed, checked access by key. NOT_FOUND when absent; INVALID_ARGUMENT naming the key when
  // the stored type does not fit (integers are accepted across widths when the value fits).
  StatusOr<std::string_view> GetString(std::string_view key) const;
  StatusOr<uint64_t> GetUint(std::string_view key) const;
  StatusOr<int64_t> GetInt(std::string_view key) const;
  StatusOr<double> GetFloat(std::string_view key) const;  // float32/float64 (or an integer)
  StatusOr<bool> GetBool(std::string_view key) const;
  StatusOr<const GgufValue*> GetArray(std::string_view key) const;

  // Tensors in file order; FindTensor returns nullptr when absent.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;

  // The tensor's bytes inside the map (bounds were checked at parse time).
  std::span<const uint8_t> TensorData(const GgufTensorInfo& tensor) const;

 private:
  friend class GgufParser;
  GgufFile() = default;

  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::unordered_map<std::string_view, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace strata::model
