#include "admin_routes.h"

#include <nlohmann/json.hpp>
#include <string>

#include "strata/server/http/openai_request.h"

namespace strata::server::http {
namespace {

using json = nlohmann::json;

void Reply(httplib::Response& res, const Status& status, const json& body) {
  if (!status.ok()) {
    const ApiError e = ApiErrorFromStatus(status, Endpoint::kCompletions);
    res.status = e.http_status;
    res.set_content(ErrorBody(e), "application/json");
    return;
  }
  res.status = 200;
  res.set_content(body.dump(), "application/json");
}

// The one selector of an invalidate body, or INVALID_ARGUMENT saying what is wrong.
StatusOr<cache::CacheSelector> SelectorOf(const std::string& body) {
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgumentError(
        "the body must be a JSON object: {\"tag\": ...}, {\"namespace\": ...} or {\"all\": true}");
  }
  if (doc.size() != 1) {
    return InvalidArgumentError("the body must hold exactly one of tag, namespace, all");
  }
  // An iterator into `doc`, not items(): a structured binding to *items().begin() would
  // refer into a proxy that dies with the statement.
  const json::const_iterator first = doc.cbegin();
  const std::string& name = first.key();
  const json& value = first.value();
  if (name == "all") {
    if (!value.is_boolean() || !value.get<bool>()) {
      return InvalidArgumentError("all must be true");
    }
    return cache::CacheSelector::All();
  }
  if (name != "tag" && name != "namespace") {
    return InvalidArgumentError("unknown selector '" + name + "': use tag, namespace or all");
  }
  if (!value.is_string()) return InvalidArgumentError(name + " must be a string");
  return name == "tag" ? cache::CacheSelector::Tag(value.get<std::string>())
                       : cache::CacheSelector::Namespace(value.get<std::string>());
}

}  // namespace

void AdminInvalidate(CacheAdmin* admin, const httplib::Request& req, httplib::Response& res) {
  if (Status auth = admin->Authorize(req.get_header_value("Authorization")); !auth.ok()) {
    return Reply(res, auth, {});
  }
  StatusOr<cache::CacheSelector> selector = SelectorOf(req.body);
  if (!selector.ok()) return Reply(res, selector.status(), {});
  StatusOr<int64_t> removed = admin->Invalidate(*selector);
  if (!removed.ok()) return Reply(res, removed.status(), {});
  Reply(res, OkStatus(), json{{"entries_removed", *removed}});
}

void AdminBumpEpoch(CacheAdmin* admin, const httplib::Request& req, httplib::Response& res) {
  if (Status auth = admin->Authorize(req.get_header_value("Authorization")); !auth.ok()) {
    return Reply(res, auth, {});
  }
  StatusOr<uint64_t> epoch = admin->BumpEpoch();
  if (!epoch.ok()) return Reply(res, epoch.status(), {});
  Reply(res, OkStatus(), json{{"epoch", *epoch}});
}

}  // namespace strata::server::http
