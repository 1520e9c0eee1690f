#include "strata/model/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "strata/common/checked_math.h"

namespace strata::model {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;

// Smallest encoded size of one element of each value type: used to bound counts by the bytes
// that remain before anything is reserved.
uint64_t MinEncodedSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
      return 8;  // length prefix
    case GgufValueType::kArray:
      return 12;  // element type + count
  }
  return 1;
}

bool IsKnownValueType(uint32_t raw) {
  return raw <= static_cast<uint32_t>(GgufValueType::kFloat64);
}

bool IsNumericType(GgufValueType type) {
  return type != GgufValueType::kString && type != GgufValueType::kArray;
}

template <typename T>
T LoadLe(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));  // x86-64 and aarch64 Linux are little-endian
  return value;
}

std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    }
  }
  if (s.size() > 80) out += "...";
  return out;
}

}  // namespace

std::string_view GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

// ---- GgufValue -----------------------------------------------------------------------------

bool GgufValue::is_integer() const {
  switch (type_) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}

int64_t GgufValue::ArrayInt(uint64_t i) const {
  STRATA_CHECK(type_ == GgufValueType::kArray && i < array_size_);
  const uint8_t* p = array_bytes_.data();
  switch (array_type_) {
    case GgufValueType::kUint8:
    case GgufValueType::kBool:
      return p[i];
    case GgufValueType::kInt8:
      return static_cast<int8_t>(p[i]);
    case GgufValueType::kUint16:
      return LoadLe<uint16_t>(p + 2 * i);
    case GgufValueType::kInt16:
      return LoadLe<int16_t>(p + 2 * i);
    case GgufValueType::kUint32:
      return LoadLe<uint32_t>(p + 4 * i);
    case GgufValueType::kInt32:
      return LoadLe<int32_t>(p + 4 * i);
    case GgufValueType::kUint64:
      return static_cast<int64_t>(LoadLe<uint64_t>(p + 8 * i));
    case GgufValueType::kInt64:
      return LoadLe<int64_t>(p + 8 * i);
    default:
      STRATA_CHECK(false && "ArrayInt on a non-integer array");
  }
  return 0;
}

double GgufValue::ArrayFloat(uint64_t i) const {
  STRATA_CHECK(type_ == GgufValueType::kArray && i < array_size_);
  const uint8_t* p = array_bytes_.data();
  switch (array_type_) {
    case GgufValueType::kFloat32:
      return LoadLe<float>(p + 4 * i);
    case GgufValueType::kFloat64:
      return LoadLe<double>(p + 8 * i);
    default:
      STRATA_CHECK(false && "ArrayFloat on a non-float array");
  }
  return 0;
}

std::string GgufValue::DebugString(size_t max_items) const {
  switch (type_) {
    case GgufValueType::kString:
      return "\"" + Printable(str_) + "\"";
    case GgufValueType::kBool:
      return as_bool() ? "true" : "false";
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64: {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.9g", f_);
      return buf;
    }
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return std::to_string(i_);
    case GgufValueType::kArray:
      break;
    default:
      return std::to_string(u_);
  }
  std::string out =
      "[" + std::string(GgufValueTypeName(array_type_)) + " x " + std::to_string(array_size_) + "]";
  uint64_t shown = std::min<uint64_t>(array_size_, max_items);
  if (shown == 0) return out;
  out += " ";
  for (uint64_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    switch (array_type_) {
      case GgufValueType::kString:
        out += "\"" + Printable(strings_[i]) + "\"";
        break;
      case GgufValueType::kArray:
        out += nested_[i].DebugString(max_items);
        break;
      case GgufValueType::kFloat32:
      case GgufValueType::kFloat64: {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%.6g", ArrayFloat(i));
        out += buf;
        break;
      }
      case GgufValueType::kUint64:
        out += std::to_string(static_cast<uint64_t>(ArrayInt(i)));
        break;
      default:
        out += std::to_string(ArrayInt(i));
        break;
    }
  }
  if (shown < array_size_) out += ", ...";
  return out;
}

// ---- Parser --------------------------------------------------------------------------------

// A cursor over the file's bytes; every read checks the bytes that remain.
class GgufParser {
 public:
  explicit GgufParser(GgufFile* file) : file_(file), bytes_(file->file_.bytes()) {}

