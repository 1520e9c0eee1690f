// GgufWriter: writes a GGUF v3 file as a stream — header, metadata, tensor infos, then each
// tensor's bytes in declaration order — so a model larger than memory can be written one tensor
// (or one piece of a tensor) at a time. The layout is the one GgufFile reads: little-endian,
// tensor data offsets relative to the data section, every tensor aligned to `alignment` bytes
// (general.alignment is written when it is not the default 32).
//
// Use: Add* metadata and AddTensor for every tensor, then Open(path) (writes everything before
// the data), then WriteTensorData for each tensor in the order added (any number of calls per
// tensor, whose sizes sum to the tensor's byte size), then Close(). Errors are Status: a bad
// tensor declaration (INVALID_ARGUMENT, naming the tensor), calls out of order
// (FAILED_PRECONDITION), or a file error (INTERNAL, naming the path).
//
// Thread rules: one thread drives a writer. Not copyable; the file is closed on destruction
// (an unclosed file is incomplete: Close reports whether every tensor was written).
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"
#include "strata/model/ggml_type.h"
#include "strata/model/gguf_file.h"

namespace strata::model {

class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32);
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Metadata, written in the order added. Keys are not checked for duplicates (the reader
  // rejects them); add each key once.
  void AddString(std::string_view key, std::string_view value);
  void AddUint32(std::string_view key, uint32_t value);
  void AddInt32(std::string_view key, int32_t value);
  void AddUint64(std::string_view key, uint64_t value);
  void AddFloat32(std::string_view key, float value);
  void AddBool(std::string_view key, bool value);
  void AddStringArray(std::string_view key, const std::vector<std::string>& values);
  void AddFloat32Array(std::string_view key, std::span<const float> values);
  void AddInt32Array(std::string_view key, std::span<const int32_t> values);

  // Declares a tensor: `dims` in ggml order (dims[0] is the row length, a multiple of the
  // type's block size), 1 to 4 dims each >= 1, a name of at most 64 bytes, unique.
  Status AddTensor(std::string_view name, std::vector<uint64_t> dims, GgmlType type);

  // Bytes of a declared tensor's data; 0 for an index out of range.
  uint64_t TensorBytes(size_t index) const;
  size_t num_tensors() const { return tensors_.size(); }

  // Creates (truncates) `path` and writes the header, metadata and tensor infos.
  Status Open(const std::string& path);

  // Appends the next bytes of the current tensor (the first declared one not yet complete).
  // INVALID_ARGUMENT when `bytes` runs past the tensor's size.
  Status WriteTensorData(std::span<const uint8_t> bytes);

  // Flushes and closes the file. FAILED_PRECONDITION when a tensor's data is missing.
  Status Close();

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    GgmlType type;
    uint64_t bytes;
    uint64_t offset;  // from the start of the data section
  };

  void AddKey(std::string_view key, GgufValueType type);
  Status Write(const void* data, size_t size);
  Status Pad(uint64_t to_multiple);

  uint64_t alignment_;
  std::vector<uint8_t> kv_;  // encoded metadata entries
  uint64_t kv_count_ = 0;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;  // the data section's size so far (tensor offsets)

  std::FILE* file_ = nullptr;
  std::string path_;
  uint64_t written_ = 0;       // bytes written to the file
  uint64_t data_start_ = 0;    // file offset of the data section
  size_t current_ = 0;         // the tensor being written
  uint64_t current_done_ = 0;  // its bytes written so far
};

}  // namespace strata::model
