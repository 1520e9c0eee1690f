#include "strata/model/gguf_writer.h"

#include <cerrno>
#include <cstring>

namespace strata::model {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint32_t kGgufVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  uint8_t buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out->insert(out->end(), buf, buf + sizeof(T));
}

void PutString(std::vector<uint8_t>* out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

}  // namespace

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
  if (alignment_ != kDefaultAlignment) {
    AddUint32("general.alignment", static_cast<uint32_t>(alignment_));
  }
}

GgufWriter::~GgufWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void GgufWriter::AddKey(std::string_view key, GgufValueType type) {
  PutString(&kv_, key);
  Put<uint32_t>(&kv_, static_cast<uint32_t>(type));
  ++kv_count_;
}

void GgufWriter::AddString(std::string_view key, std::string_view value) {
  AddKey(key, GgufValueType::kString);
  PutString(&kv_, value);
}

void GgufWriter::AddUint32(std::string_view key, uint32_t value) {
  AddKey(key, GgufValueType::kUint32);
  Put<uint32_t>(&kv_, value);
}

void GgufWriter::AddInt32(std::string_view key, int32_t value) {
  AddKey(key, GgufValueType::kInt32);
  Put<int32_t>(&kv_, value);
}

void GgufWriter::AddUint64(std::string_view key, uint64_t value) {
  AddKey(key, GgufValueType::kUint64);
  Put<uint64_t>(&kv_, value);
}

void GgufWriter::AddFloat32(std::string_view key, float value) {
  AddKey(key, GgufValueType::kFloat32);
  Put<float>(&kv_, value);
}

void GgufWriter::AddBool(std::string_view key, bool value) {
  AddKey(key, GgufValueType::kBool);
  Put<uint8_t>(&kv_, value ? 1 : 0);
}

void GgufWriter::AddStringArray(std::string_view key, const std::vector<std::string>& values) {
  AddKey(key, GgufValueType::kArray);
  Put<uint32_t>(&kv_, static_cast<uint32_t>(GgufValueType::kString));
  Put<uint64_t>(&kv_, values.size());
  for (const std::string& v : values) PutString(&kv_, v);
}

void GgufWriter::AddFloat32Array(std::string_view key, std::span<const float> values) {
  AddKey(key, GgufValueType::kArray);
  Put<uint32_t>(&kv_, static_cast<uint32_t>(GgufValueType::kFloat32));
  Put<uint64_t>(&kv_, values.size());
  for (float v : values) Put<float>(&kv_, v);
}

void GgufWriter::AddInt32Array(std::string_view key, std::span<const int32_t> values) {
  AddKey(key, GgufValueType::kArray);
  Put<uint32_t>(&kv_, static_cast<uint32_t>(GgufValueType::kInt32));
  Put<uint64_t>(&kv_, values.size());
  for (int32_t v : values) Put<int32_t>(&kv_, v);
}

Status GgufWriter::AddTensor(std::string_view name, std::vector<uint64_t> dims, GgmlType type) {
  const std::string what = "tensor '" + std::string(name) + "'";
  if (file_ != nullptr) {
    return FailedPreconditionError(what + " was added after Open");
  }
  if (name.empty() || name.size() > GgufFile::kMaxTensorNameBytes) {
    return InvalidArgumentError(what + ": a name must have 1 to 64 bytes");
  }
  for (const Tensor& t : tensors_) {
    if (t.name == name) return InvalidArgumentError(what + " was added twice");
  }
  if (dims.empty() || dims.size() > GgufFile::kMaxTensorDims) {
    return InvalidArgumentError(what + ": must have 1 to 4 dims, got " +
                                std::to_string(dims.size()));
  }
  const GgmlTypeTraits traits = TraitsOf(type);
  uint64_t elements = 1;
  for (uint64_t d : dims) {
    if (d < 1 || d > GgufFile::kMaxDim || elements > GgufFile::kMaxDim / d) {
      return InvalidArgumentError(what + ": dims must each be >= 1 and their product at most " +
                                  std::to_string(GgufFile::kMaxDim));
    }
    elements *= d;
  }
  if (dims[0] % traits.block_size != 0) {
    return InvalidArgumentError(what + ": a row of " + std::to_string(dims[0]) +
                                " elements is not a multiple of " + std::string(traits.name) +
                                "'s block size " + std::to_string(traits.block_size));
  }
  Tensor t{std::string(name), std::move(dims), type,
           elements / traits.block_size * traits.type_size, 0};
  t.offset = (data_size_ + alignment_ - 1) / alignment_ * alignment_;
  data_size_ = t.offset + t.bytes;
  tensors_.push_back(std::move(t));
  return OkStatus();
}

