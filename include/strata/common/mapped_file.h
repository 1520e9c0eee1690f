// A read-only memory map of a whole file. Model weights stay in the map: nothing copies the
// model into RAM. Move-only; unmaps on destruction. Any thread may read the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "strata/common/status.h"

namespace strata {

class MappedFile {
 public:
  // Maps `path` read-only. NOT_FOUND when it cannot be opened, INVALID_ARGUMENT when it is not
  // a regular file. An empty file maps to an empty span.
  static StatusOr<MappedFile> Open(const std::string& path);

  // Wraps bytes the caller owns and keeps alive (tests, fuzzers): nothing is unmapped.
  static MappedFile FromBytes(std::span<const uint8_t> bytes);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }

 private:
  void Reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool owns_mapping_ = false;
};

}  // namespace strata
