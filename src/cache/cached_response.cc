#include "strata/cache/cached_response.h"

#include <cstring>

namespace strata::cache {
namespace {

constexpr uint32_t kMagic = 0x31435253;  // "SRC1" little-endian
constexpr uint32_t kVersion = 2;         // 2: the entry's labels (namespace, tags)
constexpr size_t kMaxNamespaceBytes = 1024;

class Writer {
 public:
  void U32(uint32_t v) { Raw(&v, sizeof(v)); }
  void I32(int32_t v) { Raw(&v, sizeof(v)); }
  void I64(int64_t v) { Raw(&v, sizeof(v)); }
  void F32(float v) { Raw(&v, sizeof(v)); }
  void Bytes(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  std::string Take() { return std::move(out_); }

 private:
  // The encoding is little-endian; so is every machine Strata builds for (x86-64, aarch64).
  void Raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool U32(uint32_t* v) { return Raw(v, sizeof(*v)); }
  bool I32(int32_t* v) { return Raw(v, sizeof(*v)); }
  bool I64(int64_t* v) { return Raw(v, sizeof(*v)); }
  bool F32(float* v) { return Raw(v, sizeof(*v)); }
  bool Bytes(size_t max, std::string* s) {
    uint32_t n = 0;
    if (!U32(&n) || n > max || n > in_.size() - pos_) return false;
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  bool Raw(void* p, size_t n) {
    if (in_.size() - pos_ < n) return false;
    std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  std::string_view in_;
  size_t pos_ = 0;
};

void WriteLogprob(Writer& w, const sampling::TokenLogprob& t) {
  w.I32(t.token);
  w.F32(t.logprob);
}

bool ReadLogprob(Reader& r, sampling::TokenLogprob* t) {
  return r.I32(&t->token) && r.F32(&t->logprob);
}

Status Corrupt(const std::string& what) {
  return DataLossError("cached response is malformed: " + what);
}

}  // namespace

std::string EncodeCachedResponse(const CachedResponse& response) {
  Writer w;
  w.U32(kMagic);
  w.U32(kVersion);
  w.I32(static_cast<int32_t>(response.finish_reason));
  w.I64(response.prompt_tokens);
  w.U32(static_cast<uint32_t>(response.token_ids.size()));
  for (int32_t id : response.token_ids) w.I32(id);
  w.Bytes(response.text);
  w.U32(static_cast<uint32_t>(response.logprobs.size()));
  for (const sampling::SampleLogprobs& lp : response.logprobs) {
    WriteLogprob(w, lp.chosen);
    w.U32(static_cast<uint32_t>(lp.top.size()));
    for (const sampling::TokenLogprob& t : lp.top) WriteLogprob(w, t);
  }
  w.Bytes(response.labels.cache_namespace);
  w.U32(static_cast<uint32_t>(response.labels.tags.size()));
  for (const std::string& tag : response.labels.tags) w.Bytes(tag);
  return w.Take();
}

StatusOr<CachedResponse> DecodeCachedResponse(std::string_view bytes) {
  Reader r(bytes);
  uint32_t magic = 0;
  uint32_t version = 0;
  if (!r.U32(&magic) || magic != kMagic) return Corrupt("bad magic");
  if (!r.U32(&version) || version != kVersion) return Corrupt("unknown version");
  CachedResponse out;
  int32_t finish = 0;
  if (!r.I32(&finish)) return Corrupt("truncated finish reason");
  if (finish != static_cast<int32_t>(sampling::FinishReason::kStop) &&
      finish != static_cast<int32_t>(sampling::FinishReason::kLength)) {
    return Corrupt("finish reason " + std::to_string(finish));
  }
  out.finish_reason = static_cast<sampling::FinishReason>(finish);
  if (!r.I64(&out.prompt_tokens) || out.prompt_tokens < 0) return Corrupt("prompt tokens");
  uint32_t n = 0;
  if (!r.U32(&n) || n > kMaxCachedTokens) return Corrupt("token count");
  out.token_ids.resize(n);
  for (int32_t& id : out.token_ids) {
    if (!r.I32(&id) || id < 0) return Corrupt("token id");
  }
  if (!r.Bytes(kMaxCachedTextBytes, &out.text)) return Corrupt("text");
  uint32_t n_lp = 0;
  if (!r.U32(&n_lp) || (n_lp != 0 && n_lp != n)) return Corrupt("logprob count");
  out.logprobs.resize(n_lp);
  for (sampling::SampleLogprobs& lp : out.logprobs) {
    uint32_t top = 0;
    if (!ReadLogprob(r, &lp.chosen) || !r.U32(&top) || top > kMaxCachedTopLogprobs) {
      return Corrupt("logprobs");
    }
    lp.top.resize(top);
    for (sampling::TokenLogprob& t : lp.top) {
      if (!ReadLogprob(r, &t)) return Corrupt("top logprobs");
    }
  }
  if (!r.Bytes(kMaxNamespaceBytes, &out.labels.cache_namespace)) return Corrupt("namespace");
  uint32_t n_tags = 0;
  if (!r.U32(&n_tags) || n_tags > kMaxCacheTags) return Corrupt("tag count");
  out.labels.tags.resize(n_tags);
  for (std::string& tag : out.labels.tags) {
    if (!r.Bytes(kMaxCacheTagBytes, &tag) || tag.empty()) return Corrupt("tag");
  }
  if (!r.done()) return Corrupt("trailing bytes");
  return out;
}

size_t CachedResponseBytes(const CachedResponse& response) {
  size_t bytes = sizeof(CachedResponse) + response.token_ids.size() * sizeof(int32_t) +
                 response.text.size() + response.labels.cache_namespace.size();
  for (const std::string& tag : response.labels.tags) bytes += sizeof(tag) + tag.size();
  for (const sampling::SampleLogprobs& lp : response.logprobs) {
    bytes += sizeof(lp) + lp.top.size() * sizeof(sampling::TokenLogprob);
  }
  return bytes;
}

}  // namespace strata::cache