uint64_t GgufWriter::TensorBytes(size_t index) const {
  return index < tensors_.size() ? tensors_[index].bytes : 0;
}

Status GgufWriter::Write(const void* data, size_t size) {
  if (size == 0) return OkStatus();
  if (std::fwrite(data, 1, size, file_) != size) {
    return InternalError("writing '" + path_ + "' failed: " + std::strerror(errno));
  }
  written_ += size;
  return OkStatus();
}

Status GgufWriter::Pad(uint64_t to_multiple) {
  static constexpr uint8_t kZeros[256] = {};
  uint64_t pad = (to_multiple - written_ % to_multiple) % to_multiple;
  while (pad > 0) {
    const uint64_t n = pad < sizeof(kZeros) ? pad : sizeof(kZeros);
    STRATA_RETURN_IF_ERROR(Write(kZeros, n));
    pad -= n;
  }
  return OkStatus();
}

Status GgufWriter::Open(const std::string& path) {
  if (file_ != nullptr) return FailedPreconditionError("GgufWriter::Open called twice");
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0 || alignment_ > 256) {
    return InvalidArgumentError("alignment must be a power of two up to 256, got " +
                                std::to_string(alignment_));
  }
  path_ = path;
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) {
    return InternalError("cannot create '" + path + "': " + std::strerror(errno));
  }
  std::vector<uint8_t> head;
  Put<uint32_t>(&head, kGgufMagic);
  Put<uint32_t>(&head, kGgufVersion);
  Put<uint64_t>(&head, tensors_.size());
  Put<uint64_t>(&head, kv_count_);
  head.insert(head.end(), kv_.begin(), kv_.end());
  for (const Tensor& t : tensors_) {
    PutString(&head, t.name);
    Put<uint32_t>(&head, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) Put<uint64_t>(&head, d);
    Put<uint32_t>(&head, static_cast<uint32_t>(t.type));
    Put<uint64_t>(&head, t.offset);
  }
  STRATA_RETURN_IF_ERROR(Write(head.data(), head.size()));
  STRATA_RETURN_IF_ERROR(Pad(alignment_));
  data_start_ = written_;
  current_ = 0;
  current_done_ = 0;
  return OkStatus();
}

Status GgufWriter::WriteTensorData(std::span<const uint8_t> bytes) {
  if (file_ == nullptr) return FailedPreconditionError("GgufWriter: WriteTensorData before Open");
  while (!bytes.empty()) {
    if (current_ >= tensors_.size()) {
      return InvalidArgumentError("GgufWriter: data written past the last tensor");
    }
    const Tensor& t = tensors_[current_];
    if (current_done_ == 0) {
      // The padding before a tensor: the data section position must reach its offset.
      STRATA_RETURN_IF_ERROR(Pad(alignment_));
      if (written_ - data_start_ != t.offset) {
        return InternalError("GgufWriter: tensor '" + t.name + "' lands at the wrong offset");
      }
    }
    const uint64_t left = t.bytes - current_done_;
    if (bytes.size() > left) {
      return InvalidArgumentError("tensor '" + t.name + "': " + std::to_string(bytes.size()) +
                                  " bytes written, but only " + std::to_string(left) +
                                  " remain of its " + std::to_string(t.bytes));
    }
    STRATA_RETURN_IF_ERROR(Write(bytes.data(), bytes.size()));
    current_done_ += bytes.size();
    bytes = {};
    if (current_done_ == t.bytes) {
      ++current_;
      current_done_ = 0;
    }
  }
  return OkStatus();
}

Status GgufWriter::Close() {
  if (file_ == nullptr) return FailedPreconditionError("GgufWriter: Close before Open");
  Status status = OkStatus();
  if (current_ < tensors_.size()) {
    status = FailedPreconditionError("GgufWriter: tensor '" + tensors_[current_].name +
                                     "' has only " + std::to_string(current_done_) + " of its " +
                                     std::to_string(tensors_[current_].bytes) + " bytes written");
  }
  const bool close_failed = std::fclose(file_) != 0;
  file_ = nullptr;
  if (status.ok() && close_failed) {
    status = InternalError("closing '" + path_ + "' failed: " + std::strerror(errno));
  }
  return status;
}

}  // namespace strata::model
