// libFuzzer target: the server's settings from every source at once. The input is split at
// NUL bytes into a config file's text, then command-line arguments (one per line), then
// STRATA_* environment variables (NAME=VALUE per line); LoadServerConfig must load them or
// refuse them with a message, never crash, and whatever it loads must hold its own rules.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "strata/server/server_config.h"

namespace {

std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find('\n', start);
    const size_t stop = end == std::string_view::npos ? text.size() : end;
    if (stop > start) lines.emplace_back(text.substr(start, stop - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= input.size() && parts.size() < 3; ++i) {
    if (i == input.size() || input[i] == '\0') {
      parts.push_back(input.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.resize(3);
  const std::string file_text(parts[0]);
  std::vector<std::string> args = {"strata-server"};
  for (std::string& a : Lines(parts[1])) args.push_back(std::move(a));
  std::map<std::string, std::string> env;
  for (const std::string& line : Lines(parts[2])) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  bool help = false;
  StatusOr<server::ServerConfig> config = server::LoadServerConfig(
      args,
      [&env](const std::string& name) -> std::optional<std::string> {
        auto it = env.find(name);
        if (it == env.end()) return std::nullopt;
        return it->second;
      },
      [&file_text](const std::string&) -> StatusOr<std::string> { return file_text; }, &help);
  if (!config.ok()) {
    fuzz::Require(!config.status().message().empty(), "a refused config says why");
    return 0;
  }
  if (help) return 0;
  fuzz::Require(config->tls_cert_file.empty() == config->tls_key_file.empty(),
                "TLS certificate and key come together");
  fuzz::Require(config->max_batch_size >= 1, "max_batch_size >= 1");
  return 0;
}
