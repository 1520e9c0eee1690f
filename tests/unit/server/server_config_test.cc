#include "strata/server/server_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace strata::server {
namespace {

struct Inputs {
  Inputs(std::vector<std::string> a = {}, std::map<std::string, std::string> e = {},
         std::map<std::string, std::string> f = {})
      : args(std::move(a)), env(std::move(e)), files(std::move(f)) {}
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;
};

StatusOr<ServerConfig> Load(const Inputs& in, bool* help = nullptr) {
  bool ignored = false;
  return LoadServerConfig(
      in.args,
      [&](const std::string& name) -> std::optional<std::string> {
        auto it = in.env.find(name);
        if (it == in.env.end()) return std::nullopt;
        return it->second;
      },
      [&](const std::string& path) -> StatusOr<std::string> {
        auto it = in.files.find(path);
        if (it == in.files.end()) return NotFoundError("no such file");
        return it->second;
      },
      help != nullptr ? help : &ignored);
}

TEST(ServerConfig, DefaultsNeedOnlyTheModel) {
  StatusOr<ServerConfig> c = Load({{"--model", "m.gguf"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model, "m.gguf");
  EXPECT_EQ(c->host, "127.0.0.1");
  EXPECT_EQ(c->grpc_port, 50051);
  EXPECT_EQ(c->max_batch_size, 64);
  EXPECT_TRUE(c->enable_prefix_caching);
}

TEST(ServerConfig, TheModelIsRequired) {
  StatusOr<ServerConfig> c = Load({});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--model"), std::string::npos);
}

TEST(ServerConfig, FlagsBeatTheEnvironmentWhichBeatsTheFile) {
  Inputs in;
  in.files["s.conf"] =
      "# a comment\nmodel = \"file.gguf\"\nmax_batch_size = 8\ngrpc_port = 1000\n"
      "threads = 3   # trailing comment\n";
  in.env["STRATA_CONFIG"] = "s.conf";
  in.env["STRATA_MAX_BATCH_SIZE"] = "16";
  in.env["STRATA_GRPC_PORT"] = "2000";
  in.args = {"--grpc-port=3000"};
  StatusOr<ServerConfig> c = Load(in);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model, "file.gguf");  // file only
  EXPECT_EQ(c->threads, 3);          // file only
  EXPECT_EQ(c->max_batch_size, 16);  // env over file
  EXPECT_EQ(c->grpc_port, 3000);     // flag over env
}

TEST(ServerConfig, ConfigFlagPicksTheFile) {
  Inputs in;
  in.files["a.conf"] = "model = a.gguf\n";
  in.files["b.conf"] = "model = b.gguf\n";
  in.env["STRATA_CONFIG"] = "a.conf";
  in.args = {"--config", "b.conf"};
  StatusOr<ServerConfig> c = Load(in);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model, "b.gguf");
}

TEST(ServerConfig, BooleansStandAloneOrTakeAValue) {
  StatusOr<ServerConfig> c =
      Load({{"--model", "m", "--log-prompts", "--enable-prefix-caching", "false"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->log_prompts);
  EXPECT_FALSE(c->enable_prefix_caching);
  c = Load({{"--model", "m", "--enable-prefix-caching=no", "--log-prompts"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->enable_prefix_caching);
  EXPECT_TRUE(c->log_prompts);
}

TEST(ServerConfig, ErrorsNameTheSourceTheSettingAndTheRange) {
  auto error = [](const Inputs& in) {
    StatusOr<ServerConfig> c = Load(in);
    EXPECT_FALSE(c.ok());
    return c.ok() ? std::string() : c.status().message();
  };
  std::string m = error({{"--model", "m", "--grpc-port", "70000"}});
  EXPECT_NE(m.find("--grpc-port"), std::string::npos) << m;
  EXPECT_NE(m.find("[0, 65535]"), std::string::npos) << m;
  m = error({{"--model", "m"}, {{"STRATA_MAX_BATCH_SIZE", "many"}}, {}});
  EXPECT_NE(m.find("STRATA_MAX_BATCH_SIZE"), std::string::npos) << m;
  EXPECT_NE(m.find("an integer"), std::string::npos) << m;
  m = error({{"--model", "m", "--config", "c"}, {}, {{"c", "model = x\n\nbatching = fast\n"}}});
  EXPECT_NE(m.find("c:3"), std::string::npos) << m;
  EXPECT_NE(m.find("static or adaptive"), std::string::npos) << m;
  m = error({{"--model", "m", "--config", "c"}, {}, {{"c", "max_bach_size = 3\n"}}});
  EXPECT_NE(m.find("unknown setting 'max_bach_size'"), std::string::npos) << m;
  m = error({{"--model", "m", "--config", "c"}, {}, {{"c", "just words\n"}}});
  EXPECT_NE(m.find("name = value"), std::string::npos) << m;
  m = error({{"--model", "m", "--config", "missing"}});
  EXPECT_NE(m.find("missing"), std::string::npos) << m;
  m = error({{"--model", "m", "--max-batch-siz", "3"}});
  EXPECT_NE(m.find("unknown flag --max-batch-siz"), std::string::npos) << m;
  m = error({{"--model", "m", "--target-itl-ms", "nan"}});
  EXPECT_NE(m.find("target_itl_ms"), std::string::npos) << m;
  m = error({{"--model", "m", "--threads"}});
  EXPECT_NE(m.find("needs a value"), std::string::npos) << m;
  m = error({{"m.gguf"}});
  EXPECT_NE(m.find("unexpected argument"), std::string::npos) << m;
}

TEST(ServerConfig, UnknownStrataVariablesAreIgnored) {
  StatusOr<ServerConfig> c = Load({{"--model", "m"}, {{"STRATA_BUILD_DIR", "x"}}, {}});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
}

TEST(ServerConfig, HelpStopsParsing) {
  bool help = false;
  StatusOr<ServerConfig> c = Load({{"--help", "--bogus"}}, &help);
  EXPECT_TRUE(c.ok());
  EXPECT_TRUE(help);
  EXPECT_NE(ServerUsage().find("STRATA_MAX_BATCH_SIZE"), std::string::npos);
}

TEST(ServerConfig, OneNameInFlagsFileAndEnvironment) {
  for (const SettingInfo& s : ListSettings()) {
    std::string flag = "--", env = "STRATA_";
    for (char c : s.name) {
      flag.push_back(c == '_' ? '-' : c);
      env.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
    EXPECT_EQ(s.flag, flag);
    EXPECT_EQ(s.env, env);
  }
}

TEST(ServerConfig, BackendSettingsComeFromEverySourceAndAreChecked) {
  StatusOr<ServerConfig> d = Load({{"--model", "m.gguf"}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->backend, "auto");
  EXPECT_EQ(d->device, 0);
  EXPECT_DOUBLE_EQ(d->gpu_memory_fraction, 0.9);
  EXPECT_TRUE(d->cuda_graphs);
  EXPECT_EQ(d->cuda_f16_weights, "auto");
  EXPECT_EQ(d->kv_budget_bytes, 0);  // the backend's own default

  Inputs in(
      {"--model", "m.gguf", "--gpu-memory-fraction", "0.5", "--cuda-graphs", "false",
       "--cuda-f16-weights", "off"},
      {{"STRATA_BACKEND", "cuda"}, {"STRATA_DEVICE", "1"}, {"STRATA_CUDA_F16_WEIGHTS", "on"}});
  StatusOr<ServerConfig> c = Load(in);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->backend, "cuda");
  EXPECT_EQ(c->device, 1);
  EXPECT_DOUBLE_EQ(c->gpu_memory_fraction, 0.5);
  EXPECT_FALSE(c->cuda_graphs);
  EXPECT_EQ(c->cuda_f16_weights, "off");  // the flag beats the environment
  Inputs env_only({"--model", "m.gguf"}, {{"STRATA_CUDA_F16_WEIGHTS", "on"}});
  StatusOr<ServerConfig> e = Load(env_only);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->cuda_f16_weights, "on");

  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--backend", "gpu"},
                                                        {"--device", "-1"},
                                                        {"--gpu-memory-fraction", "0"},
                                                        {"--gpu-memory-fraction", "1.5"},
                                                        {"--cuda-graphs", "sometimes"},
                                                        {"--cuda-f16-weights", "true"},
                                                        {"--cuda-f16-weights", "yes"}}) {
    StatusOr<ServerConfig> bad = Load({{"--model", "m.gguf", flag, value}});
    ASSERT_FALSE(bad.ok()) << flag << " " << value;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(flag), std::string::npos) << bad.status().message();
  }
}

// docs/configuration.md documents every setting (its flag, file name and variable).
TEST(ServerConfig, TheDocsListEverySetting) {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/docs/configuration.md");
  ASSERT_TRUE(in) << "docs/configuration.md is missing";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  for (const SettingInfo& s : ListSettings()) {
    EXPECT_NE(doc.find("`" + s.flag + "`"), std::string::npos) << s.flag;
    EXPECT_NE(doc.find("`" + s.name + "`"), std::string::npos) << s.name;
    EXPECT_NE(doc.find("`" + s.env + "`"), std::string::npos) << s.env;
  }
}

}  // namespace
}  // namespace strata::server
