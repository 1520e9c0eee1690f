#include "strata/embedding/safetensors_file.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "strata/common/checked_math.h"

namespace strata::embedding {
namespace {

using Json = nlohmann::json;

struct DtypeTraits {
  SafetensorsDtype dtype;
  std::string_view name;
  uint64_t size;
};

constexpr std::array<DtypeTraits, 15> kDtypes = {{
    {SafetensorsDtype::kBool, "BOOL", 1},
    {SafetensorsDtype::kU8, "U8", 1},
    {SafetensorsDtype::kI8, "I8", 1},
    {SafetensorsDtype::kF8E4M3, "F8_E4M3", 1},
    {SafetensorsDtype::kF8E5M2, "F8_E5M2", 1},
    {SafetensorsDtype::kI16, "I16", 2},
    {SafetensorsDtype::kU16, "U16", 2},
    {SafetensorsDtype::kF16, "F16", 2},
    {SafetensorsDtype::kBF16, "BF16", 2},
    {SafetensorsDtype::kI32, "I32", 4},
    {SafetensorsDtype::kU32, "U32", 4},
    {SafetensorsDtype::kF32, "F32", 4},
    {SafetensorsDtype::kF64, "F64", 8},
    {SafetensorsDtype::kI64, "I64", 8},
    {SafetensorsDtype::kU64, "U64", 8},
}};

const DtypeTraits& Traits(SafetensorsDtype dtype) {
  for (const DtypeTraits& t : kDtypes) {
    if (t.dtype == dtype) return t;
  }
  STRATA_CHECK(false && "unknown SafetensorsDtype");
  return kDtypes[0];
}

std::string Quoted(std::string_view name) {
  std::string out = "'";
  for (char c : name.substr(0, 120)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  if (name.size() > 120) out += "...";
  return out + "'";
}

// Deepest nesting a valid header has: root object (1) > tensor entry (2) > shape array (3).
constexpr size_t kMaxHeaderDepth = 3;

// A first pass over the header through nlohmann's SAX interface, which builds nothing: it
// stops at the first syntax error, at anything nested deeper than kMaxHeaderDepth (so a header
// of a million brackets costs neither memory nor recursion) and at the first key repeated
// within an object, which a DOM parse would silently collapse into one.
class HeaderScan {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  const Status& status() const { return status_; }

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(number_integer_t) { return true; }
  bool number_unsigned(number_unsigned_t) { return true; }
  bool number_float(number_float_t, const string_t&) { return true; }
  bool string(string_t&) { return true; }
  bool binary(binary_t&) { return true; }
  bool start_object(size_t) { return Open(); }
  bool start_array(size_t) { return Open(); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(string_t& key) {
    if (!keys_[depth_ - 1].insert(key).second) {
      status_ = InvalidArgumentError("key " + Quoted(key) + " appears more than once");
      return false;
    }
    return true;
  }
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& e) {
    status_ = InvalidArgumentError("the header is not valid JSON (near byte " +
                                   std::to_string(position) + "): " + e.what());
    return false;
  }

 private:
  bool Open() {
    if (depth_ == kMaxHeaderDepth) {
      status_ = InvalidArgumentError("the header nests deeper than a tensor's shape array");
      return false;
    }
    keys_[depth_++].clear();
    return true;
  }
  bool Close() {
    --depth_;
    return true;
  }

  Status status_;
  size_t depth_ = 0;
  std::array<std::unordered_set<std::string>, kMaxHeaderDepth> keys_;  // per open level
};

Status ParseTensorEntry(const std::string& name, const Json& entry, uint64_t data_size,
                        SafetensorsTensorInfo* info) {
  const std::string where = "tensor " + Quoted(name);
  if (!entry.is_object()) return InvalidArgumentError(where + ": entry is not a JSON object");
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return InvalidArgumentError(where + ": unknown field " + Quoted(key) +
                                  " (expected dtype, shape and data_offsets)");
    }
  }
  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) {
    return InvalidArgumentError(where + ": dtype is missing or not a string");
  }
  const std::string& dtype_name = dtype->get_ref<const std::string&>();
  if (!ParseSafetensorsDtype(dtype_name, &info->dtype)) {
    return UnimplementedError(where + ": unknown dtype " + Quoted(dtype_name));
  }
  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) {
    return InvalidArgumentError(where + ": shape is missing or not an array");
  }
  uint64_t elements = 1;
  for (const Json& dim : *shape) {
    if (!dim.is_number_unsigned()) {
      return InvalidArgumentError(where +
                                  ": shape holds something other than a non-negative "
                                  "integer");
    }
    const uint64_t d = dim.get<uint64_t>();
    info->shape.push_back(d);
    if (!CheckedMul(elements, d, &elements)) {
      return InvalidArgumentError(where + ": the element count overflows 64 bits");
    }
  }
  info->num_elements = elements;
  if (!CheckedMul(elements, SafetensorsDtypeSize(info->dtype), &info->num_bytes)) {
    return InvalidArgumentError(where + ": the byte size overflows 64 bits");
  }
  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return InvalidArgumentError(where +
                                ": data_offsets must be [begin, end], two non-negative "
                                "integers");
  }
  const uint64_t begin = (*offsets)[0].get<uint64_t>();
  const uint64_t end = (*offsets)[1].get<uint64_t>();
  if (begin > end || end > data_size) {
    return InvalidArgumentError(where + ": data_offsets [" + std::to_string(begin) + ", " +
                                std::to_string(end) + "] lie outside the data section of " +
                                std::to_string(data_size) + " bytes");
  }
  if (end - begin != info->num_bytes) {
    return InvalidArgumentError(where + ": data_offsets span " + std::to_string(end - begin) +
                                " bytes but shape and dtype need " +
                                std::to_string(info->num_bytes));
  }
  info->offset = begin;
  return OkStatus();
}

}  // namespace

