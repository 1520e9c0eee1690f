// The wire form of an InvalidationEvent (include/strata/cache/invalidation_bus.h). A tag or a
// namespace is everything after its "tag:" / "ns:" marker, so it may hold any byte, ':' too.
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "strata/cache/invalidation_bus.h"

namespace strata::cache {
namespace {

constexpr std::string_view kTagMarker = "tag:";
constexpr std::string_view kNamespaceMarker = "ns:";
constexpr std::string_view kAll = "all";
constexpr std::string_view kEpochMarker = "epoch:";

// A decimal uint64: digits only (from_chars takes no sign for an unsigned type), no overflow.
std::optional<uint64_t> ParseEpoch(std::string_view digits) {
  uint64_t value = 0;
  const char* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  if (digits.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

std::string EncodeInvalidationEvent(const InvalidationEvent& event) {
  if (event.kind == InvalidationEvent::Kind::kEpoch) {
    return std::string(kEpochMarker) + std::to_string(event.epoch);
  }
  switch (event.selector.kind) {
    case CacheSelector::Kind::kTag:
      return std::string(kTagMarker) + event.selector.value;
    case CacheSelector::Kind::kNamespace:
      return std::string(kNamespaceMarker) + event.selector.value;
    case CacheSelector::Kind::kAll:
      break;
  }
  return std::string(kAll);
}

StatusOr<InvalidationEvent> DecodeInvalidationEvent(std::string_view text) {
  InvalidationEvent event;
  if (text.starts_with(kTagMarker)) {
    text.remove_prefix(kTagMarker.size());
    if (text.empty()) return InvalidArgumentError("invalidation event \"tag:\" names no tag");
    event.selector = CacheSelector::Tag(std::string(text));
    return event;
  }
  if (text.starts_with(kNamespaceMarker)) {  // "ns:" alone is the default namespace
    text.remove_prefix(kNamespaceMarker.size());
    event.selector = CacheSelector::Namespace(std::string(text));
    return event;
  }
  if (text == kAll) {
    event.selector = CacheSelector::All();
    return event;
  }
  if (text.starts_with(kEpochMarker)) {
    const std::optional<uint64_t> epoch = ParseEpoch(text.substr(kEpochMarker.size()));
    if (!epoch.has_value()) {
      return InvalidArgumentError("invalidation event \"" + std::string(text) +
                                  "\" does not carry a decimal epoch below 2^64");
    }
    event.kind = InvalidationEvent::Kind::kEpoch;
    event.epoch = *epoch;
    return event;
  }
  return InvalidArgumentError(
      "not an invalidation event (expected \"tag:<t>\", \"ns:<n>\", \"all\" or \"epoch:<n>\"): " +
      std::to_string(text.size()) + " bytes");
}

}  // namespace strata::cache
