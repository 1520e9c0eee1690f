// BackendSpecFromConfig: the server's backend settings reach the BackendSpec that CreateBackend
// takes, and values only code could produce (LoadServerConfig refuses them) are refused here.
#include "strata/server/serving_model.h"

#include <gtest/gtest.h>

#include <string>

#include "strata/server/server_config.h"

namespace strata::server {
namespace {

TEST(BackendSpecFromConfig, CarriesTheCudaSettings) {
  ServerConfig config;
  config.device = 2;
  config.gpu_memory_fraction = 0.5;
  config.cuda_graphs = false;
  config.kv_budget_bytes = 1 << 20;
  StatusOr<backend::BackendSpec> spec = BackendSpecFromConfig(config);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->device, 2);
  EXPECT_DOUBLE_EQ(spec->gpu_memory_fraction, 0.5);
  EXPECT_FALSE(spec->cuda_graphs);
  EXPECT_EQ(spec->kv_budget_bytes, 1 << 20);
  EXPECT_EQ(spec->cuda_f16_weights, backend::cuda::F16WeightCopies::kAuto);  // the default

  config.cuda_f16_weights = "on";
  spec = BackendSpecFromConfig(config);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->cuda_f16_weights, backend::cuda::F16WeightCopies::kOn);
  config.cuda_f16_weights = "off";
  spec = BackendSpecFromConfig(config);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->cuda_f16_weights, backend::cuda::F16WeightCopies::kOff);
}

TEST(BackendSpecFromConfig, AnUnknownFp16WeightsValueIsInvalidArgumentNamingTheFlag) {
  ServerConfig config;
  config.cuda_f16_weights = "sometimes";
  StatusOr<backend::BackendSpec> spec = BackendSpecFromConfig(config);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find("--cuda-f16-weights"), std::string::npos)
      << spec.status().message();
}

}  // namespace
}  // namespace strata::server
