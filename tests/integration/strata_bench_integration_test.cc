// strata-bench against the real strata-server: the server on loopback port 0 with the real model,
// the bench binary as a user runs it, and its --json line checked field by field.
//
// (Kept under tests/unit/bench_load/integration/ beside the bench's unit tests; the unit glob
// does not descend here, and tests/CMakeLists.txt registers it with the label `integration`.)
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/load/json_fields.h"

extern char** environ;

namespace {

using Json = nlohmann::json;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Spawns `args` with stdout and stderr to `log`; the pid, or -1.
pid_t Spawn(std::vector<std::string> args, const std::string& log) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// The exit code of `pid`, or -1 when it did not exit normally.
int Wait(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

class StrataBench : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("strata-bench-it-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (server_pid_ > 0) {
      kill(server_pid_, SIGTERM);
      Wait(server_pid_);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Starts strata-server on port 0; its gRPC port (and *http_port), or 0.
  int StartServer(int* http_port = nullptr) {
    const std::string port_file = (dir_ / "ports.json").string();
    server_pid_ = Spawn(
        {STRATA_SERVER_BINARY, "--model", STRATA_MODEL_FILE, "--grpc-port", "0", "--metrics-port",
         "0", "--http-port", "0", "--threads", "2", "--port-file", port_file},
        (dir_ / "server.log").string());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (server_pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
      // Parsed by hand: std::regex trips GCC 12's warnings under the sanitizers.
      const std::string text = ReadFile(port_file);
      const std::string key = "\"grpc_port\": ";
      const size_t at = text.find(key);
      if (at != std::string::npos && text.find('}') != std::string::npos) {
        if (http_port != nullptr) {
          const std::string http_key = "\"http_port\": ";
          const size_t h = text.find(http_key);
          *http_port = h == std::string::npos ? 0 : std::atoi(text.c_str() + h + http_key.size());
        }
        return std::atoi(text.c_str() + at + key.size());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  }

  // Runs strata-bench with `args`; its exit code (its output goes to bench.log).
  int RunBench(std::vector<std::string> args) {
    args.insert(args.begin(), STRATA_BENCH_BINARY);
    const pid_t pid = Spawn(args, (dir_ / "bench.log").string());
    return pid > 0 ? Wait(pid) : -1;
  }

  std::filesystem::path dir_;
  pid_t server_pid_ = -1;
};

const Json& Object(const Json& parent, const std::string& key) { return parent.at(key); }

double Number(const Json& parent, const std::string& key) { return parent.at(key).get<double>(); }

std::string Text(const Json& parent, const std::string& key) {
  return parent.at(key).get<std::string>();
}

TEST_F(StrataBench, ClosedLoopRunReportsEveryRequestAndOrderedPercentiles) {
  const int port = StartServer();
  ASSERT_GT(port, 0) << ReadFile(dir_ / "server.log");
  const std::string json = (dir_ / "run.jsonl").string();
  const int rc = RunBench({"--addr", "127.0.0.1:" + std::to_string(port), "--concurrency", "4",
                           "--num-requests", "8", "--prompt-tokens", "32", "--output-tokens", "16",
                           "--wait-server", "60", "--label", "it", "--json", json});
  const std::string log = ReadFile(dir_ / "bench.log");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("TTFT"), std::string::npos) << log;

  const std::string text = ReadFile(json);
  ASSERT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;  // one line per run
  const auto line = strata::bench::ParseJsonObject(text);
  ASSERT_TRUE(line.ok()) << line.status().ToString() << "\n" << text;
  EXPECT_EQ(Text(*line, "label"), "it");
  const Json& config = Object(*line, "config");
  EXPECT_EQ(Text(config, "target"), "strata");
  EXPECT_EQ(Number(config, "concurrency"), 4);
  EXPECT_EQ(Number(config, "num_requests"), 8);
  const Json& server = Object(*line, "server");
  EXPECT_GT(Number(server, "vocab_size"), 0);
  EXPECT_EQ(Text(server, "architecture"), "gemma3");

  const Json& results = Object(*line, "results");
  EXPECT_EQ(Number(results, "completed"), 8);
  EXPECT_EQ(Number(results, "errors"), 0);
  EXPECT_EQ(Number(results, "output_length_mismatches"), 0);
  EXPECT_EQ(Number(results, "total_output_tokens"), 16 * 8);
  EXPECT_EQ(Number(results, "total_prompt_tokens"), 32 * 8);
  EXPECT_GT(Number(results, "output_tokens_per_s"), 0);
  EXPECT_GT(Number(results, "requests_per_s"), 0);
  EXPECT_DOUBLE_EQ(Number(results, "goodput_requests_per_s"), Number(results, "requests_per_s"));
  EXPECT_NEAR(Number(results, "total_tokens_per_s"),
              Number(results, "output_tokens_per_s") * (16 + 32) / 16.0, 1e-6);
  for (const char* metric : {"ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"}) {
    const Json& s = Object(results, metric);
    EXPECT_GT(Number(s, "p50"), 0) << metric;
    EXPECT_LE(Number(s, "p50"), Number(s, "p90")) << metric;
    EXPECT_LE(Number(s, "p90"), Number(s, "p95")) << metric;
    EXPECT_LE(Number(s, "p95"), Number(s, "p99")) << metric;
    EXPECT_LE(Number(s, "p99"), Number(s, "max")) << metric;
  }
  EXPECT_EQ(Number(Object(results, "itl_ms"), "count"), 8 * 15);
  EXPECT_EQ(Number(Object(results, "ttft_ms"), "count"), 8);
  EXPECT_LT(Number(Object(results, "ttft_ms"), "max"), Number(Object(results, "e2e_ms"), "max"));
}

TEST_F(StrataBench, UnreachableServerFailsFastWithExitCodeOne) {
  // Nothing listens on port 1 of loopback.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(RunBench({"--addr", "127.0.0.1:1", "--wait-server", "0", "--num-requests", "1"}), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_NE(ReadFile(dir_ / "bench.log").find("did not answer"), std::string::npos);
}

TEST_F(StrataBench, ServerErrorsAreCountedByKindAndStopTheRun) {
  const int port = StartServer();
  ASSERT_GT(port, 0);
  // Prompts past the context length: the server rejects every request with INVALID_ARGUMENT.
  const std::string json = (dir_ / "errors.jsonl").string();
  const int rc = RunBench({"--addr", "127.0.0.1:" + std::to_string(port), "--num-requests", "20",
                           "--prompt-tokens", "40000", "--output-tokens", "4", "--max-errors", "2",
                           "--wait-server", "60", "--json", json});
  EXPECT_EQ(rc, 3) << ReadFile(dir_ / "bench.log");
  const auto line = strata::bench::ParseJsonObject(ReadFile(json));
  ASSERT_TRUE(line.ok());
  const Json& results = Object(*line, "results");
  EXPECT_EQ(Number(results, "completed"), 0);
  EXPECT_EQ(Number(results, "errors"), 3);
  EXPECT_EQ(Number(Object(results, "errors_by_kind"), "INVALID_ARGUMENT"), 3);
  EXPECT_TRUE(results.at("stopped_early").get<bool>());
  EXPECT_TRUE(Object(results, "ttft_ms").at("p50").is_null());
}

// The OpenAI target against Strata's own HTTP API: streamed completions timed token by token,
// the same counts as over gRPC.
TEST_F(StrataBench, OpenAiTargetDrivesStratasHttpApi) {
  int http_port = 0;
  ASSERT_GT(StartServer(&http_port), 0) << ReadFile(dir_ / "server.log");
  ASSERT_GT(http_port, 0) << ReadFile(dir_ / "ports.json");
  const std::string json = (dir_ / "openai.jsonl").string();
  const int rc =
      RunBench({"--target", "openai", "--url", "http://127.0.0.1:" + std::to_string(http_port),
                "--concurrency", "4", "--num-requests", "8", "--prompt-tokens", "32",
                "--output-tokens", "16", "--wait-server", "60", "--json", json});
  ASSERT_EQ(rc, 0) << ReadFile(dir_ / "bench.log");
  const auto line = strata::bench::ParseJsonObject(ReadFile(json));
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  EXPECT_EQ(Text(Object(*line, "config"), "target"), "openai");
  const Json& results = Object(*line, "results");
  EXPECT_EQ(Number(results, "completed"), 8);
  EXPECT_EQ(Number(results, "errors"), 0);
  EXPECT_EQ(Number(results, "output_length_mismatches"), 0);
  EXPECT_EQ(Number(results, "total_output_tokens"), 16 * 8);
  EXPECT_GT(Number(Object(results, "itl_ms"), "count"), 0);
  EXPECT_GT(Number(Object(results, "ttft_ms"), "p50"), 0);
}

}  // namespace
