// What an entry of the response cache is labelled with when it is stored (its namespace and the
// request's cache tags), and what an operator's invalidation selects by.
#pragma once

#include <string>
#include <vector>

namespace strata::cache {

// Bounds the request translator enforces on a request's tags.
inline constexpr size_t kMaxCacheTags = 16;
inline constexpr size_t kMaxCacheTagBytes = 128;

struct EntryLabels {
  std::string cache_namespace;    // "" is the default namespace
  std::vector<std::string> tags;  // the request's cache tags (any UTF-8, each non-empty)
};

struct CacheSelector {
  enum class Kind { kTag, kNamespace, kAll };
  Kind kind = Kind::kAll;
  std::string value;  // the tag or the namespace; empty for kAll

  static CacheSelector Tag(std::string tag) { return {Kind::kTag, std::move(tag)}; }
  static CacheSelector Namespace(std::string ns) { return {Kind::kNamespace, std::move(ns)}; }
  static CacheSelector All() { return {Kind::kAll, {}}; }

  // True when an entry with `labels` is selected.
  bool Selects(const EntryLabels& labels) const;
};

}  // namespace strata::cache
