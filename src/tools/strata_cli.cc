// strata-cli: a command-line client of strata-server.
//
//   strata-cli [--addr HOST:PORT] [--timeout SECONDS] COMMAND [ARGS]
//     generate PROMPT [sampling flags]   streams the completion to stdout
//     chat [MESSAGE] [--system TEXT] [sampling flags]
//                                        one turn, or (without MESSAGE) a conversation read
//                                        line by line from stdin
//     tokenize TEXT [--no-special] [--parse-special]
//     info                               the served model and the server's limits
//     health [--service NAME]            exit 0 when SERVING, 1 otherwise
//
// Sampling flags: --max-tokens N --temperature F --top-p F --top-k N --min-p F --seed N
// --stop TEXT (repeatable) --ignore-eos --priority N --request-id ID. A failed call prints
// "strata-cli: CODE: message" on stderr and exits 1; a bad flag exits 2.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "strata/common/tool_args.h"
#include "strata/v1/generation.grpc.pb.h"

namespace {

constexpr char kUsage[] =
    "usage: strata-cli [--addr HOST:PORT] [--timeout SECONDS] COMMAND [ARGS]\n"
    "  generate PROMPT [sampling flags]   stream a completion\n"
    "  chat [MESSAGE] [--system TEXT] [sampling flags]\n"
    "                                     one turn, or a conversation from stdin lines\n"
    "  tokenize TEXT [--no-special] [--parse-special]\n"
    "  info                               the served model and limits\n"
    "  health [--service NAME]            exit 0 when SERVING\n"
    "sampling flags: --max-tokens N --temperature F --top-p F --top-k N --min-p F --seed N\n"
    "  --stop TEXT (repeatable) --ignore-eos --priority N --request-id ID\n"
    "defaults: --addr 127.0.0.1:50051, --timeout 600\n";

constexpr strata::ToolArgs kArgs("strata-cli", /*usage_exit_code=*/2);

struct Options {
  std::string addr = "127.0.0.1:50051";
  double timeout_seconds = 600;
  std::string command;
  std::vector<std::string> positional;
  std::string system;
  std::string service;
  bool add_special = true;
  bool parse_special = false;
  strata::v1::SamplingParams sampling;
  int32_t priority = 0;
  std::string request_id;
};

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) kArgs.Fail(a + " needs a value (see --help)", 2);
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--addr") {
      o.addr = value();
    } else if (a == "--timeout") {
      o.timeout_seconds = kArgs.Number(a, value());
    } else if (a == "--system") {
      o.system = value();
    } else if (a == "--service") {
      o.service = value();
    } else if (a == "--no-special") {
      o.add_special = false;
    } else if (a == "--parse-special") {
      o.parse_special = true;
    } else if (a == "--max-tokens") {
      o.sampling.set_max_tokens(static_cast<int32_t>(kArgs.Int(a, value(), 1)));
    } else if (a == "--temperature") {
      o.sampling.set_temperature(static_cast<float>(kArgs.Number(a, value())));
    } else if (a == "--top-p") {
      o.sampling.set_top_p(static_cast<float>(kArgs.Number(a, value())));
    } else if (a == "--top-k") {
      o.sampling.set_top_k(static_cast<int32_t>(kArgs.Int(a, value(), 0)));
    } else if (a == "--min-p") {
      o.sampling.set_min_p(static_cast<float>(kArgs.Number(a, value())));
    } else if (a == "--seed") {
      o.sampling.set_seed(static_cast<uint64_t>(kArgs.Int(a, value(), 0)));
    } else if (a == "--stop") {
      o.sampling.add_stop(value());
    } else if (a == "--ignore-eos") {
      o.sampling.set_ignore_eos(true);
    } else if (a == "--priority") {
      o.priority = static_cast<int32_t>(kArgs.Int(a, value()));
    } else if (a == "--request-id") {
      o.request_id = value();
    } else if (a.size() > 1 && a[0] == '-' && a[1] == '-') {
      kArgs.Fail("unknown flag " + a + " (see --help)", 2);
    } else if (o.command.empty()) {
      o.command = a;
    } else {
      o.positional.push_back(a);
    }
  }
  if (o.command.empty()) kArgs.Fail(std::string("missing COMMAND\n") + kUsage, 2);
  if (!(o.timeout_seconds > 0)) kArgs.Fail("--timeout must be > 0", 2);
  return o;
}

