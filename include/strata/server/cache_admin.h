// CacheAdmin: the operator's controls over the response and semantic caches, shared by the
// gRPC CacheAdmin service and the HTTP /admin/cache/* routes: invalidate by tag, namespace or
// all, and bump the cache epoch. Every call is authorized by the admin token first
// (--admin-token-file); each change is logged (who asked is the transport's to add).
//
// Thread rules: every method from any thread; the CachingSubmitter attached must outlive every
// call (the server stops its transports before it destroys the cache).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "strata/cache/cache_selector.h"
#include "strata/cache/caching_submitter.h"
#include "strata/common/status.h"

namespace strata::server {

class CacheAdmin {
 public:
  // `token`: what callers must present; not empty. `cache_enabled`: whether the server runs a
  // response cache (off: every call FAILED_PRECONDITION); until Attach, calls are UNAVAILABLE
  // (the model is loading).
  CacheAdmin(std::string token, bool cache_enabled);

  // The cache to act on, once the model is loaded. Call once.
  void Attach(cache::CachingSubmitter* cache) { cache_.store(cache); }

  // OK when `authorization` is "Bearer <token>" (compared in constant time), else
  // UNAUTHENTICATED.
  Status Authorize(std::string_view authorization) const;

  // INVALID_ARGUMENT for a selector value that is too long or not UTF-8; otherwise
  // CachingSubmitter::Invalidate's result.
  StatusOr<int64_t> Invalidate(const cache::CacheSelector& selector);
  StatusOr<uint64_t> BumpEpoch();

 private:
  Status Available() const;

  std::string token_;
  bool cache_enabled_;
  std::atomic<cache::CachingSubmitter*> cache_{nullptr};
};

// The token in an admin token file's text: its first line without surrounding blanks;
// INVALID_ARGUMENT when that is empty or shorter than 16 bytes.
StatusOr<std::string> ParseAdminToken(std::string_view file_text);

}  // namespace strata::server
