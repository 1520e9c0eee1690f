// EmbeddingService in-process on a loopback port, over a fake embedder, beside the (callback)
// Generation service as in the server: lifecycle answers, each refusal's code and message, the
// response's fields, and the calls counted.
#include "strata/server/embedding_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "strata/metrics/server_metrics.h"
#include "strata/server/generation_service.h"
#include "strata/v1/embedding.grpc.pb.h"

namespace strata::server {
namespace {

class FakeEmbedder : public embedding::TextEmbedder {
 public:
  StatusOr<embedding::Embeddings> Embed(std::span<const std::string> texts) override {
    for (size_t i = 0; i < texts.size(); ++i) {
      if (texts[i] == "bad") {
        return InvalidArgumentError("texts[" + std::to_string(i) + "]: text is not valid UTF-8");
      }
    }
    embedding::Embeddings e;
    for (size_t i = 0; i < texts.size(); ++i) {
      e.vectors.push_back({static_cast<float>(texts[i].size()), 1.0f, -1.0f});
      e.tokens += 2 + static_cast<int64_t>(texts[i].size());
    }
    return e;
  }
  int dimension() const override { return 3; }
  int max_tokens() const override { return 256; }
  std::string_view model_name() const override { return "fake-model"; }
};

class EmbeddingServiceTest : public ::testing::Test {
 protected:
  void Start(embedding::TextEmbedder* embedder) {
    metrics_ = std::make_unique<metrics::ServerMetrics>(metrics::BuildInfo{});
    state_ = std::make_unique<ServingState>(metrics_.get(), /*log_prompts=*/false);
    generation_ = std::make_unique<GenerationService>(state_.get(), ServiceOptions{});
    EmbeddingServiceOptions options;
    options.max_texts = 4;
    options.max_total_bytes = 64;
    service_ = std::make_unique<EmbeddingService>(state_.get(), embedder, options);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(generation_.get());
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    stub_ = v1::Embedding::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                       grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  grpc::Status Call(const v1::EmbedRequest& request, v1::EmbedResponse* response) {
    grpc::ClientContext ctx;
    return stub_->Embed(&ctx, request, response);
  }

  static v1::EmbedRequest Texts(const std::vector<std::string>& texts) {
    v1::EmbedRequest request;
    request.mutable_texts()->Assign(texts.begin(), texts.end());
    return request;
  }

  FakeEmbedder fake_;
  ServingModel model_;  // only its address matters: Serving() hands it out
  std::unique_ptr<metrics::ServerMetrics> metrics_;
  std::unique_ptr<ServingState> state_;
  std::unique_ptr<GenerationService> generation_;
  std::unique_ptr<EmbeddingService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Embedding::Stub> stub_;
};

TEST_F(EmbeddingServiceTest, AnswersOneVectorPerTextInOrder) {
  Start(&fake_);
  state_->Activate(&model_);
  v1::EmbedRequest request = Texts({"a", "abc"});
  request.set_request_id("r-1");
  v1::EmbedResponse response;
  const grpc::Status status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.request_id(), "r-1");
  EXPECT_EQ(response.model(), "fake-model");
  EXPECT_EQ(response.dimension(), 3);
  EXPECT_EQ(response.prompt_tokens(), 3 + 5);
  ASSERT_EQ(response.embeddings_size(), 2);
  EXPECT_EQ(response.embeddings(1).values_size(), 3);
  EXPECT_EQ(response.embeddings(0).values(0), 1.0f);
  EXPECT_EQ(response.embeddings(1).values(0), 3.0f);
  EXPECT_NE(metrics_->Serialize().find(
                R"(strata_embedding_requests_total{code="OK",transport="grpc"} 1)"),
            std::string::npos);
}

TEST_F(EmbeddingServiceTest, BadRequestsAreInvalidArgumentNamingTheField) {
  Start(&fake_);
  state_->Activate(&model_);
  v1::EmbedResponse response;
  grpc::Status s = Call(v1::EmbedRequest(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "texts must hold 1 to 4 texts, got 0");
  s = Call(Texts({"a", "b", "c", "d", "e"}), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "texts must hold 1 to 4 texts, got 5");
  s = Call(Texts({std::string(40, 'x'), std::string(30, 'y')}), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "texts must hold at most 64 bytes in all, got 70");
  v1::EmbedRequest long_id = Texts({"a"});
  long_id.set_request_id(std::string(129, 'i'));
  EXPECT_EQ(Call(long_id, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = Call(Texts({"ok", "bad"}), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "texts[1]: text is not valid UTF-8");
  // Still serving.
  EXPECT_TRUE(Call(Texts({"ok"}), &response).ok());
  EXPECT_NE(metrics_->Serialize().find(
                R"(strata_embedding_requests_total{code="INVALID_ARGUMENT",transport="grpc"} 5)"),
            std::string::npos);
}

TEST_F(EmbeddingServiceTest, UnavailableWhileLoadingAndDraining) {
  Start(&fake_);
  v1::EmbedResponse response;
  EXPECT_EQ(Call(Texts({"a"}), &response).error_code(), grpc::StatusCode::UNAVAILABLE);
  state_->Activate(&model_);
  EXPECT_TRUE(Call(Texts({"a"}), &response).ok());
  state_->BeginDrain();
  EXPECT_EQ(Call(Texts({"a"}), &response).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(EmbeddingServiceTest, UnimplementedWithoutAnEmbedder) {
  Start(nullptr);
  state_->Activate(&model_);
  v1::EmbedResponse response;
  const grpc::Status s = Call(Texts({"a"}), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(s.error_message().find("--embedding-model"), std::string::npos);
}

}  // namespace
}  // namespace strata::server
