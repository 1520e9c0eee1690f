// libFuzzer target: arbitrary bytes as a GGUF file. Whatever the input, parsing must return a
// Status (never crash, hang or allocate without bound); when it parses, every accessor, the
// dequantizer and the tokenizer built from its vocab must be safe on what it describes.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "strata/model/dequantize.h"
#include "strata/model/gguf_file.h"
#include "strata/tokenizer/tokenizer.h"

using strata::MappedFile;
using strata::model::GgufFile;
using strata::model::GgufValue;

namespace {

size_t Walk(const GgufValue& v) {
  size_t n = v.DebugString(4).size();
  if (!v.is_array()) return n;
  for (const auto& s : v.array_strings()) n += s.size();
  for (const auto& nested : v.array_values()) n += Walk(nested);
  uint64_t count = v.array_bytes().empty() ? 0 : v.array_size();
  for (uint64_t i = 0; i < count && i < 16; ++i) {
    n += v.array_type() == strata::model::GgufValueType::kFloat32 ||
                 v.array_type() == strata::model::GgufValueType::kFloat64
             ? static_cast<size_t>(v.ArrayFloat(i) != 0)
             : static_cast<size_t>(v.ArrayInt(i) & 1);
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = GgufFile::Parse(MappedFile::FromBytes(std::span<const uint8_t>(data, size)));
  if (!file.ok()) return 0;
  volatile size_t sink = 0;
  for (const auto& kv : file->metadata()) sink = sink + Walk(kv.value);
  std::vector<float> out;
  for (const auto& t : file->tensors()) {
    auto bytes = file->TensorData(t);
    sink = sink + bytes.size();
    if (strata::model::CanDequantize(t.type) && t.num_elements <= (1u << 16)) {
      out.resize(t.num_elements);
      auto status = strata::model::Dequantize(t.type, bytes, t.num_elements, out.data());
      sink = sink + status.ok();
    }
  }
  auto tokenizer = strata::tokenizer::Tokenizer::FromGguf(*file);
  if (tokenizer.ok()) {
    auto ids = (*tokenizer)->Encode("Hello <start_of_turn> wörld 123 \xff\n\n", {true, true});
    sink = sink + (*tokenizer)->Decode(ids, true).size();
  }
  (void)sink;
  return 0;
}
