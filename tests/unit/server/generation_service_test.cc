// GenerationService's lifecycle answers, in-process on a loopback port: before Activate (the
// model loading) and after BeginDrain every call is UNAVAILABLE, and the refusal is counted.
#include "strata/server/generation_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "strata/metrics/server_metrics.h"
#include "strata/v1/generation.grpc.pb.h"

namespace strata::server {
namespace {

class GenerationServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_ = std::make_unique<metrics::ServerMetrics>(metrics::BuildInfo{});
    state_ = std::make_unique<ServingState>(metrics_.get(), /*log_prompts=*/false);
    service_ = std::make_unique<GenerationService>(state_.get(), ServiceOptions{});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    stub_ = v1::Generation::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                        grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_->Shutdown(); }

  // Every RPC's status code.
  std::vector<grpc::StatusCode> CallEverything() {
    std::vector<grpc::StatusCode> codes;
    v1::GenerateRequest request;
    request.set_prompt("hello");
    {
      grpc::ClientContext ctx;
      v1::GenerateResponse response;
      codes.push_back(stub_->Generate(&ctx, request, &response).error_code());
    }
    {
      grpc::ClientContext ctx;
      auto reader = stub_->GenerateStream(&ctx, request);
      v1::GenerateStreamResponse message;
      EXPECT_FALSE(reader->Read(&message));
      codes.push_back(reader->Finish().error_code());
    }
    {
      grpc::ClientContext ctx;
      v1::TokenizeRequest tokenize;
      tokenize.set_text("hello");
      v1::TokenizeResponse response;
      codes.push_back(stub_->Tokenize(&ctx, tokenize, &response).error_code());
    }
    {
      grpc::ClientContext ctx;
      v1::DetokenizeResponse response;
      codes.push_back(stub_->Detokenize(&ctx, v1::DetokenizeRequest(), &response).error_code());
    }
    {
      grpc::ClientContext ctx;
      v1::ModelInfo info;
      codes.push_back(stub_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).error_code());
    }
    return codes;
  }

  std::unique_ptr<metrics::ServerMetrics> metrics_;
  std::unique_ptr<ServingState> state_;
  std::unique_ptr<GenerationService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

TEST_F(GenerationServiceTest, EveryCallIsUnavailableWhileTheModelLoads) {
  for (grpc::StatusCode code : CallEverything()) EXPECT_EQ(code, grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(metrics_->Serialize().find("strata_request_errors_total{code=\"UNAVAILABLE\"} 5"),
            std::string::npos)
      << metrics_->Serialize();
  EXPECT_EQ(state_->in_flight(), 0);
}

TEST_F(GenerationServiceTest, EveryCallIsUnavailableWhileDraining) {
  state_->BeginDrain();
  for (grpc::StatusCode code : CallEverything()) EXPECT_EQ(code, grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace strata::server
