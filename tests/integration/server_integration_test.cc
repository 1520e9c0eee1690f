// strata-server through a C++ gRPC client: the real binary on loopback ports, the real model.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "strata/v1/generation.grpc.pb.h"

extern char** environ;

namespace {

namespace v1 = strata::v1;
using std::chrono::steady_clock;

constexpr char kPrompt[] = "Once upon a time, in a small village by the sea,";

// GET http://127.0.0.1:port/metrics; "" on any failure.
std::string ScrapeMetrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string body;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request =
        "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[65536];
      ssize_t n = 0;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0) body.append(buffer, n);
    }
  }
  close(fd);
  return body;
}

// The value of the unlabelled sample `name` in an exposition; -1 when absent. (No std::regex:
// GCC 12 warns inside it under the sanitizers.)
double Sample(const std::string& text, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + key.size(), nullptr);
}

// The integer after `"key": ` in a flat JSON object; 0 when absent.
int JsonInt(const std::string& text, const std::string& key) {
  const std::string quoted = "\"" + key + "\": ";
  const size_t at = text.find(quoted);
  return at == std::string::npos ? 0 : std::atoi(text.c_str() + at + quoted.size());
}

class Server {
 public:
  Server() {
    dir_ = std::filesystem::temp_directory_path() /
           ("strata-cc-" + std::to_string(getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(dir_);
    const std::string port_file = (dir_ / "ports.json").string();
    const std::string log = (dir_ / "server.log").string();
    std::vector<std::string> args = {STRATA_SERVER_BINARY,
                                     "--model",
                                     STRATA_MODEL_FILE,
                                     "--grpc-port",
                                     "0",
                                     "--metrics-port",
                                     "0",
                                     "--http-port",
                                     "0",
                                     "--threads",
                                     "2",
                                     "--port-file",
                                     port_file};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      return;
    }
    const auto deadline = steady_clock::now() + std::chrono::seconds(60);
    while (steady_clock::now() < deadline) {
      std::ifstream in(port_file);
      std::stringstream text;
      text << in.rdbuf();
      const std::string s = text.str();
      if (s.find('}') != std::string::npos) {
        grpc_port_ = JsonInt(s, "grpc_port");
        metrics_port_ = JsonInt(s, "metrics_port");
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Generation::NewStub(channel_);
  }

  ~Server() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  bool started() const { return pid_ > 0 && grpc_port_ > 0; }

  // Waits until GetModelInfo answers (the model is loaded).
  bool WaitServing() {
    const auto deadline = steady_clock::now() + std::chrono::seconds(60);
    while (steady_clock::now() < deadline) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      v1::ModelInfo info;
      if (stub_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // True once no request holds a KV block, polling /metrics for up to 15 s.
  bool WaitIdleKv() {
    const auto deadline = steady_clock::now() + std::chrono::seconds(15);
    while (steady_clock::now() < deadline) {
      const std::string text = ScrapeMetrics(metrics_port_);
      const double free_blocks = Sample(text, "strata_kv_cache_free_blocks");
      const double blocks = Sample(text, "strata_kv_cache_blocks");
      if (blocks > 0 && free_blocks == blocks) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  int Stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  v1::Generation::Stub& stub() { return *stub_; }
  int metrics_port() const { return metrics_port_; }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

v1::GenerateRequest Greedy(int max_tokens) {
  v1::GenerateRequest r;
  r.set_prompt(kPrompt);
  r.mutable_sampling()->set_max_tokens(max_tokens);
  r.mutable_sampling()->set_temperature(0);
  r.mutable_sampling()->set_ignore_eos(true);
  return r;
}

class ServerIntegration : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new Server();
    ASSERT_TRUE(server_->started());
    ASSERT_TRUE(server_->WaitServing());
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Stop(), 0);
    delete server_;
  }
  static Server* server_;
};
Server* ServerIntegration::server_ = nullptr;

TEST_F(ServerIntegration, UnaryAndStreamingGiveTheSameTokens) {
  grpc::ClientContext unary_ctx;
  v1::GenerateResponse unary;
  ASSERT_TRUE(server_->stub().Generate(&unary_ctx, Greedy(16), &unary).ok());
  EXPECT_EQ(unary.token_ids_size(), 16);
  EXPECT_EQ(unary.finish_reason(), v1::FINISH_REASON_LENGTH);

  grpc::ClientContext stream_ctx;
  auto reader = server_->stub().GenerateStream(&stream_ctx, Greedy(16));
  v1::GenerateStreamResponse message;
  std::vector<int32_t> tokens;
  std::string text;
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  while (reader->Read(&message)) {
    tokens.insert(tokens.end(), message.token_ids().begin(), message.token_ids().end());
    text += message.text();
    if (message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) finish = message.finish_reason();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(tokens, std::vector<int32_t>(unary.token_ids().begin(), unary.token_ids().end()));
  EXPECT_EQ(text, unary.text());
  EXPECT_EQ(finish, v1::FINISH_REASON_LENGTH);
}

TEST_F(ServerIntegration, ABadFieldIsInvalidArgumentNamingIt) {
  v1::GenerateRequest r = Greedy(4);
  r.mutable_sampling()->set_top_p(1.5f);
  grpc::ClientContext ctx;
  v1::GenerateResponse response;
  const grpc::Status status = server_->stub().Generate(&ctx, r, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("top_p"), std::string::npos) << status.error_message();
}

TEST_F(ServerIntegration, ACancelledStreamReturnsItsBlocks) {
  ASSERT_TRUE(server_->WaitIdleKv());
  grpc::ClientContext ctx;
  auto reader = server_->stub().GenerateStream(&ctx, Greedy(1000));
  v1::GenerateStreamResponse message;
  int tokens = 0;
  while (tokens < 3 && reader->Read(&message)) tokens += message.token_ids_size();
  ASSERT_GE(tokens, 3);
  const std::string busy = ScrapeMetrics(server_->metrics_port());
  EXPECT_LT(Sample(busy, "strata_kv_cache_free_blocks"), Sample(busy, "strata_kv_cache_blocks"));
  ctx.TryCancel();
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(server_->WaitIdleKv());
}

TEST_F(ServerIntegration, AnExpiredDeadlineReturnsItsBlocks) {
  ASSERT_TRUE(server_->WaitIdleKv());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(400));
  v1::GenerateResponse response;
  const grpc::Status status = server_->stub().Generate(&ctx, Greedy(1000), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(server_->WaitIdleKv());
}

}  // namespace