void SetDeadline(grpc::ClientContext* ctx, const Options& o) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(o.timeout_seconds * 1000)));
}

[[noreturn]] void FailCall(const grpc::Status& status) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int code = static_cast<int>(status.error_code());
  const char* name = code >= 0 && code <= 16 ? kNames[code] : "UNKNOWN";
  kArgs.Fail(std::string(name) + ": " + status.error_message(), 1);
}

const char* FinishName(strata::v1::FinishReason reason) {
  switch (reason) {
    case strata::v1::FINISH_REASON_STOP:
      return "stop";
    case strata::v1::FINISH_REASON_LENGTH:
      return "length";
    case strata::v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    case strata::v1::FINISH_REASON_ERROR:
      return "error";
    default:
      return "unspecified";
  }
}

// Streams `request`, printing text as it comes; returns the whole text.
std::string Stream(strata::v1::Generation::Stub& stub, const Options& o,
                   strata::v1::GenerateRequest request) {
  *request.mutable_sampling() = o.sampling;
  request.set_priority(o.priority);
  request.set_request_id(o.request_id);
  grpc::ClientContext ctx;
  SetDeadline(&ctx, o);
  std::unique_ptr<grpc::ClientReader<strata::v1::GenerateStreamResponse>> reader =
      stub.GenerateStream(&ctx, request);
  strata::v1::GenerateStreamResponse message;
  std::string text;
  strata::v1::GenerateStreamResponse last;
  while (reader->Read(&message)) {
    std::fwrite(message.text().data(), 1, message.text().size(), stdout);
    std::fflush(stdout);
    text += message.text();
    if (message.finish_reason() != strata::v1::FINISH_REASON_UNSPECIFIED) last = message;
  }
  const grpc::Status status = reader->Finish();
  std::fputc('\n', stdout);
  if (!status.ok()) FailCall(status);
  const double total = last.timing().total_seconds();
  const double ttft = last.timing().time_to_first_token_seconds();
  const int32_t tokens = last.usage().completion_tokens();
  std::fprintf(stderr,
               "[strata-cli] %s: %d prompt tokens (%d cached), %d generated, TTFT %.0f ms, "
               "total %.0f ms, %.1f tokens/s after the first\n",
               FinishName(last.finish_reason()), last.usage().prompt_tokens(),
               last.usage().cached_prompt_tokens(), tokens, ttft * 1000, total * 1000,
               tokens > 1 && total > ttft ? (tokens - 1) / (total - ttft) : 0.0);
  return text;
}

int Generate(strata::v1::Generation::Stub& stub, const Options& o) {
  if (o.positional.size() != 1) kArgs.Fail("generate takes one PROMPT (quote it)", 2);
  strata::v1::GenerateRequest request;
  request.set_prompt(o.positional[0]);
  Stream(stub, o, request);
  return 0;
}

int Chat(strata::v1::Generation::Stub& stub, const Options& o) {
  if (o.positional.size() > 1) kArgs.Fail("chat takes at most one MESSAGE (quote it)", 2);
  strata::v1::ChatMessages history;
  if (!o.system.empty()) {
    strata::v1::ChatMessage* m = history.add_messages();
    m->set_role("system");
    m->set_content(o.system);
  }
  auto turn = [&](const std::string& user) {
    strata::v1::ChatMessage* m = history.add_messages();
    m->set_role("user");
    m->set_content(user);
    strata::v1::GenerateRequest request;
    *request.mutable_chat() = history;
    const std::string reply = Stream(stub, o, request);
    strata::v1::ChatMessage* a = history.add_messages();
    a->set_role("assistant");
    a->set_content(reply);
  };
  if (o.positional.size() == 1) {
    turn(o.positional[0]);
    return 0;
  }
  std::string line;
  std::fputs("> ", stderr);
  while (std::getline(std::cin, line)) {
    if (!line.empty()) turn(line);
    std::fputs("> ", stderr);
  }
  return 0;
}

