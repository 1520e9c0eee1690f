// strata-inspect MODEL.gguf: prints a GGUF file's metadata, its architecture's
// hyperparameters, every tensor (shape, type, bytes) and the totals. On a bad file it prints a
// one-line error and exits with code 1.
#include <cstdio>
#include <map>
#include <string>
#include <string_view>

#include "strata/model/gguf_file.h"

namespace {

using strata::model::GgmlTypeName;
using strata::model::GgufFile;
using strata::model::GgufValue;

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

std::string Shape(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

void PrintUsage() {
  std::fprintf(stderr,
               "usage: strata-inspect [--all-metadata] MODEL.gguf\n"
               "  Prints metadata, architecture hyperparameters, tensors and totals.\n"
               "  --all-metadata  print the tokenizer arrays' heads too (default: summarised)\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  bool all_metadata = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--all-metadata") {
      all_metadata = true;
    } else if (arg == "-h" || arg == "--help") {
      PrintUsage();
      return 0;
    } else if (path.empty() && !arg.starts_with("-")) {
      path = arg;
    } else {
      PrintUsage();
      return 2;
    }
  }
  if (path.empty()) {
    PrintUsage();
    return 2;
  }

  auto file = GgufFile::Open(path);
  if (!file.ok()) {
    std::fprintf(stderr, "strata-inspect: %s\n", file.status().ToString().c_str());
    return 1;
  }

  std::printf("file: %s\n", path.c_str());
  std::printf("gguf version: %u, alignment: %llu, data offset: %llu, file size: %s\n",
              file->version(), static_cast<unsigned long long>(file->alignment()),
              static_cast<unsigned long long>(file->data_offset()),
              HumanBytes(file->file_size()).c_str());

  std::printf("\n== metadata (%zu keys) ==\n", file->metadata().size());
  for (const auto& kv : file->metadata()) {
    size_t items = all_metadata ? 32 : 4;
    std::printf("%-48.*s %s\n", static_cast<int>(kv.key.size()), kv.key.data(),
                kv.value.DebugString(items).c_str());
  }

  auto arch = file->GetString("general.architecture");
  if (arch.ok()) {
    std::string prefix = std::string(*arch) + ".";
    std::printf("\n== architecture: %s ==\n", std::string(*arch).c_str());
    for (const auto& kv : file->metadata()) {
      if (kv.key.starts_with(prefix)) {
        std::printf("%-40s %s\n", std::string(kv.key.substr(prefix.size())).c_str(),
                    kv.value.DebugString(8).c_str());
      }
    }
  } else {
    std::printf("\n== architecture: unknown (%s) ==\n", arch.status().message().c_str());
  }

  std::printf("\n== tensors (%zu) ==\n", file->tensors().size());
  std::printf("%-40s %-24s %-8s %14s %12s\n", "name", "shape", "type", "elements", "bytes");
  uint64_t total_elements = 0;
  uint64_t total_bytes = 0;
  std::map<std::string, std::pair<size_t, uint64_t>> by_type;  // type -> (count, bytes)
  for (const auto& t : file->tensors()) {
    std::string type(GgmlTypeName(t.type));
    std::printf("%-40s %-24s %-8s %14llu %12s\n", t.name.c_str(), Shape(t.dims).c_str(),
                type.c_str(), static_cast<unsigned long long>(t.num_elements),
                HumanBytes(t.num_bytes).c_str());
    total_elements += t.num_elements;
    total_bytes += t.num_bytes;
    by_type[type].first++;
    by_type[type].second += t.num_bytes;
  }

  std::printf("\n== totals ==\n");
  std::printf("tensors: %zu, parameters: %llu (%.1f M), tensor bytes: %s (%.2f bits/parameter)\n",
              file->tensors().size(), static_cast<unsigned long long>(total_elements),
              total_elements / 1e6, HumanBytes(total_bytes).c_str(),
              total_elements ? 8.0 * total_bytes / total_elements : 0.0);
  for (const auto& [type, stat] : by_type) {
    std::printf("  %-8s %4zu tensors %12s\n", type.c_str(), stat.first,
                HumanBytes(stat.second).c_str());
  }
  return 0;
}
