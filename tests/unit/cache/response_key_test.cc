#include "strata/cache/response_key.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace strata::cache {
namespace {

struct KeyFixture {
  std::string digest = "d1";
  uint64_t epoch = 0;
  std::string ns;
  std::vector<int32_t> prompt = {1, 2, 3};
  sampling::SamplingParams params;

  std::string Key() const { return ResponseKey({digest, epoch, ns, prompt, &params}); }
};

TEST(ResponseKey, IsStableAndShaped) {
  KeyFixture f;
  EXPECT_EQ(f.Key(), f.Key());
  EXPECT_EQ(f.Key().rfind("resp:v1:", 0), 0u);
  EXPECT_EQ(f.Key().size(), 8u + 64u);
}

TEST(ResponseKey, EveryOutputAffectingFieldChangesIt) {
  const std::vector<std::function<void(KeyFixture&)>> changes = {
      [](KeyFixture& f) { f.digest = "d2"; },
      [](KeyFixture& f) { f.epoch = 1; },
      [](KeyFixture& f) { f.ns = "tenant-a"; },
      [](KeyFixture& f) { f.prompt.push_back(4); },
      [](KeyFixture& f) {
        f.prompt = {1, 2, 4};
      },
      [](KeyFixture& f) { f.params.temperature = 0.5f; },
      [](KeyFixture& f) { f.params.top_k = 5; },
      [](KeyFixture& f) { f.params.top_p = 0.9f; },
      [](KeyFixture& f) { f.params.min_p = 0.1f; },
      [](KeyFixture& f) { f.params.repetition_penalty = 1.1f; },
      [](KeyFixture& f) { f.params.presence_penalty = 0.5f; },
      [](KeyFixture& f) { f.params.frequency_penalty = 0.5f; },
      [](KeyFixture& f) { f.params.penalty_last_n = 32; },
      [](KeyFixture& f) { f.params.seed = 7; },
      [](KeyFixture& f) { f.params.stop = {"\n"}; },
      [](KeyFixture& f) { f.params.stop_token_ids = {3}; },
      [](KeyFixture& f) { f.params.ignore_eos = true; },
      [](KeyFixture& f) { f.params.max_tokens = 17; },
      [](KeyFixture& f) { f.params.logprobs = 2; },
  };
  const std::string base = KeyFixture().Key();
  for (size_t i = 0; i < changes.size(); ++i) {
    KeyFixture f;
    changes[i](f);
    EXPECT_NE(f.Key(), base) << "change " << i;
  }
  // Stop strings are length-prefixed: {"ab"} and {"a", "b"} differ.
  KeyFixture one;
  one.params.stop = {"ab"};
  KeyFixture two;
  two.params.stop = {"a", "b"};
  EXPECT_NE(one.Key(), two.Key());
}

TEST(ResponseKey, GreedyRequestsIgnoreWhatCannotChangeTheirOutput) {
  KeyFixture a;
  a.params.temperature = 0.0f;
  KeyFixture b = a;
  b.params.top_k = 3;
  b.params.top_p = 0.5f;
  b.params.min_p = 0.2f;
  b.params.seed = 12345;
  EXPECT_EQ(a.Key(), b.Key());
  b.params.max_tokens = 3;
  EXPECT_NE(a.Key(), b.Key());
}

TEST(ResponseKey, SamplingParamsHaveNoFieldTheKeyMisses) {
  // A tripwire: a field added to SamplingParams changes its size; add it to ResponseKey (and
  // to EveryOutputAffectingFieldChangesIt), then update this size.
  EXPECT_EQ(sizeof(sampling::SamplingParams), 104u);
}

TEST(Sha256Hex, MatchesTheStandardVector) {
  const std::string abc = "abc";
  EXPECT_EQ(Sha256Hex(std::span(reinterpret_cast<const uint8_t*>(abc.data()), abc.size())),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace strata::cache
