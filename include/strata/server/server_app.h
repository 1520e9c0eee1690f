// RunServer: strata-server's life from start to exit.
//
//  1. Binds the gRPC port (Generation, grpc.health.v1.Health, reflection) and the metrics port
//     (/metrics), writes --port-file, and answers health NOT_SERVING / calls UNAVAILABLE while
//  2. the model loads; then starts the engine and turns health SERVING.
//  3. On SIGTERM or SIGINT: health NOT_SERVING, new calls UNAVAILABLE, calls in flight get up
//     to --drain-grace-seconds to finish (a second signal cuts the grace short); the engine
//     then stops (what is left ends UNAVAILABLE) and the server shuts down.
// Returns the process exit code: 0 after a drain, 1 when start-up fails (a port taken, a bad
// model file), with the reason logged.
//
// Thread rules: call once, from main, before any other thread exists (it blocks SIGTERM and
// SIGINT in every thread so that only its own wait receives them).
#pragma once

#include "strata/server/server_config.h"

namespace strata::server {

int RunServer(const ServerConfig& config);

}  // namespace strata::server
