#include "strata/server/grpc_listener.h"

#include <gtest/gtest.h>

#include <memory>

#include "strata/common/status.h"

namespace strata::server {
namespace {

TEST(GrpcListenerTest, PortZeroBindsAFreePort) {
  StatusOr<std::unique_ptr<GrpcListener>> bound = GrpcListener::Bind("127.0.0.1", 0);
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_GT((*bound)->port(), 0);
}

TEST(GrpcListenerTest, ATakenPortIsUnavailableNamingTheAddress) {
  StatusOr<std::unique_ptr<GrpcListener>> first = GrpcListener::Bind("127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  const int port = (*first)->port();
  StatusOr<std::unique_ptr<GrpcListener>> second = GrpcListener::Bind("127.0.0.1", port);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << second.status().message();
}

TEST(GrpcListenerTest, StoppingFreesThePort) {
  StatusOr<std::unique_ptr<GrpcListener>> first = GrpcListener::Bind("127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  const int port = (*first)->port();
  (*first)->Stop();
  (*first)->Stop();  // idempotent
  EXPECT_TRUE(GrpcListener::Bind("127.0.0.1", port).ok());
}

TEST(GrpcListenerTest, BracketedIPv6AndNamesResolve) {
  // Loopback names only: whichever families the machine has, one address binds.
  EXPECT_TRUE(GrpcListener::Bind("localhost", 0).ok());
  StatusOr<std::unique_ptr<GrpcListener>> v6 = GrpcListener::Bind("[::1]", 0);
  if (!v6.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << v6.status().ToString();
  EXPECT_GT((*v6)->port(), 0);
}

TEST(GrpcListenerTest, APortOutOfRangeIsInvalid) {
  EXPECT_EQ(GrpcListener::Bind("127.0.0.1", 70000).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::server