uint64_t SafetensorsDtypeSize(SafetensorsDtype dtype) { return Traits(dtype).size; }

std::string_view SafetensorsDtypeName(SafetensorsDtype dtype) { return Traits(dtype).name; }

bool ParseSafetensorsDtype(std::string_view name, SafetensorsDtype* dtype) {
  for (const DtypeTraits& t : kDtypes) {
    if (t.name == name) {
      *dtype = t.dtype;
      return true;
    }
  }
  return false;
}

StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path));
  StatusOr<SafetensorsFile> file = Parse(std::move(mapped));
  if (!file.ok()) return file.status().WithContext(path);
  return file;
}

StatusOr<SafetensorsFile> SafetensorsFile::Parse(MappedFile mapped) {
  SafetensorsFile file;
  file.file_ = std::move(mapped);
  STRATA_RETURN_IF_ERROR(file.ParseHeader());
  return file;
}

Status SafetensorsFile::ParseHeader() {
  const std::span<const uint8_t> bytes = file_.bytes();
  if (bytes.size() < 8) {
    return InvalidArgumentError("not a safetensors file: " + std::to_string(bytes.size()) +
                                " bytes, shorter than the 8-byte header length");
  }
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);  // little-endian, as every supported host
  if (n > kMaxHeaderBytes) {
    return InvalidArgumentError("header length " + std::to_string(n) + " exceeds the limit of " +
                                std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (n > bytes.size() - 8) {
    return DataLossError("header length " + std::to_string(n) + " runs past the end of the " +
                         std::to_string(bytes.size()) + "-byte file");
  }
  header_bytes_ = n;
  const char* header = reinterpret_cast<const char*>(bytes.data() + 8);
  if (n == 0 || header[0] != '{') {
    return InvalidArgumentError("the header does not start with '{'");
  }
  Json root;
  try {
    HeaderScan scan;
    if (!Json::sax_parse(header, header + n, &scan)) {
      return scan.status().ok() ? InvalidArgumentError("the header is not valid JSON")
                                : scan.status();
    }
    root = Json::parse(header, header + n);
  } catch (const Json::exception& e) {  // the scan above leaves nothing for these to find
    return InvalidArgumentError(std::string("the header is not valid JSON: ") + e.what());
  }
  if (!root.is_object()) return InvalidArgumentError("the header is not a JSON object");
  const uint64_t data_size = bytes.size() - 8 - n;
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return InvalidArgumentError("__metadata__ is not a JSON object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          return InvalidArgumentError("__metadata__ value of " + Quoted(key) + " is not a string");
        }
        metadata_.emplace_back(key, value.get<std::string>());
      }
      continue;
    }
    SafetensorsTensorInfo info;
    info.name = name;
    STRATA_RETURN_IF_ERROR(ParseTensorEntry(name, entry, data_size, &info));
    tensors_.push_back(std::move(info));
  }
  // The tensors must tile the data section: sorted by offset, each starts where the last ended.
  std::sort(tensors_.begin(), tensors_.end(),
            [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
              return a.offset != b.offset ? a.offset < b.offset : a.num_bytes < b.num_bytes;
            });
  uint64_t expected = 0;
  for (const SafetensorsTensorInfo& t : tensors_) {
    if (t.offset != expected) {
      return InvalidArgumentError("tensor " + Quoted(t.name) + " starts at data offset " +
                                  std::to_string(t.offset) + " but the tensors before it end at " +
                                  std::to_string(expected) +
                                  (t.offset < expected ? " (overlap)" : " (gap)"));
    }
    expected = t.offset + t.num_bytes;
  }
  if (expected != data_size) {
    return InvalidArgumentError("the tensors cover " + std::to_string(expected) + " bytes of a " +
                                std::to_string(data_size) + "-byte data section");
  }
  for (size_t i = 0; i < tensors_.size(); ++i) tensor_index_.emplace(tensors_[i].name, i);
  return OkStatus();
}

const SafetensorsTensorInfo* SafetensorsFile::FindTensor(std::string_view name) const {
  const auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> SafetensorsFile::TensorData(const SafetensorsTensorInfo& tensor) const {
  return file_.bytes().subspan(data_offset() + tensor.offset, tensor.num_bytes);
}

}  // namespace strata::embedding
