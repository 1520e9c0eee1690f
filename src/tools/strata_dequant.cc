// strata-dequant: dequantizes ggml tensors to raw little-endian float32 (a test tool).
//
//   strata-dequant MODEL.gguf TENSOR_NAME          the tensor's values to stdout
//   strata-dequant --list MODEL.gguf               "name type num_elements" per tensor
//   strata-dequant --raw TYPE_NAME NUM_ELEMENTS    raw blocks on stdin -> float32 on stdout
//
// Errors: a one-line message on stderr and exit status 1.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/checked_math.h"
#include "strata/common/status.h"
#include "strata/model/dequantize.h"
#include "strata/model/ggml_type.h"
#include "strata/model/gguf_file.h"

namespace strata::model {
namespace {

constexpr std::string_view kUsage =
    "usage: strata-dequant MODEL.gguf TENSOR_NAME | --list MODEL.gguf | "
    "--raw TYPE_NAME NUM_ELEMENTS";

// Elements dequantized per write: bounds memory for the largest tensors (a multiple of every
// block size).
constexpr uint64_t kChunkElements = uint64_t{1} << 20;

std::optional<GgmlType> ParseTypeName(std::string_view name) {
  for (uint32_t raw = 0; raw < 256; ++raw) {
    const auto traits = GgmlTypeTraitsOf(raw);
    if (!traits || traits->name.size() != name.size()) continue;
    bool equal = true;
    for (size_t i = 0; i < name.size(); ++i) {
      equal = equal && std::toupper(static_cast<unsigned char>(name[i])) ==
                           std::toupper(static_cast<unsigned char>(traits->name[i]));
    }
    if (equal) return static_cast<GgmlType>(raw);
  }
  return std::nullopt;
}

Status WriteAll(std::span<const float> values) {
  if (values.empty()) return OkStatus();
  if (std::fwrite(values.data(), sizeof(float), values.size(), stdout) != values.size()) {
    return InternalError("writing to stdout failed");
  }
  return OkStatus();
}

// Dequantizes `src` chunk by chunk and writes the floats to stdout.
Status DequantizeToStdout(GgmlType type, std::span<const uint8_t> src, uint64_t num_elements) {
  if (!CanDequantize(type)) {
    return Dequantize(type, src, num_elements, nullptr);  // the UNIMPLEMENTED message
  }
  const GgmlTypeTraits traits = TraitsOf(type);
  uint64_t expected_bytes = 0;
  if (num_elements % traits.block_size != 0 ||
      !CheckedMul(num_elements / traits.block_size, traits.type_size, &expected_bytes) ||
      expected_bytes != src.size()) {
    return Dequantize(type, src, num_elements, nullptr);  // the INVALID_ARGUMENT message
  }
  std::vector<float> buffer(std::min(num_elements, kChunkElements));
  for (uint64_t done = 0; done < num_elements;) {
    const uint64_t count = std::min(num_elements - done, kChunkElements);
    const uint64_t offset = done / traits.block_size * traits.type_size;
    const uint64_t bytes = count / traits.block_size * traits.type_size;
    STRATA_RETURN_IF_ERROR(Dequantize(type, src.subspan(offset, bytes), count, buffer.data()));
    STRATA_RETURN_IF_ERROR(WriteAll(std::span<const float>(buffer.data(), count)));
    done += count;
  }
  if (std::fflush(stdout) != 0) return InternalError("writing to stdout failed");
  return OkStatus();
}

Status RunTensor(const std::string& path, const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
  const GgufTensorInfo* tensor = file.FindTensor(name);
  if (tensor == nullptr) return NotFoundError("no tensor named '" + name + "' in " + path);
  return DequantizeToStdout(tensor->type, file.TensorData(*tensor), tensor->num_elements)
      .WithContext("tensor '" + name + "'");
}

Status RunList(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
  for (const GgufTensorInfo& tensor : file.tensors()) {
    std::printf("%s %s %llu\n", tensor.name.c_str(), std::string(GgmlTypeName(tensor.type)).c_str(),
                static_cast<unsigned long long>(tensor.num_elements));
  }
  if (std::fflush(stdout) != 0) return InternalError("writing to stdout failed");
  return OkStatus();
}

Status RunRaw(std::string_view type_name, std::string_view count_text) {
  const std::optional<GgmlType> type = ParseTypeName(type_name);
  if (!type) return InvalidArgumentError("unknown ggml type '" + std::string(type_name) + "'");
  uint64_t num_elements = 0;
  const auto [end, ec] =
      std::from_chars(count_text.data(), count_text.data() + count_text.size(), num_elements);
  if (ec != std::errc() || end != count_text.data() + count_text.size()) {
    return InvalidArgumentError("NUM_ELEMENTS must be a non-negative integer, got '" +
                                std::string(count_text) + "'");
  }
  std::vector<uint8_t> input;
  uint8_t chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), stdin)) > 0) {
    input.insert(input.end(), chunk, chunk + n);
  }
  if (std::ferror(stdin)) return InternalError("reading stdin failed");
  return DequantizeToStdout(*type, input, num_elements);
}

Status Run(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "--list") return RunList(args[1]);
  if (args.size() == 3 && args[0] == "--raw") return RunRaw(args[1], args[2]);
  if (args.size() == 2 && !args[0].starts_with("--")) return RunTensor(args[0], args[1]);
  return InvalidArgumentError(std::string(kUsage));
}

}  // namespace
}  // namespace strata::model

int main(int argc, char** argv) {
  const strata::Status status = strata::model::Run(argc, argv);
  if (!status.ok()) {
    std::fprintf(stderr, "strata-dequant: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
