// Driving an Engine by hand in tests: read back what each request's stream carried, and step
// the engine until every request has finished.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "strata/engine/engine.h"

namespace strata::testing {

// What one request produced, read back from its stream.
struct EngineOutput {
  std::vector<int32_t> tokens;
  std::vector<sampling::SampleLogprobs> logprobs;
  std::string text;
  std::optional<sampling::FinishReason> finish;
  Status error;
  engine::RequestUsage usage;
  engine::RequestTiming timing;
  int chunks = 0;
};

// Takes everything queued on `stream` so far (non-blocking).
inline void Collect(engine::RequestStream& stream, EngineOutput* out) {
  engine::StreamChunk chunk;
  while (stream.Next(&chunk, std::chrono::seconds(0))) {
    ++out->chunks;
    out->tokens.insert(out->tokens.end(), chunk.token_ids.begin(), chunk.token_ids.end());
    out->logprobs.insert(out->logprobs.end(), chunk.logprobs.begin(), chunk.logprobs.end());
    out->text += chunk.text;
    if (chunk.finish_reason) {
      out->finish = chunk.finish_reason;
      out->error = chunk.error;
      out->usage = chunk.usage;
      out->timing = chunk.timing;
    }
  }
}

// Steps `engine` by hand until every stream has finished, collecting their outputs.
inline std::vector<EngineOutput> Drain(
    engine::Engine& engine, const std::vector<std::shared_ptr<engine::RequestStream>>& streams) {
  std::vector<EngineOutput> outputs(streams.size());
  for (int step = 0; step < 100000; ++step) {
    bool did_work = false;
    Status status = engine.Step(&did_work);
    EXPECT_TRUE(status.ok()) << status.ToString();
    bool all = true;
    for (size_t i = 0; i < streams.size(); ++i) {
      Collect(*streams[i], &outputs[i]);
      all &= outputs[i].finish.has_value();
    }
    if (all) break;
    if (!did_work) {
      if (engine.Stats().constraint_masks_pending > 0) {
        // A request waits while the mask helper computes its next mask.
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      ADD_FAILURE() << "the engine idles with unfinished requests";
      break;
    }
  }
  return outputs;
}

}  // namespace strata::testing
