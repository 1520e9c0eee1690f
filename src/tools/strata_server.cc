// strata-server: serves a GGUF model over gRPC with Prometheus metrics. Settings come from
// flags, a config file and the environment (docs/configuration.md; --help lists them).
#include <cstdio>
#include <string>

#include "strata/server/server_app.h"
#include "strata/server/server_config.h"

int main(int argc, char** argv) {
  bool help = false;
  strata::StatusOr<strata::server::ServerConfig> config =
      strata::server::LoadServerConfig(argc, argv, &help);
  if (help) {
    std::fputs(strata::server::ServerUsage().c_str(), stdout);
    return 0;
  }
  if (!config.ok()) {
    std::fprintf(stderr, "strata-server: %s\n", config.status().message().c_str());
    return 2;
  }
  return strata::server::RunServer(*config);
}
