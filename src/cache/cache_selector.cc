#include "strata/cache/cache_selector.h"

#include <algorithm>

namespace strata::cache {

bool CacheSelector::Selects(const EntryLabels& labels) const {
  switch (kind) {
    case Kind::kTag:
      return std::find(labels.tags.begin(), labels.tags.end(), value) != labels.tags.end();
    case Kind::kNamespace:
      return labels.cache_namespace == value;
    case Kind::kAll:
      return true;
  }
  return false;
}

}  // namespace strata::cache
