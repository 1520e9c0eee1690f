#include "strata/server/generate_call.h"

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "strata/common/logging.h"
#include "strata/sampling/finish_reason.h"
#include "strata/server/call_recorder.h"
#include "strata/server/call_trace.h"

namespace strata::server {
namespace {

using Clock = std::chrono::steady_clock;

v1::FinishReason ToProto(sampling::FinishReason reason) {
  switch (reason) {
    case sampling::FinishReason::kStop:
      return v1::FINISH_REASON_STOP;
    case sampling::FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case sampling::FinishReason::kCancelled:
      return v1::FINISH_REASON_CANCELLED;
    case sampling::FinishReason::kError:
      return v1::FINISH_REASON_ERROR;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

void AppendLogprobs(const engine::StreamChunk& chunk,
                    google::protobuf::RepeatedPtrField<v1::TokenLogprobs>* out) {
  for (const sampling::SampleLogprobs& lp : chunk.logprobs) {
    v1::TokenLogprobs* p = out->Add();
    p->mutable_chosen()->set_token_id(lp.chosen.token);
    p->mutable_chosen()->set_logprob(lp.chosen.logprob);
    for (const sampling::TokenLogprob& t : lp.top) {
      v1::TokenLogprob* top = p->add_top();
      top->set_token_id(t.token);
      top->set_logprob(t.logprob);
    }
  }
}

void FillUsage(const engine::StreamChunk& last, const CallTrace& trace, v1::Usage* usage,
               v1::Timing* timing) {
  usage->set_prompt_tokens(static_cast<int32_t>(last.usage.prompt_tokens));
  usage->set_completion_tokens(static_cast<int32_t>(last.usage.completion_tokens));
  usage->set_cached_prompt_tokens(static_cast<int32_t>(last.usage.cached_prompt_tokens));
  usage->set_cached(last.from_cache);
  timing->set_queue_seconds(last.timing.queue_seconds);
  timing->set_time_to_first_token_seconds(last.timing.time_to_first_token_seconds);
  timing->set_total_seconds(last.timing.total_seconds);
  timing->set_tokenize_seconds(trace.tokenize_seconds());
  timing->set_cache_lookup_seconds(trace.cache_lookup_seconds());
  timing->set_prefill_seconds(last.timing.prefill_seconds);
  timing->set_decode_seconds(last.timing.decode_seconds);
  timing->set_detokenize_seconds(last.timing.detokenize_seconds);
}

// The caller's W3C trace context, if it sent one.
std::string_view Traceparent(const grpc::CallbackServerContext& ctx) {
  const auto it = ctx.client_metadata().find("traceparent");
  if (it == ctx.client_metadata().end()) return {};
  return {it->second.data(), it->second.size()};
}

// The call's trace, as a span of the method `method` of the Generation service.
CallTrace GrpcCallTrace(const grpc::CallbackServerContext& ctx, const CallEnv& env,
                        const char* method) {
  CallTrace trace(Traceparent(ctx), std::string("strata.v1.Generation/") + method, env.spans);
  trace.SetAttribute("rpc.system", std::string("grpc"));
  trace.SetAttribute("rpc.service", std::string("strata.v1.Generation"));
  trace.SetAttribute("rpc.method", std::string(method));
  return trace;
}

// What an OnCancel means: gRPC calls it for a client's cancel and for an expired deadline alike.
// gRPC's deadline timer runs on its own clock and may fire a little before the deadline as the
// system clock reads it, so a cancel that close to the deadline is the deadline's.
CallRecorder::Cancel CancelKind(std::chrono::system_clock::time_point deadline) {
  constexpr auto kTimerSlack = std::chrono::milliseconds(100);
  return std::chrono::system_clock::now() + kTimerSlack >= deadline
             ? CallRecorder::Cancel::kDeadline
             : CallRecorder::Cancel::kClient;
}

// A request the call submitted: its engine stream, id and seed.
struct Submitted {
  std::shared_ptr<engine::RequestStream> stream;
  std::string request_id;
  uint64_t seed = 0;
};

StatusOr<Submitted> Submit(const CallEnv& env, StatusOr<TranslatedRequest> translated,
                           CallTrace* trace) {
  if (!translated.ok()) return translated.status();
  std::string request_id = std::move(translated->request_id);
  translated->request.record_stages = trace->recording();
  trace->Submitting(translated->request.cache.cacheable);
  StatusOr<std::shared_ptr<engine::RequestStream>> stream =
      env.engine->Submit(std::move(translated->request));
  trace->Submitted();
  if (!stream.ok()) return stream.status();
  if (request_id.empty()) request_id = "strata-" + std::to_string((*stream)->id());
  return Submitted{std::move(*stream), std::move(request_id), translated->seed};
}

Status CancelStatus(CallRecorder::Cancel cancel) {
  return cancel == CallRecorder::Cancel::kDeadline
             ? Status(StatusCode::kDeadlineExceeded,
                      "the deadline expired before the request started")
             : Status(StatusCode::kCancelled, "the request was cancelled");
}

// What both Generate reactors share: the call exists before its request is translated; Start
// submits the translation's result (or ends the call with its error, or with the cancel that
// came meanwhile), a cancel reaches the engine once submitted, and the call owns itself until
// gRPC calls OnDone. `Derived` provides Pump() (the engine's chunks to the client, under mutex_)
// and OnSubmitted(const Submitted&) (called under mutex_).
template <class Reactor, class Derived>
class GenerateCall : public Reactor {
 public:
  GenerateCall(const CallEnv& env, std::chrono::system_clock::time_point deadline, CallTrace trace)
      : env_(env), deadline_(deadline), trace_(std::move(trace)) {}

  void Begin(std::shared_ptr<Derived> self) {
    env_.in_flight->fetch_add(1);
    self_ = std::move(self);
  }

  void Start(StatusOr<TranslatedRequest> translated) {
    std::unique_lock<std::mutex> lock(mutex_);
    trace_.Translated();
    StatusOr<Submitted> submitted = cancel_ != CallRecorder::Cancel::kNone
                                        ? StatusOr<Submitted>(CancelStatus(cancel_))
                                        : Submit(env_, std::move(translated), &trace_);
    if (!submitted.ok()) {
      env_.metrics->CountError(StatusCodeName(submitted.status().code()));
      trace_.End(submitted.status());
      if (env_.key != nullptr) env_.key->End(0, 0);  // its slot is free before the client hears
      finished_ = true;
      lock.unlock();
      this->Finish(ToGrpcStatus(submitted.status()));
      return;
    }
    stream_ = std::move(submitted->stream);
    recorder_.emplace(env_.metrics, std::move(submitted->request_id), env_.key, &trace_);
    static_cast<Derived*>(this)->OnSubmitted(*submitted);
    lock.unlock();
    std::weak_ptr<Derived> weak = self_;
    stream_->SetListener([weak] {
      if (auto call = weak.lock()) call->Pump();
    });
  }

  void OnCancel() override {
    std::shared_ptr<engine::RequestStream> stream;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancel_ = CancelKind(deadline_);
      stream = stream_;  // null until submitted: Start then sees cancel_
    }
    if (stream != nullptr) env_.engine->Cancel(stream->id());
  }

  void OnDone() override {
    env_.in_flight->fetch_sub(1);
    self_.reset();  // may delete this
  }

 protected:
  bool cancelled() const { return cancel_ != CallRecorder::Cancel::kNone; }

  const CallEnv env_;
  const std::chrono::system_clock::time_point deadline_;
  std::mutex mutex_;  // guards everything below but self_
  CallTrace trace_;
  std::shared_ptr<engine::RequestStream> stream_;  // set once submitted
  std::optional<CallRecorder> recorder_;           // set once submitted
  bool finished_ = false;
  CallRecorder::Cancel cancel_ = CallRecorder::Cancel::kNone;

 private:
  std::shared_ptr<Derived> self_;
};

class UnaryGenerate final : public GenerateCall<grpc::ServerUnaryReactor, UnaryGenerate> {
 public:
  UnaryGenerate(const CallEnv& env, std::chrono::system_clock::time_point deadline, CallTrace trace,
                v1::GenerateResponse* response)
      : GenerateCall(env, deadline, std::move(trace)), response_(response) {}

  void OnSubmitted(const Submitted& submitted) {
    response_->set_request_id(recorder_->request_id());
    response_->set_seed(submitted.seed);
  }

  void Pump() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (finished_) return;
    engine::StreamChunk chunk;
    while (stream_->Next(&chunk, std::chrono::seconds(0))) {
      recorder_->OnChunk(chunk);
      for (const int32_t t : chunk.token_ids) response_->add_token_ids(t);
      response_->mutable_text()->append(chunk.text);
      AppendLogprobs(chunk, response_->mutable_logprobs());
      if (!chunk.finish_reason) continue;
      const grpc::Status status = ToGrpcStatus(recorder_->OnLast(chunk, cancel_));
      response_->set_finish_reason(ToProto(*chunk.finish_reason));
      FillUsage(chunk, trace_, response_->mutable_usage(), response_->mutable_timing());
      response_->set_trace_id(trace_.trace_id());
      finished_ = true;
      lock.unlock();
      Finish(status);
      return;
    }
  }

 private:
  v1::GenerateResponse* const response_;  // guarded by mutex_
};

class StreamGenerate final
    : public GenerateCall<grpc::ServerWriteReactor<v1::GenerateStreamResponse>, StreamGenerate> {
 public:
  using GenerateCall::GenerateCall;

  void OnSubmitted(const Submitted& submitted) { seed_ = submitted.seed; }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      writing_ = false;
      if (!ok) write_failed_ = true;
    }
    Pump();
  }