int Tokenize(strata::v1::Generation::Stub& stub, const Options& o) {
  if (o.positional.size() != 1) kArgs.Fail("tokenize takes one TEXT (quote it)", 2);
  strata::v1::TokenizeRequest request;
  request.set_text(o.positional[0]);
  request.set_add_special(o.add_special);
  request.set_parse_special(o.parse_special);
  strata::v1::TokenizeResponse response;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, o);
  const grpc::Status status = stub.Tokenize(&ctx, request, &response);
  if (!status.ok()) FailCall(status);
  for (int i = 0; i < response.token_ids_size(); ++i) {
    std::printf("%d\t%s\n", response.token_ids(i), response.pieces(i).c_str());
  }
  return 0;
}

int Info(strata::v1::Generation::Stub& stub, const Options& o) {
  strata::v1::ModelInfo info;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, o);
  const grpc::Status status = stub.GetModelInfo(&ctx, strata::v1::GetModelInfoRequest(), &info);
  if (!status.ok()) FailCall(status);
  std::printf(
      "name                %s\narchitecture        %s\nparameters          %lld\n"
      "quantization        %s\ncontext_length      %d\nvocab_size          %d\n"
      "chat_template       %s\nmax_batch_size      %d\nmax_batched_tokens  %lld\n"
      "kv_cache_tokens     %lld\nmax_queued_requests %d\nbackend             %s\n"
      "version             %s\n",
      info.name().c_str(), info.architecture().c_str(), static_cast<long long>(info.parameters()),
      info.quantization().c_str(), info.context_length(), info.vocab_size(),
      info.chat_template().c_str(), info.max_batch_size(),
      static_cast<long long>(info.max_batched_tokens()),
      static_cast<long long>(info.kv_cache_tokens()), info.max_queued_requests(),
      info.backend().c_str(), info.version().c_str());
  return 0;
}

// grpc.health.v1.Health/Check through a generic call: its two messages are one field each,
// so they are written and read by hand instead of linking a second copy of health.proto.
int Health(const std::shared_ptr<grpc::Channel>& channel, const Options& o) {
  std::string request;
  if (!o.service.empty()) {
    if (o.service.size() > 127) kArgs.Fail("--service is too long", 2);
    request.push_back(0x0a);  // field 1, length-delimited
    request.push_back(static_cast<char>(o.service.size()));
    request += o.service;
  }
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, o);
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request_buffer, &cq);
  call->StartCall();
  grpc::ByteBuffer response_buffer;
  grpc::Status status;
  call->Finish(&response_buffer, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  if (!status.ok()) FailCall(status);
  std::vector<grpc::Slice> slices;
  std::string response;
  if (response_buffer.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      response.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  // HealthCheckResponse { ServingStatus status = 1; }: tag 0x08 then a one-byte varint.
  const int value = response.size() >= 2 && response[0] == 0x08 ? response[1] : 0;
  static const char* const kStatus[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
  std::printf("%s\n", value >= 0 && value <= 3 ? kStatus[value] : "UNKNOWN");
  return value == 1 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(o.addr, grpc::InsecureChannelCredentials());
  std::unique_ptr<strata::v1::Generation::Stub> stub = strata::v1::Generation::NewStub(channel);
  if (o.command == "generate") return Generate(*stub, o);
  if (o.command == "chat") return Chat(*stub, o);
  if (o.command == "tokenize") return Tokenize(*stub, o);
  if (o.command == "info") return Info(*stub, o);
  if (o.command == "health") return Health(channel, o);
  kArgs.Fail("unknown command '" + o.command + "' (see --help)", 2);
}
