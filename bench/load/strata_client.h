// StrataClient: the `--target strata` client — GenerateStream through gRPC's callback API, one
// ClientReadReactor per request, many calls in flight on a few HTTP/2 channels (round robin).
//
// Requests: token ids (or text from a dataset), max_tokens = output tokens, temperature 0,
// ignore_eos. A message's token_ids count as its tokens (TokenTimeline's rule for several per
// message); prompt tokens come from the final message's usage.
//
// Thread rules: Start from one thread; `done` runs on a gRPC callback thread. The caller waits
// for every `done` before destroying the client.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/load/target_client.h"
#include "strata/v1/generation.grpc.pb.h"

namespace strata::bench {

class StrataClient : public TargetClient {
 public:
  // `addr`: HOST:PORT; `channels` >= 1 separate connections; `timeout_s`: each call's deadline.
  StrataClient(const std::string& addr, int channels, double timeout_s);

  void Start(int64_t index, const RequestSpec& spec, DoneCallback done) override;
  // GetModelInfo's fields.
  StatusOr<std::string> ServerInfoJson(double wait_s) override;
  std::optional<int64_t> VocabSize() const override { return vocab_size_; }

 private:
  std::vector<std::unique_ptr<strata::v1::Generation::Stub>> stubs_;
  size_t next_stub_ = 0;
  double timeout_s_;
  std::optional<int64_t> vocab_size_;
};

}  // namespace strata::bench