  Status Run() {
    STRATA_RETURN_IF_ERROR(ParseHeader());
    STRATA_RETURN_IF_ERROR(ParseMetadata());
    STRATA_RETURN_IF_ERROR(ParseAlignment());
    STRATA_RETURN_IF_ERROR(ParseTensorInfos());
    return PlaceTensors();
  }

 private:
  uint64_t remaining() const { return bytes_.size() - pos_; }

  Status Truncated(const std::string& what) const {
    return DataLossError("file truncated while reading " + what + " at byte " +
                         std::to_string(pos_) + " of " + std::to_string(bytes_.size()));
  }

  template <typename T>
  Status Read(T* out, const std::string& what) {
    if (remaining() < sizeof(T)) return Truncated(what);
    *out = LoadLe<T>(bytes_.data() + pos_);
    pos_ += sizeof(T);
    return OkStatus();
  }

  Status ReadString(std::string_view* out, const std::string& what) {
    uint64_t len = 0;
    STRATA_RETURN_IF_ERROR(Read(&len, what + " (string length)"));
    if (len > remaining()) {
      return DataLossError(what + ": string length " + std::to_string(len) + " exceeds the " +
                           std::to_string(remaining()) + " bytes left in the file");
    }
    *out = std::string_view(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return OkStatus();
  }

  Status ParseHeader() {
    uint32_t magic = 0;
    if (bytes_.size() < 4) return InvalidArgumentError("not a GGUF file: shorter than its magic");
    STRATA_RETURN_IF_ERROR(Read(&magic, "magic"));
    if (magic != kGgufMagic) return InvalidArgumentError("not a GGUF file: bad magic");
    STRATA_RETURN_IF_ERROR(Read(&file_->version_, "version"));
    uint32_t v = file_->version_;
    if (v == 1) return UnimplementedError("GGUF version 1 is not supported (versions 2 and 3 are)");
    if (v != 2 && v != 3) {
      if ((v & 0xffff) == 0 && __builtin_bswap32(v) >= 1 && __builtin_bswap32(v) <= 3) {
        return UnimplementedError("big-endian GGUF files are not supported");
      }
      return UnimplementedError("unsupported GGUF version " + std::to_string(v) +
                                " (versions 2 and 3 are supported)");
    }
    STRATA_RETURN_IF_ERROR(Read(&tensor_count_, "tensor count"));
    STRATA_RETURN_IF_ERROR(Read(&kv_count_, "metadata count"));
    // Each key/value takes at least a key length, a value type and one value byte; each tensor
    // info at least a name length, n_dims, one dim, a type and an offset.
    if (kv_count_ > remaining() / 13) {
      return DataLossError("metadata count " + std::to_string(kv_count_) +
                           " cannot fit in the file");
    }
    if (tensor_count_ > remaining() / 32) {
      return DataLossError("tensor count " + std::to_string(tensor_count_) +
                           " cannot fit in the file");
    }
    return OkStatus();
  }

  Status ParseMetadata() {
    file_->metadata_.reserve(kv_count_);
    for (uint64_t i = 0; i < kv_count_; ++i) {
      std::string_view key;
      STRATA_RETURN_IF_ERROR(ReadString(&key, "metadata key #" + std::to_string(i)));
      if (key.empty()) {
        return InvalidArgumentError("metadata key #" + std::to_string(i) + " is empty");
      }
      std::string where = "metadata key '" + Printable(key) + "'";
      uint32_t raw_type = 0;
      STRATA_RETURN_IF_ERROR(Read(&raw_type, where + " (value type)"));
      GgufValue value;
      STRATA_RETURN_IF_ERROR(ParseValue(raw_type, 0, where, &value));
      if (!file_->metadata_index_.emplace(key, file_->metadata_.size()).second) {
        return InvalidArgumentError(where + " appears more than once");
      }
      file_->metadata_.push_back({key, std::move(value)});
    }
    return OkStatus();
  }

  Status ParseValue(uint32_t raw_type, uint32_t depth, const std::string& where, GgufValue* out) {
    if (!IsKnownValueType(raw_type)) {
      return InvalidArgumentError(where + ": unknown value type " + std::to_string(raw_type));
    }
    auto type = static_cast<GgufValueType>(raw_type);
    out->type_ = type;
    switch (type) {
      case GgufValueType::kUint8: {
        uint8_t v{};
        STRATA_RETURN_IF_ERROR(Read(&v, where));
        out->u_ = v;
        out->i_ = v;
        return OkStatus();
      }
      case GgufValueType::kInt8: {
        int8_t v{};
        STRATA_RETURN_IF_ERROR(Read(&v, where));
        out->i_ = v;
        return OkStatus();
      }
      case GgufValueType::kUint16: {
        uint16_t v{};
        STRATA_RETURN_IF_ERROR(Read(&v, where));
        out->u_ = v;
        out->i_ = v;
        return OkStatus();
      }
      case GgufValueType::kInt16: {
        int16_t v{};
        STRATA_RETURN_IF_ERROR(Read(&v, where));
        out->i_ = v;
        return OkStatus();
      }
      case GgufValueType::kUint32: {
        uint32_t v{};
        STRATA_RETURN_IF_ERROR(Read(&v, where));
        out->u_ = v;
        out->i_ = v;
        return OkStatus();
      }
      case GgufValueType::kInt32: {
        int32_t v{};
        STRATA_RETURN_IF_ERROR(Read(&v, where));
        out->i_ = v;
        return OkStatus();
      }
      case GgufValueType::kUint64: {
        uint64_t v{};
        STRATA_RETURN_IF_ERROR(Read(&v, where));
        out->u_ = v;
        out->i_ = static_cast<int64_t>(v);
        return OkStatus();
      }
      case GgufValueType::kInt64: {
        int64_t v{};
        STRATA_RETURN_IF_ERROR(Read(&v, where));
        out->i_ = v;
        return OkStatus();
      }
      case GgufValueType::kFloat32: {
        float v{};
        STRATA_RETURN_IF_ERROR(Read(&v, where));
        out->f_ = v;
        return OkStatus();
      }
      case GgufValueType::kFloat64: {
        double v{};
        STRATA_RETURN_IF_ERROR(Read(&v, where));
        out->f_ = v;
        return OkStatus();
      }
      case GgufValueType::kBool: {
        uint8_t v{};
        STRATA_RETURN_IF_ERROR(Read(&v, where));
        if (v > 1) {
          return InvalidArgumentError(where + ": bool value must be 0 or 1, got " +
                                      std::to_string(v));
        }
        out->u_ = v;
        return OkStatus();
      }
      case GgufValueType::kString:
        return ReadString(&out->str_, where);
      case GgufValueType::kArray:
        return ParseArray(depth, where, out);
    }
    return InternalError(where + ": unreachable value type");
  }

  Status ParseArray(uint32_t depth, const std::string& where, GgufValue* out) {
    if (depth >= GgufFile::kMaxArrayNesting) {
      return InvalidArgumentError(where + ": arrays nested deeper than " +
                                  std::to_string(GgufFile::kMaxArrayNesting) + " levels");
    }
    uint32_t raw_elem = 0;
    STRATA_RETURN_IF_ERROR(Read(&raw_elem, where + " (array element type)"));
    if (!IsKnownValueType(raw_elem)) {
      return InvalidArgumentError(where + ": unknown array element type " +
                                  std::to_string(raw_elem));
    }
    auto elem = static_cast<GgufValueType>(raw_elem);
    uint64_t count = 0;
    STRATA_RETURN_IF_ERROR(Read(&count, where + " (array length)"));
    uint64_t min_bytes = 0;
    if (!CheckedMul(count, MinEncodedSize(elem), &min_bytes) || min_bytes > remaining()) {
      return DataLossError(where + ": array of " + std::to_string(count) + " " +
                           std::string(GgufValueTypeName(elem)) + " values exceeds the " +
                           std::to_string(remaining()) + " bytes left in the file");
    }
    out->array_type_ = elem;
    out->array_size_ = count;
    if (IsNumericType(elem)) {
      out->array_bytes_ = bytes_.subspan(pos_, min_bytes);
      if (elem == GgufValueType::kBool) {
        for (uint64_t i = 0; i < count; ++i) {
          if (out->array_bytes_[i] > 1) {
            return InvalidArgumentError(where + ": bool element " + std::to_string(i) +
                                        " must be 0 or 1");
          }
        }
      }
      pos_ += min_bytes;
      return OkStatus();
    }
    if (elem == GgufValueType::kString) {
      out->strings_.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        std::string_view s;
        STRATA_RETURN_IF_ERROR(ReadString(&s, where + "[" + std::to_string(i) + "]"));
        out->strings_.push_back(s);
      }
      return OkStatus();
    }
    out->nested_.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      GgufValue nested;
      STRATA_RETURN_IF_ERROR(ParseValue(static_cast<uint32_t>(GgufValueType::kArray), depth + 1,
                                        where + "[" + std::to_string(i) + "]", &nested));
      out->nested_.push_back(std::move(nested));
    }
    return OkStatus();
  }

  Status ParseAlignment() {
    const GgufValue* v = file_->Find("general.alignment");
    file_->alignment_ = kDefaultAlignment;
    if (v == nullptr) return OkStatus();
    if (!v->is_integer() || v->as_int() <= 0) {
      return InvalidArgumentError("metadata key 'general.alignment' must be a positive integer");
    }
    uint64_t a = static_cast<uint64_t>(v->as_int());
    if ((a & (a - 1)) != 0 || a > kMaxAlignment) {
      return InvalidArgumentError("metadata key 'general.alignment' must be a power of two up to " +
                                  std::to_string(kMaxAlignment) + ", got " + std::to_string(a));
    }
    file_->alignment_ = a;
    return OkStatus();
  }

  Status ParseTensorInfos() {
    file_->tensors_.reserve(tensor_count_);
    for (uint64_t i = 0; i < tensor_count_; ++i) {
      std::string_view name;
      STRATA_RETURN_IF_ERROR(ReadString(&name, "tensor #" + std::to_string(i) + " name"));
      std::string where = "tensor '" + Printable(name) + "'";
      if (name.empty()) {
        return InvalidArgumentError("tensor #" + std::to_string(i) + " has an empty name");
      }
      if (name.size() > GgufFile::kMaxTensorNameBytes) {
        return InvalidArgumentError(where + ": name longer than " +
                                    std::to_string(GgufFile::kMaxTensorNameBytes) + " bytes");
      }
      GgufTensorInfo info;
      info.name = std::string(name);
      uint32_t n_dims = 0;
      STRATA_RETURN_IF_ERROR(Read(&n_dims, where + " (n_dims)"));
      if (n_dims < 1 || n_dims > GgufFile::kMaxTensorDims) {
        return InvalidArgumentError(where + ": n_dims must be 1.." +
                                    std::to_string(GgufFile::kMaxTensorDims) + ", got " +
                                    std::to_string(n_dims));
      }
      uint64_t elements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        uint64_t dim = 0;
        STRATA_RETURN_IF_ERROR(Read(&dim, where + " (dims)"));
        if (dim < 1 || dim > GgufFile::kMaxDim) {
          return InvalidArgumentError(where + ": dimension " + std::to_string(d) + " is " +
                                      std::to_string(dim) + ", outside 1.." +
                                      std::to_string(GgufFile::kMaxDim));
        }
        if (!CheckedMul(elements, dim, &elements) ||
            elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return InvalidArgumentError(where + ": element count overflows");
        }
        info.dims.push_back(dim);
      }
      uint32_t raw_type = 0;
      STRATA_RETURN_IF_ERROR(Read(&raw_type, where + " (type)"));
      auto traits = GgmlTypeTraitsOf(raw_type);
      if (!traits) {
        return InvalidArgumentError(where + ": unknown tensor type " + std::to_string(raw_type));
      }
      info.type = static_cast<GgmlType>(raw_type);
      if (info.dims[0] % traits->block_size != 0) {
        return InvalidArgumentError(where + ": row length " + std::to_string(info.dims[0]) +
                                    " is not a multiple of the " + std::string(traits->name) +
                                    " block size " + std::to_string(traits->block_size));
      }
      info.num_elements = elements;
      if (!CheckedMul(elements / traits->block_size, traits->type_size, &info.num_bytes)) {
        return InvalidArgumentError(where + ": byte size overflows");
      }
      STRATA_RETURN_IF_ERROR(Read(&info.offset, where + " (offset)"));
      if (!file_->tensor_index_.emplace(info.name, file_->tensors_.size()).second) {
        return InvalidArgumentError(where + " appears more than once");
      }
      file_->tensors_.push_back(std::move(info));
    }
    return OkStatus();
  }

  Status PlaceTensors() {
    uint64_t data_offset = 0;
    if (!CheckedAlignUp(pos_, file_->alignment_, &data_offset)) {
      return DataLossError("data section offset overflows");
    }
    file_->data_offset_ = data_offset;
    if (file_->tensors_.empty()) return OkStatus();
    if (data_offset > bytes_.size()) {
      return DataLossError("file truncated: the tensor data section starts at byte " +
                           std::to_string(data_offset) + " but the file has " +
                           std::to_string(bytes_.size()));
    }
    uint64_t data_size = bytes_.size() - data_offset;
    std::vector<size_t> order(file_->tensors_.size());
    for (size_t i = 0; i < order.size(); ++i) {
      const GgufTensorInfo& t = file_->tensors_[i];
      std::string where = "tensor '" + Printable(t.name) + "'";
      if (t.offset % file_->alignment_ != 0) {
        return InvalidArgumentError(where + ": data offset " + std::to_string(t.offset) +
                                    " is not a multiple of the alignment " +
                                    std::to_string(file_->alignment_));
      }
      uint64_t end = 0;
      if (!CheckedAdd(t.offset, t.num_bytes, &end) || end > data_size) {
        return DataLossError(where + ": data [" + std::to_string(t.offset) + ", +" +
                             std::to_string(t.num_bytes) + ") lies outside the " +
                             std::to_string(data_size) + "-byte data section");
      }
      order[i] = i;
    }
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return file_->tensors_[a].offset < file_->tensors_[b].offset;
    });
    for (size_t k = 1; k < order.size(); ++k) {
      const GgufTensorInfo& prev = file_->tensors_[order[k - 1]];
      const GgufTensorInfo& cur = file_->tensors_[order[k]];
      if (cur.offset < prev.offset + prev.num_bytes) {
        return InvalidArgumentError("tensor '" + Printable(cur.name) + "' overlaps tensor '" +
                                    Printable(prev.name) + "'");
      }
    }
    return OkStatus();
  }

  GgufFile* file_;
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
};

