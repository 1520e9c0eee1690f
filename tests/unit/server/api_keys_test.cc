#include "strata/server/api_keys.h"

#include <gtest/gtest.h>

#include <span>
#include <string>

#include "strata/cache/response_key.h"
#include "strata/metrics/server_metrics.h"

namespace strata::server {
namespace {

std::string HashOf(const std::string& key) {
  return cache::Sha256Hex(std::span(reinterpret_cast<const uint8_t*>(key.data()), key.size()));
}

double Sample(const std::string& text, const std::string& key) {
  const size_t at = text.find(key + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + key.size() + 1));
}

TEST(ParseApiKeys, ReadsNamesHashesAndLimitsAndNamesTheBadLine) {
  const std::string a = HashOf("key-a"), b = HashOf("key-b");
  auto entries = ParseApiKeys("# team keys\n\nalice " + a + " rpm=60 tpm=1000 streams=2\r\n" +
                              "bob\t" + b + "   # no limits\n");
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].name, "alice");
  EXPECT_EQ((*entries)[0].sha256_hex, a);
  EXPECT_EQ((*entries)[0].limits.requests_per_minute, 60);
  EXPECT_EQ((*entries)[0].limits.tokens_per_minute, 1000);
  EXPECT_EQ((*entries)[0].limits.max_streams, 2);
  EXPECT_EQ((*entries)[1].limits.requests_per_minute, 0);

  const struct {
    std::string text;
    std::string want;
  } bad[] = {
      {"alice\n", "line 1: expected 'NAME SHA256HEX"},
      {"al/ice " + a + "\n", "line 1: the name"},
      {"alice secret-key-in-clear\n", "line 1: the key's SHA-256 must be 64 hex digits"},
      {"alice " + a + " rpm=-1\n", "line 1: 'rpm=-1' is not"},
      {"alice " + a + " burst=3\n", "line 1: 'burst=3' is not"},
      {"alice " + a + "\nalice " + b + "\n", "line 2: the name 'alice' is given twice"},
      {"alice " + a + "\nbob " + a + "\n", "line 2: this key's hash is given twice"},
  };
  for (const auto& c : bad) {
    auto parsed = ParseApiKeys(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_NE(parsed.status().message().find(c.want), std::string::npos)
        << parsed.status().message();
  }
}

class ApiKeysTest : public ::testing::Test {
 protected:
  ApiKeys Make(ApiKeyLimits limits) {
    return ApiKeys({{"alice", HashOf("alice-secret"), limits}, {"bob", HashOf("bob-secret"), {}}},
                   &metrics_, [this] { return now_; });
  }
  metrics::ServerMetrics metrics_{metrics::BuildInfo{}};
  double now_ = 1000;
};

TEST_F(ApiKeysTest, OnlyAKnownKeyAsBearerIsAdmittedAndRefusalsSayNothingElse) {
  ApiKeys keys = Make({});
  const std::string refusals[] = {"",
                                  "alice-secret",
                                  "Bearer ",
                                  "Bearer alice-secre",
                                  "bearer alice-secret",
                                  "Basic YWxpY2U6eA==",
                                  "Bearer alice-secret "};
  std::string message;
  for (const std::string& header : refusals) {
    KeyAdmission a = keys.Admit(header, true);
    EXPECT_EQ(a.status.code(), StatusCode::kUnauthenticated) << header;
    EXPECT_EQ(a.lease, nullptr);
    if (!message.empty()) {
      EXPECT_EQ(a.status.message(), message);  // one message for all
    }
    message = a.status.message();
  }
  EXPECT_EQ(message.find("alice"), std::string::npos);
  KeyAdmission ok = keys.Admit("Bearer bob-secret", true);
  ASSERT_TRUE(ok.status.ok()) << ok.status.ToString();
  EXPECT_EQ(ok.lease->key_name(), "bob");
  ok.lease->End(7, 3);
  const std::string text = metrics_.Serialize();
  EXPECT_EQ(Sample(text, "strata_api_key_requests_total{key=\"bob\"}"), 1);
  EXPECT_EQ(Sample(text, "strata_api_key_tokens_total{key=\"bob\",kind=\"prompt\"}"), 7);
  EXPECT_EQ(Sample(text, "strata_api_key_tokens_total{key=\"bob\",kind=\"completion\"}"), 3);
  EXPECT_EQ(text.find("secret"), std::string::npos);
}

TEST_F(ApiKeysTest, RequestsPerMinuteRefillEvenlyAndRefusalsSayWhenToRetry) {
  ApiKeys keys = Make({/*requests_per_minute=*/2, 0, 0});
  EXPECT_TRUE(keys.Admit("Bearer alice-secret", false).status.ok());
  EXPECT_TRUE(keys.Admit("Bearer alice-secret", false).status.ok());
  KeyAdmission refused = keys.Admit("Bearer alice-secret", false);
  EXPECT_EQ(refused.status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.retry_after_seconds, 30);  // one call back every 30 s
  EXPECT_NE(refused.status.message().find("2 calls per minute"), std::string::npos);
  EXPECT_TRUE(keys.Admit("Bearer bob-secret", false).status.ok());  // another key: its own
  now_ += 29;
  EXPECT_FALSE(keys.Admit("Bearer alice-secret", false).status.ok());
  now_ += 1.5;
  EXPECT_TRUE(keys.Admit("Bearer alice-secret", false).status.ok());
  EXPECT_EQ(Sample(metrics_.Serialize(),
                   "strata_api_key_rate_limited_total{key=\"alice\",limit=\"requests\"}"),
            2);
}