  // Takes every chunk that arrived into one message and writes it, unless a write is in flight
  // (its completion calls Pump again).
  void Pump() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (finished_ || writing_ || stream_ == nullptr) return;
    message_.Clear();
    bool any = false;
    engine::StreamChunk chunk;
    while (stream_->Next(&chunk, std::chrono::seconds(0))) {
      any = true;
      recorder_->OnChunk(chunk);
      for (const int32_t t : chunk.token_ids) message_.add_token_ids(t);
      message_.mutable_text()->append(chunk.text);
      AppendLogprobs(chunk, message_.mutable_logprobs());
      if (!chunk.finish_reason) continue;
      const grpc::Status status = ToGrpcStatus(recorder_->OnLast(chunk, cancel_));
      message_.set_request_id(recorder_->request_id());
      message_.set_finish_reason(ToProto(*chunk.finish_reason));
      FillUsage(chunk, trace_, message_.mutable_usage(), message_.mutable_timing());
      message_.set_trace_id(trace_.trace_id());
      message_.set_seed(seed_);
      finished_ = true;
      const bool write = status.ok() && !cancelled() && !write_failed_;
      lock.unlock();
      if (write) {
        StartWriteAndFinish(&message_, grpc::WriteOptions(), status);
      } else {
        Finish(status);
      }
      return;
    }
    if (!any || cancelled() || write_failed_) return;
    message_.set_request_id(recorder_->request_id());
    writing_ = true;
    lock.unlock();
    StartWrite(&message_);
  }

 private:
  // Guarded by mutex_.
  uint64_t seed_ = 0;
  v1::GenerateStreamResponse message_;  // owned by gRPC while writing_
  bool writing_ = false;
  bool write_failed_ = false;
};

