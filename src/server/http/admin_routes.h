// The HTTP API's operator routes over a CacheAdmin (cache_admin.h), with the error shape of the
// OpenAI routes:
//   POST /admin/cache/invalidate  {"tag": "t"} | {"namespace": "n"} | {"all": true}
//                                 -> 200 {"entries_removed": N}
//   POST /admin/cache/epoch       -> 200 {"epoch": N}
// Every call needs "Authorization: Bearer <admin token>" (401 otherwise); 400 for a body that
// is not exactly one selector, or when the response cache is off; 503 when a shared tier
// could not be reached.
#pragma once

#include <httplib.h>

#include "strata/server/cache_admin.h"

namespace strata::server::http {

void AdminInvalidate(CacheAdmin* admin, const httplib::Request& req, httplib::Response& res);
void AdminBumpEpoch(CacheAdmin* admin, const httplib::Request& req, httplib::Response& res);

}  // namespace strata::server::http
