// A minimal blocking HTTP/1.1 client on plain sockets, enough for an OpenAI-style server: one
// connection per request ("Connection: close"), GET for facts, POST with the response body
// streamed to a callback as it arrives (de-chunked).
//
// Errors: kInvalidArgument for a bad URL; kUnavailable when the connection cannot be made;
// kDeadlineExceeded when a send or receive waits longer than the timeout; kDataLoss for a
// malformed response; kInternal for other socket failures.
//
// Thread rules: the functions are thread-safe (no shared state); each call blocks its thread.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "strata/common/status.h"

namespace strata::bench {

// "http://HOST[:PORT][/PREFIX]" (port 80 by default; a trailing "/" of the prefix dropped).
struct HttpUrl {
  std::string host;
  int port = 80;
  std::string path_prefix;  // "" or "/something"
};

StatusOr<HttpUrl> ParseHttpUrl(std::string_view url);

struct HttpResponse {
  int status_code = 0;
  std::string body;
};

// GET url.path_prefix + path; the whole response.
StatusOr<HttpResponse> HttpGet(const HttpUrl& url, std::string_view path, double timeout_s);

// POST `body` (application/json) to url.path_prefix + path. Once the head is read, `on_status`
// gets the status code; then `on_body` gets each piece of the decoded body as it arrives; either
// may return an error to stop reading (that error is returned). `timeout_s` bounds each wait
// for the socket, not the whole exchange.
Status HttpPostStream(const HttpUrl& url, std::string_view path, std::string_view body,
                      double timeout_s, const std::function<Status(int)>& on_status,
                      const std::function<Status(std::string_view)>& on_body);

}  // namespace strata::bench
