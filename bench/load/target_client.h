// TargetClient: how the load runner talks to a server under test, whatever its protocol.
//
// Thread rules: Start is called from the runner's thread only; `done` may run on any thread (a
// gRPC callback thread, a request thread). The runner waits for every `done` before it
// destroys the client.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "bench/load/request_result.h"
#include "bench/load/workload.h"
#include "strata/common/status.h"

namespace strata::bench {

class TargetClient {
 public:
  using DoneCallback = std::function<void(RequestResult)>;

  virtual ~TargetClient() = default;

  // Sends one streaming request (greedy, EOS ignored, spec.output_tokens tokens) and returns at
  // once; `done` runs exactly once with its measurements or its error. `index` names the request
  // (e.g. in a request id).
  virtual void Start(int64_t index, const RequestSpec& spec, DoneCallback done) = 0;

  // Facts about the server for the report, as one JSON object text ("{}" when it tells none).
  // Retries for up to `wait_s` seconds while the server is unreachable or still loading; the last
  // error after that.
  virtual StatusOr<std::string> ServerInfoJson(double wait_s) = 0;

  // The largest vocabulary id the server accepts, when it says (used to check --token-ids).
  virtual std::optional<int64_t> VocabSize() const { return std::nullopt; }
};

}  // namespace strata::bench
