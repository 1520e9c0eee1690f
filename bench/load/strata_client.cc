#include "bench/load/strata_client.h"

#include <chrono>
#include <thread>

#include "bench/load/json_fields.h"
#include "bench/load/token_timeline.h"

namespace strata::bench {

namespace {

namespace v1 = strata::v1;

std::string CodeName(grpc::StatusCode code) {
  return std::string(StatusCodeName(static_cast<StatusCode>(code)));
}

// One GenerateStream call; deletes itself when the call is done.
class StreamReactor : public grpc::ClientReadReactor<v1::GenerateStreamResponse> {
 public:
  StreamReactor(int64_t index, const RequestSpec& spec, double timeout_s,
                TargetClient::DoneCallback done)
      : spec_tokens_(static_cast<int64_t>(spec.prompt_token_ids.size())),
        requested_(spec.output_tokens),
        done_(std::move(done)) {
    if (spec.has_text) {
      request_.set_prompt(spec.prompt_text);
    } else {
      request_.mutable_token_ids()->mutable_ids()->Add(spec.prompt_token_ids.begin(),
                                                       spec.prompt_token_ids.end());
    }
    v1::SamplingParams* sampling = request_.mutable_sampling();
    sampling->set_max_tokens(static_cast<int32_t>(spec.output_tokens));
    sampling->set_temperature(static_cast<float>(spec.temperature));
    if (spec.temperature > 0) {
      sampling->set_top_p(static_cast<float>(spec.top_p));
      sampling->set_seed(spec.seed);
      if (spec.top_k >= 0) sampling->set_top_k(static_cast<int32_t>(spec.top_k));
      if (spec.min_p >= 0) sampling->set_min_p(static_cast<float>(spec.min_p));
    }
    sampling->set_ignore_eos(true);
    request_.set_request_id("strata-bench-" + std::to_string(index));
    context_.set_deadline(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3)));
  }

  void Begin(v1::Generation::Stub* stub) {
    stub->async()->GenerateStream(&context_, &request_, this);
    StartRead(&response_);
    timeline_.MarkSent();
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    timeline_.AddTokens(response_.token_ids_size());
    if (response_.has_usage()) prompt_tokens_ = response_.usage().prompt_tokens();
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    RequestResult result;
    if (status.ok()) {
      result = timeline_.Finish();
      result.prompt_tokens = prompt_tokens_.value_or(spec_tokens_);
    } else {
      result.error_kind = CodeName(status.error_code());
      result.error_message = result.error_kind + ": " + status.error_message();
    }
    result.requested_output_tokens = requested_;
    TargetClient::DoneCallback done = std::move(done_);
    delete this;
    done(std::move(result));
  }

 private:
  grpc::ClientContext context_;
  v1::GenerateRequest request_;
  v1::GenerateStreamResponse response_;
  TokenTimeline timeline_;
  std::optional<int64_t> prompt_tokens_;
  int64_t spec_tokens_;
  int64_t requested_;
  TargetClient::DoneCallback done_;
};

}  // namespace

StrataClient::StrataClient(const std::string& addr, int channels, double timeout_s)
    : timeout_s_(timeout_s) {
  for (int i = 0; i < std::max(channels, 1); ++i) {
    grpc::ChannelArguments args;
    // Distinct arguments keep gRPC from sharing one connection between the channels.
    args.SetInt("strata_bench.channel", i);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(-1);
    stubs_.push_back(v1::Generation::NewStub(
        grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args)));
  }
}

void StrataClient::Start(int64_t index, const RequestSpec& spec, DoneCallback done) {
  auto* reactor = new StreamReactor(index, spec, timeout_s_, std::move(done));
  reactor->Begin(stubs_[next_stub_].get());
  next_stub_ = (next_stub_ + 1) % stubs_.size();
}

StatusOr<std::string> StrataClient::ServerInfoJson(double wait_s) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(wait_s, 0.0));
  v1::ModelInfo info;
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    const grpc::Status status = stubs_[0]->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
    if (status.ok()) break;
    if (std::chrono::steady_clock::now() >= deadline ||
        (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
         status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED)) {
      return Status(static_cast<StatusCode>(status.error_code()),
                    "GetModelInfo: " + status.error_message());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  vocab_size_ = info.vocab_size();
  nlohmann::ordered_json j;
  j["name"] = info.name();
  j["architecture"] = info.architecture();
  j["parameters"] = info.parameters();
  j["quantization"] = info.quantization();
  j["context_length"] = info.context_length();
  j["vocab_size"] = info.vocab_size();
  j["chat_template"] = info.chat_template();
  j["max_batch_size"] = info.max_batch_size();
  j["max_batched_tokens"] = info.max_batched_tokens();
  j["kv_cache_tokens"] = info.kv_cache_tokens();
  j["max_queued_requests"] = info.max_queued_requests();
  j["backend"] = info.backend();
  j["version"] = info.version();
  return JsonText(j);
}

}  // namespace strata::bench
