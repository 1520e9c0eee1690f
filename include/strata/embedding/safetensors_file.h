// SafetensorsFile: a strict, zero-copy reader of .safetensors files (Hugging Face's format).
//
// Layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON (an object mapping
// each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional
// "__metadata__" object of string values; trailing spaces pad it), then the data section. Data
// offsets count from the start of the data section.
//
// Validation follows the reference implementation (the safetensors crate's
// Metadata::validate) and is at least as strict: N at most kMaxHeaderBytes and within the file;
// the header a JSON object whose every key appears once; every tensor entry exactly those
// three fields with a known dtype, a shape of non-negative integers and begin <= end; end -
// begin equal to product(shape) * dtype size (overflow-checked); the tensors, sorted by
// offset, tiling the data section exactly (no overlap, no gap, nothing after the last one).
// Anything else is a Status naming the tensor or field at fault, never a crash, a hang or an
// unbounded allocation.
//
// The file is memory-mapped; TensorData returns a span into the map (no copy). Data offsets
// carry no alignment guarantee: readers that need aligned elements check the span's address.
//
// Thread safety: immutable after Open/Parse; any thread may read it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "strata/common/mapped_file.h"
#include "strata/common/status.h"

namespace strata::embedding {

// Element types of the format, with their on-disk spelling ("F32", "BF16", ...).
enum class SafetensorsDtype {
  kBool,
  kU8,
  kI8,
  kF8E4M3,
  kF8E5M2,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
};

// Bytes per element (1, 2, 4 or 8).
uint64_t SafetensorsDtypeSize(SafetensorsDtype dtype);
std::string_view SafetensorsDtypeName(SafetensorsDtype dtype);
// False (and *dtype unchanged) for an unknown name.
bool ParseSafetensorsDtype(std::string_view name, SafetensorsDtype* dtype);

struct SafetensorsTensorInfo {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<uint64_t> shape;  // outermost first (row-major, as PyTorch stores it); may be []
  uint64_t offset = 0;          // bytes from the start of the data section
  uint64_t num_elements = 0;    // product of shape (1 for a scalar)
  uint64_t num_bytes = 0;       // num_elements * SafetensorsDtypeSize(dtype)
};

class SafetensorsFile {
 public:
  // The reference implementation's bound: a header larger than this is refused unread.
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

  // Maps and parses `path`. The Status message names the file and the field at fault.
  static StatusOr<SafetensorsFile> Open(const std::string& path);

  // Parses an already-mapped file (or caller-owned bytes, see MappedFile::FromBytes).
  static StatusOr<SafetensorsFile> Parse(MappedFile file);

  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;

  uint64_t header_bytes() const { return header_bytes_; }     // N
  uint64_t data_offset() const { return 8 + header_bytes_; }  // data section, from file start
  uint64_t file_size() const { return file_.size(); }

  // "__metadata__" entries in key order (empty when the header has none).
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }

  // Tensors in data-offset order; FindTensor returns nullptr when absent.
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }
  const SafetensorsTensorInfo* FindTensor(std::string_view name) const;

  // The tensor's bytes inside the map (bounds were checked at parse time).
  std::span<const uint8_t> TensorData(const SafetensorsTensorInfo& tensor) const;

 private:
  SafetensorsFile() = default;
  Status ParseHeader();

  MappedFile file_;
  uint64_t header_bytes_ = 0;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::vector<SafetensorsTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace strata::embedding
