// libFuzzer target: arbitrary bytes as a .safetensors file. Whatever the input, parsing must
// return a Status (never crash, hang or allocate without bound); when it parses, every tensor's
// span must lie inside the input and the weights loader must be safe on what it describes.
#include <cstddef>
#include <cstdint>
#include <span>

#include "strata/embedding/bert_weights.h"
#include "strata/embedding/safetensors_file.h"

using strata::MappedFile;
using strata::embedding::FloatTensor;
using strata::embedding::SafetensorsFile;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = SafetensorsFile::Parse(MappedFile::FromBytes(std::span<const uint8_t>(data, size)));
  if (!file.ok()) return 0;
  volatile size_t sink = 0;
  for (const auto& [key, value] : file->metadata()) sink = sink + key.size() + value.size();
  for (const auto& t : file->tensors()) {
    const auto bytes = file->TensorData(t);
    if (!bytes.empty()) sink = sink + bytes.front() + bytes.back();
    if (t.num_elements <= (1u << 16)) {
      auto floats = FloatTensor::FromSafetensors(*file, t);
      if (floats.ok() && floats->size() > 0) {
        sink = sink + static_cast<size_t>(floats->data()[floats->size() - 1] != 0);
      }
    }
  }
  (void)sink;
  return 0;
}
