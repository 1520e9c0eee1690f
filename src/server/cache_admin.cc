#include "strata/server/cache_admin.h"

#include <utility>

#include "strata/common/constant_time.h"
#include "strata/common/logging.h"
#include "strata/common/utf8.h"

namespace strata::server {
namespace {

constexpr size_t kMinTokenBytes = 16;
constexpr size_t kMaxSelectorBytes = 1024;

const char* KindName(cache::CacheSelector::Kind kind) {
  switch (kind) {
    case cache::CacheSelector::Kind::kTag:
      return "tag";
    case cache::CacheSelector::Kind::kNamespace:
      return "namespace";
    case cache::CacheSelector::Kind::kAll:
      return "all";
  }
  return "all";
}

}  // namespace

CacheAdmin::CacheAdmin(std::string token, bool cache_enabled)
    : token_(std::move(token)), cache_enabled_(cache_enabled) {}

Status CacheAdmin::Authorize(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer ||
      !ConstantTimeEquals(authorization.substr(kBearer.size()), token_)) {
    return Status(StatusCode::kUnauthenticated,
                  "admin calls need 'authorization: Bearer <token>' with the server's admin token");
  }
  return OkStatus();
}

Status CacheAdmin::Available() const {
  if (!cache_enabled_) {
    return FailedPreconditionError("the response cache is off (--response-cache)");
  }
  if (cache_.load() == nullptr) return UnavailableError("the server is loading");
  return OkStatus();
}

StatusOr<int64_t> CacheAdmin::Invalidate(const cache::CacheSelector& selector) {
  STRATA_RETURN_IF_ERROR(Available());
  if (selector.value.size() > kMaxSelectorBytes) {
    return InvalidArgumentError(std::string(KindName(selector.kind)) + " must be at most " +
                                std::to_string(kMaxSelectorBytes) + " bytes");
  }
  if (!IsValidUtf8(selector.value)) {
    return InvalidArgumentError(std::string(KindName(selector.kind)) + " is not valid UTF-8");
  }
  if (selector.kind == cache::CacheSelector::Kind::kTag && selector.value.empty()) {
    return InvalidArgumentError("tag must not be empty");
  }
  StatusOr<int64_t> removed = cache_.load()->Invalidate(selector);
  Log(removed.ok() ? LogLevel::kInfo : LogLevel::kWarn, "cache invalidated",
      {{"selector", KindName(selector.kind)},
       {"value", selector.value},
       {"entries_removed", removed.ok() ? std::to_string(*removed) : "?"},
       {"error", removed.ok() ? "" : removed.status().message()}});
  return removed;
}

StatusOr<uint64_t> CacheAdmin::BumpEpoch() {
  STRATA_RETURN_IF_ERROR(Available());
  StatusOr<uint64_t> epoch = cache_.load()->BumpEpoch();
  Log(epoch.ok() ? LogLevel::kInfo : LogLevel::kWarn, "cache epoch bumped",
      {{"epoch", epoch.ok() ? std::to_string(*epoch) : "?"},
       {"error", epoch.ok() ? "" : epoch.status().message()}});
  return epoch;
}

StatusOr<std::string> ParseAdminToken(std::string_view text) {
  const size_t eol = text.find_first_of("\r\n");
  std::string_view line = text.substr(0, eol);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  if (line.size() < kMinTokenBytes) {
    return InvalidArgumentError("the admin token file's first line must hold a token of at least " +
                                std::to_string(kMinTokenBytes) + " bytes");
  }
  return std::string(line);
}

}  // namespace strata::server
