#include "bench/load/http_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

#include "bench/load/http_response_parser.h"

namespace strata::bench {

namespace {

// Owns a socket descriptor.
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

Status SocketError(const char* what) {
  const int err = errno;
  if (err == EAGAIN || err == EWOULDBLOCK) {
    return Status(StatusCode::kDeadlineExceeded, std::string(what) + ": timed out");
  }
  return InternalError(std::string(what) + ": " + std::strerror(err));
}

StatusOr<int> Connect(const HttpUrl& url, double timeout_s) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(url.port);
  const int rc = getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    return UnavailableError("cannot resolve " + url.host + ": " + gai_strerror(rc));
  }
  std::string last_error = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout_s);
    tv.tv_usec = static_cast<suseconds_t>((timeout_s - std::floor(timeout_s)) * 1e6);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    last_error = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return UnavailableError("cannot connect to " + url.host + ":" + port + ": " + last_error);
  }
  return fd;
}

Status SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SocketError("send");
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

Status Exchange(const HttpUrl& url, const std::string& request, double timeout_s,
                const std::function<Status(int)>& on_status,
                const std::function<Status(std::string_view)>& on_body) {
  STRATA_ASSIGN_OR_RETURN(const int fd, Connect(url, timeout_s));
  Socket socket(fd);
  STRATA_RETURN_IF_ERROR(SendAll(fd, request));
  HttpResponseParser parser;
  std::string body;
  char buffer[64 * 1024];
  bool status_reported = false;
  while (!parser.done()) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SocketError("recv");
    }
    if (n == 0) {
      STRATA_RETURN_IF_ERROR(parser.FinishOnClose());
      break;
    }
    body.clear();
    STRATA_RETURN_IF_ERROR(parser.Feed(std::string_view(buffer, static_cast<size_t>(n)), &body));
    if (parser.headers_done() && !status_reported) {
      status_reported = true;
      STRATA_RETURN_IF_ERROR(on_status(parser.status_code()));
    }
    if (!body.empty()) STRATA_RETURN_IF_ERROR(on_body(body));
  }
  return OkStatus();
}

std::string Head(std::string_view method, const HttpUrl& url, std::string_view path) {
  std::string head = std::string(method) + " " + url.path_prefix + std::string(path) +
                     " HTTP/1.1\r\nHost: " + url.host + ":" + std::to_string(url.port) +
                     "\r\nConnection: close\r\nUser-Agent: strata-bench\r\n";
  return head;
}

}  // namespace

StatusOr<HttpUrl> ParseHttpUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return InvalidArgumentError("URL must start with http://, got '" + std::string(url) + "'");
  }
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  HttpUrl out;
  if (slash != std::string_view::npos) out.path_prefix = std::string(rest.substr(slash));
  while (!out.path_prefix.empty() && out.path_prefix.back() == '/') out.path_prefix.pop_back();
  const size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos) {
    const std::string_view port = authority.substr(colon + 1);
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), out.port);
    if (ec != std::errc() || end != port.data() + port.size() || out.port <= 0 ||
        out.port > 65535) {
      return InvalidArgumentError("bad port in URL '" + std::string(url) + "'");
    }
    authority = authority.substr(0, colon);
  }
  if (authority.size() >= 2 && authority.front() == '[' && authority.back() == ']') {
    authority = authority.substr(1, authority.size() - 2);
  }
  if (authority.empty()) return InvalidArgumentError("no host in URL '" + std::string(url) + "'");
  out.host = std::string(authority);
  return out;
}

StatusOr<HttpResponse> HttpGet(const HttpUrl& url, std::string_view path, double timeout_s) {
  HttpResponse response;
  const std::string request = Head("GET", url, path) + "Accept: application/json\r\n\r\n";
  STRATA_RETURN_IF_ERROR(Exchange(
      url, request, timeout_s,
      [&](int code) {
        response.status_code = code;
        return OkStatus();
      },
      [&](std::string_view piece) {
        response.body.append(piece);
        return OkStatus();
      }));
  return response;
}

Status HttpPostStream(const HttpUrl& url, std::string_view path, std::string_view body,
                      double timeout_s, const std::function<Status(int)>& on_status,
                      const std::function<Status(std::string_view)>& on_body) {
  std::string request = Head("POST", url, path) +
                        "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                        "Content-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n";
  request.append(body);
  return Exchange(url, request, timeout_s, on_status, on_body);
}

}  // namespace strata::bench
