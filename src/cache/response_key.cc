#include "strata/cache/response_key.h"

#include <openssl/evp.h>

#include <cstring>
#include <memory>

#include "strata/common/check.h"

namespace strata::cache {
namespace {

// A canonical byte string: fixed-width little-endian fields, lengths before variable parts.
class Canonical {
 public:
  template <typename T>
  void Put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.append(b, sizeof(T));
  }
  void Put(std::string_view s) {
    Put<uint64_t>(s.size());
    out_.append(s);
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

}  // namespace

std::string Sha256Hex(std::span<const uint8_t> bytes) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx.get(), digest, &len) == 1;
  STRATA_CHECK(ok);  // only allocation failure can make OpenSSL's SHA-256 fail
  return Hex(digest, len);
}

namespace {

// Every output-affecting sampling field (those a greedy request cannot be affected by left out).
void PutParams(const sampling::SamplingParams& p, Canonical& c) {
  const bool greedy = p.temperature == 0.0f;
  c.Put<float>(p.temperature);
  c.Put<int32_t>(greedy ? 0 : p.top_k);
  c.Put<float>(greedy ? 1.0f : p.top_p);
  c.Put<float>(greedy ? 0.0f : p.min_p);
  c.Put<float>(p.repetition_penalty);
  c.Put<float>(p.presence_penalty);
  c.Put<float>(p.frequency_penalty);
  c.Put<int32_t>(p.penalty_last_n);
  c.Put<uint64_t>(greedy ? 0 : p.seed);
  c.Put<uint64_t>(p.stop.size());
  for (const std::string& s : p.stop) c.Put(std::string_view(s));
  c.Put<uint64_t>(p.stop_token_ids.size());
  for (int32_t t : p.stop_token_ids) c.Put<int32_t>(t);
  c.Put<uint8_t>(p.ignore_eos ? 1 : 0);
  c.Put<int32_t>(p.max_tokens);
  c.Put<int32_t>(p.logprobs);
}

std::string Digest(const Canonical& c) {
  const std::string& bytes = c.str();
  return Sha256Hex(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

}  // namespace

std::string ResponseKey(const ResponseKeyInput& in) {
  STRATA_CHECK(in.params != nullptr);
  Canonical c;
  c.Put(std::string_view("strata response v1"));
  c.Put(in.model_digest);
  c.Put<uint64_t>(in.epoch);
  c.Put(in.cache_namespace);
  c.Put<uint64_t>(in.prompt.size());
  for (int32_t t : in.prompt) c.Put<int32_t>(t);
  PutParams(*in.params, c);
  return "resp:v1:" + Digest(c);
}

std::string SemanticContextKey(const ResponseKeyInput& in, std::string_view context) {
  STRATA_CHECK(in.params != nullptr);
  Canonical c;
  c.Put(std::string_view("strata semantic v1"));
  c.Put(in.model_digest);
  c.Put<uint64_t>(in.epoch);
  c.Put(in.cache_namespace);
  c.Put(context);
  PutParams(*in.params, c);
  return "sem:v1:" + Digest(c);
}

}  // namespace strata::cache