TEST_F(ApiKeysTest, TokensAreChargedWhenACallEndsAndADebtHoldsTheNextGenerationBack) {
  ApiKeys keys = Make({0, /*tokens_per_minute=*/600, 0});
  KeyAdmission first = keys.Admit("Bearer alice-secret", true);
  ASSERT_TRUE(first.status.ok());
  first.lease->End(500, 200);  // 100 tokens in debt
  KeyAdmission refused = keys.Admit("Bearer alice-secret", true);
  EXPECT_EQ(refused.status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.retry_after_seconds, 11);  // (100 + 1) tokens at 10 per second
  EXPECT_TRUE(keys.Admit("Bearer alice-secret", false).status.ok());  // not a generation
  now_ += 11;
  EXPECT_TRUE(keys.Admit("Bearer alice-secret", true).status.ok());
}

TEST_F(ApiKeysTest, StreamsAreHeldByTheLeaseUntilTheCallEnds) {
  ApiKeys keys = Make({0, 0, /*max_streams=*/1});
  KeyAdmission first = keys.Admit("Bearer alice-secret", true);
  ASSERT_TRUE(first.status.ok());
  KeyAdmission second = keys.Admit("Bearer alice-secret", true);
  EXPECT_EQ(second.status.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(second.status.message().find("1 calls at once"), std::string::npos);
  EXPECT_TRUE(keys.Admit("Bearer alice-secret", false).status.ok());  // tokenize etc.: no slot
  first.lease->End(3, 4);  // the slot is free once the call ends, while the lease lives on
  KeyAdmission next = keys.Admit("Bearer alice-secret", true);
  ASSERT_TRUE(next.status.ok());
  first.lease.reset();  // and released once only
  EXPECT_EQ(keys.Admit("Bearer alice-secret", true).status.code(), StatusCode::kResourceExhausted);
  next.lease.reset();  // a lease dropped without End frees its slot too
  EXPECT_TRUE(keys.Admit("Bearer alice-secret", true).status.ok());
}

TEST_F(ApiKeysTest, AReloadAddsChangesAndRevokesKeysByNameAndKeepsCallsInFlight) {
  ApiKeys keys = Make({/*rpm=*/2, 0, /*max_streams=*/1});
  KeyAdmission alice = keys.Admit("Bearer alice-secret", true);  // 1 of 2 calls, its 1 stream
  ASSERT_TRUE(alice.status.ok());
  KeyAdmission bob = keys.Admit("Bearer bob-secret", true);
  ASSERT_TRUE(bob.status.ok());

  // alice: same key, more streams; bob: gone; carol: new.
  const ApiKeys::ReloadResult r = keys.Reload(
      {{"alice", HashOf("alice-secret"), {2, 0, 2}}, {"carol", HashOf("carol-secret"), {}}});
  EXPECT_EQ(r.added, 1u);
  EXPECT_EQ(r.changed, 1u);
  EXPECT_EQ(r.removed, 1u);
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys.Admit("Bearer bob-secret", false).status.code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(keys.Admit("Bearer carol-secret", true).status.ok());
  // alice kept her bucket (one call left of 2) and her stream in flight (1 of 2 now).
  KeyAdmission again = keys.Admit("Bearer alice-secret", true);
  ASSERT_TRUE(again.status.ok());
  EXPECT_EQ(keys.Admit("Bearer alice-secret", false).status.code(), StatusCode::kResourceExhausted);
  // bob's call in flight ends normally and is charged to bob.
  EXPECT_EQ(bob.lease->key_name(), "bob");
  bob.lease->End(1, 1);

  // A new hash for alice: the old key no longer works; reloading the same file changes nothing.
  const std::vector<ApiKeyEntry> rotated = {{"alice", HashOf("alice-new"), {2, 0, 2}},
                                            {"carol", HashOf("carol-secret"), {}}};
  keys.Reload(rotated);
  EXPECT_EQ(keys.Admit("Bearer alice-secret", false).status.code(), StatusCode::kUnauthenticated);
  const ApiKeys::ReloadResult same = keys.Reload(rotated);
  EXPECT_EQ(same.added + same.changed + same.removed, 0u);
  // bob comes back: admitted again, with full buckets.
  keys.Reload({{"bob", HashOf("bob-secret"), {}}});
  EXPECT_TRUE(keys.Admit("Bearer bob-secret", false).status.ok());
  EXPECT_EQ(keys.Admit("Bearer carol-secret", false).status.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(keys.size(), 1u);
}

}  // namespace
}  // namespace strata::server
