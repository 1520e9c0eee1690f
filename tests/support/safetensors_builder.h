// SafetensorsBuilder: writes small .safetensors files in memory for tests.
//
// Add() lays tensors out back to back in the data section, as the format's writers do; the
// header is padded with spaces so the data section starts 8-byte aligned. For malformed files,
// tests pass a header of their own to WithHeader().
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::testing {

class SafetensorsBuilder {
 public:
  // Appends a tensor whose data is `data` (its size must match shape and dtype for a valid
  // file; the builder does not check).
  SafetensorsBuilder& Add(std::string name, std::string dtype, std::vector<uint64_t> shape,
                          std::string data) {
    entries_.push_back({std::move(name), std::move(dtype), std::move(shape), data_.size(),
                        data_.size() + data.size()});
    data_ += data;
    return *this;
  }

  // An F32 tensor from floats.
  SafetensorsBuilder& AddF32(std::string name, std::vector<uint64_t> shape,
                             const std::vector<float>& values) {
    std::string bytes(values.size() * sizeof(float), '\0');
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return Add(std::move(name), "F32", std::move(shape), std::move(bytes));
  }

  SafetensorsBuilder& AddMetadata(std::string key, std::string value) {
    metadata_.emplace_back(std::move(key), std::move(value));
    return *this;
  }

  // The JSON header Build() writes.
  std::string Header() const {
    std::string h = "{";
    bool first = true;
    if (!metadata_.empty()) {
      h += "\"__metadata__\":{";
      for (size_t i = 0; i < metadata_.size(); ++i) {
        if (i > 0) h += ",";
        h += "\"" + metadata_[i].first + "\":\"" + metadata_[i].second + "\"";
      }
      h += "}";
      first = false;
    }
    for (const Entry& e : entries_) {
      if (!first) h += ",";
      first = false;
      h += "\"" + e.name + "\":{\"dtype\":\"" + e.dtype + "\",\"shape\":[";
      for (size_t i = 0; i < e.shape.size(); ++i) {
        if (i > 0) h += ",";
        h += std::to_string(e.shape[i]);
      }
      h += "],\"data_offsets\":[" + std::to_string(e.begin) + "," + std::to_string(e.end) + "]}";
    }
    return h + "}";
  }

  // The file: length, header (space-padded to a multiple of 8), data.
  std::string Build() const { return WithHeader(Header(), data_); }

  // A file with an arbitrary header and data section, padded like Build().
  static std::string WithHeader(std::string header, const std::string& data) {
    while (header.size() % 8 != 0) header += ' ';
    return WithRawLength(header.size(), header, data);
  }

  // A file whose length field says `length` whatever the header's real size.
  static std::string WithRawLength(uint64_t length, const std::string& header,
                                   const std::string& data) {
    std::string file(8, '\0');
    std::memcpy(file.data(), &length, 8);  // little-endian hosts only, as the reader
    return file + header + data;
  }

  const std::string& data() const { return data_; }

 private:
  struct Entry {
    std::string name;
    std::string dtype;
    std::vector<uint64_t> shape;
    size_t begin;
    size_t end;
  };
  std::vector<Entry> entries_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::string data_;
};

}  // namespace strata::testing