class RefusedStream final : public grpc::ServerWriteReactor<v1::GenerateStreamResponse> {
 public:
  explicit RefusedStream(const Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(status.code())),
                      status.message());
}

grpc::ServerUnaryReactor* RefuseUnary(grpc::CallbackServerContext* ctx,
                                      metrics::ServerMetrics* metrics, const Status& status) {
  metrics->CountError(StatusCodeName(status.code()));
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerWriteReactor<v1::GenerateStreamResponse>* RefuseStream(metrics::ServerMetrics* metrics,
                                                                   const Status& status) {
  metrics->CountError(StatusCodeName(status.code()));
  return new RefusedStream(status);
}

grpc::ServerUnaryReactor* StartUnaryGenerate(const CallEnv& env, grpc::CallbackServerContext* ctx,
                                             v1::GenerateResponse* response,
                                             const std::function<void(TranslatedFn)>& translate) {
  auto call = std::make_shared<UnaryGenerate>(env, ctx->deadline(),
                                              GrpcCallTrace(*ctx, env, "Generate"), response);
  call->Begin(call);
  translate([call](StatusOr<TranslatedRequest> translated) { call->Start(std::move(translated)); });
  return call.get();
}

grpc::ServerWriteReactor<v1::GenerateStreamResponse>* StartStreamGenerate(
    const CallEnv& env, grpc::CallbackServerContext* ctx,
    const std::function<void(TranslatedFn)>& translate) {
  auto call = std::make_shared<StreamGenerate>(env, ctx->deadline(),
                                               GrpcCallTrace(*ctx, env, "GenerateStream"));
  call->Begin(call);
  translate([call](StatusOr<TranslatedRequest> translated) { call->Start(std::move(translated)); });
  return call.get();
}

}  // namespace strata::server