// ---- GgufFile ------------------------------------------------------------------------------

StatusOr<GgufFile> GgufFile::Open(const std::string& path) {
  auto mapped = MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status();
  auto parsed = Parse(std::move(mapped).value());
  if (!parsed.ok()) return parsed.status().WithContext(path);
  return parsed;
}

StatusOr<GgufFile> GgufFile::Parse(MappedFile file) {
  GgufFile out;
  out.file_ = std::move(file);
  GgufParser parser(&out);
  STRATA_RETURN_IF_ERROR(parser.Run());
  return out;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

namespace {
Status Missing(std::string_view key) {
  return NotFoundError("metadata key '" + std::string(key) + "' is missing");
}
Status WrongType(std::string_view key, std::string_view want, const GgufValue& v) {
  return InvalidArgumentError("metadata key '" + std::string(key) + "' must be " +
                              std::string(want) + ", found " +
                              std::string(GgufValueTypeName(v.type())));
}
bool IsSigned(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 || t == GgufValueType::kInt32 ||
         t == GgufValueType::kInt64;
}
}  // namespace

StatusOr<std::string_view> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type() != GgufValueType::kString) return WrongType(key, "a string", *v);
  return v->as_string();
}

StatusOr<uint64_t> GgufFile::GetUint(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (!v->is_integer()) return WrongType(key, "an unsigned integer", *v);
  if (IsSigned(v->type())) {
    if (v->as_int() < 0) {
      return InvalidArgumentError("metadata key '" + std::string(key) +
                                  "' must not be negative, got " + std::to_string(v->as_int()));
    }
    return static_cast<uint64_t>(v->as_int());
  }
  return v->as_uint();
}

StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (!v->is_integer()) return WrongType(key, "an integer", *v);
  if (v->type() == GgufValueType::kUint64 &&
      v->as_uint() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgumentError("metadata key '" + std::string(key) + "' is out of range");
  }
  return v->as_int();
}

StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->is_float()) return v->as_float();
  if (v->is_integer()) {
    return IsSigned(v->type()) ? static_cast<double>(v->as_int())
                               : static_cast<double>(v->as_uint());
  }
  return WrongType(key, "a number", *v);
}

StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type() != GgufValueType::kBool) return WrongType(key, "a bool", *v);
  return v->as_bool();
}

StatusOr<const GgufValue*> GgufFile::GetArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (!v->is_array()) return WrongType(key, "an array", *v);
  return v;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> GgufFile::TensorData(const GgufTensorInfo& tensor) const {
  return file_.bytes().subspan(data_offset_ + tensor.offset, tensor.num_bytes);
}

}  // namespace strata::model
