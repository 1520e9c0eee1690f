#include "bench/load/http_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "unit/bench_load/http_stream_fixture.h"

namespace strata::bench {
namespace {

// Serves one connection on a loopback port: reads the request head (and body), then writes
// `response` in pieces of `piece` bytes with a short pause between them, then closes.
class OneShotServer {
 public:
  OneShotServer(std::string response, size_t piece) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(listen_fd_, 1);
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, response = std::move(response), piece] {
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      char buffer[4096];
      while (request_.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = read(fd, buffer, sizeof(buffer));
        if (n <= 0) break;
        request_.append(buffer, static_cast<size_t>(n));
      }
      for (size_t at = 0; at < response.size(); at += piece) {
        const std::string part = response.substr(at, piece);
        if (write(fd, part.data(), part.size()) < 0) break;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      close(fd);
    });
  }
  ~OneShotServer() {
    thread_.join();
    close(listen_fd_);
  }
  int port() const { return port_; }
  const std::string& request() const { return request_; }  // after the exchange

 private:
  int listen_fd_ = -1;
  int port_ = 0;
  std::string request_;
  std::thread thread_;
};

TEST(ParseHttpUrl, ReadsHostPortAndPrefix) {
  auto u = ParseHttpUrl("http://127.0.0.1:8080");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->path_prefix, "");
  u = ParseHttpUrl("http://example:81/api/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 81);
  EXPECT_EQ(u->path_prefix, "/api");
  u = ParseHttpUrl("http://[::1]:9");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(ParseHttpUrl("https://x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseHttpUrl("http://x:99999").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseHttpUrl("http://:80").status().code(), StatusCode::kInvalidArgument);
}

TEST(HttpPostStream, StreamsADribbledChunkedResponse) {
  OneShotServer server(testing::LlamaServerResponse(), /*piece=*/7);
  const HttpUrl url{"127.0.0.1", server.port(), ""};
  int status = 0;
  std::string body;
  int pieces = 0;
  const Status s = HttpPostStream(
      url, "/v1/completions", "{\"x\":1}", 5.0,
      [&](int code) {
        status = code;
        return OkStatus();
      },
      [&](std::string_view piece) {
        body.append(piece);
        ++pieces;
        return OkStatus();
      });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(status, 200);
  EXPECT_GT(pieces, 10);  // delivered as it came, not at the end
  EXPECT_NE(body.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(body.find("\r\n"), std::string::npos);  // de-chunked
  EXPECT_EQ(server.request().rfind("POST /v1/completions HTTP/1.1\r\n", 0), 0u);
}

TEST(HttpGet, ReportsACutShortBodyAndARefusedConnection) {
  {
    OneShotServer server("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", 64);
    const auto r = HttpGet(HttpUrl{"127.0.0.1", server.port(), ""}, "/props", 5.0);
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  }
  int port = 0;
  {
    OneShotServer server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", 64);
    port = server.port();
    const auto r = HttpGet(HttpUrl{"127.0.0.1", port, ""}, "/props", 5.0);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->body, "{}");
  }
  // The server is gone: nothing listens on its port any more.
  EXPECT_EQ(HttpGet(HttpUrl{"127.0.0.1", port, ""}, "/props", 5.0).status().code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace strata::bench
