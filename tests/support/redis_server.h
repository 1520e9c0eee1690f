// A real redis-server for a test, on a free loopback port, without persistence; stopped (or
// killed and restarted) by the test. Tests that need Redis start one of these: nothing is
// mocked.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace strata::test {

class RedisServer {
 public:
  RedisServer() : port_(FreePort()) { Start(); }
  ~RedisServer() { Stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  bool running() const { return pid_ > 0; }

  // SIGKILL: the server disappears mid-run, as a crash would make it.
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  // Starts it again on the same port; true once it accepts connections.
  bool Start() {
    const std::string port = std::to_string(port_);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int null_fd = ::open("/dev/null", O_WRONLY);  // its banner and warnings
      if (null_fd >= 0) {
        ::dup2(null_fd, STDOUT_FILENO);
        ::dup2(null_fd, STDERR_FILENO);
      }
      const char* bin = std::getenv("STRATA_REDIS_SERVER");
      const char* exe = bin != nullptr ? bin : "redis-server";
      ::execlp(exe, exe, "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning",
               static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 500; ++i) {  // up to 5 s
      if (Accepts()) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: no binary, port taken
        pid_ = 0;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  static int FreePort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
  }
  bool Accepts() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    return ok;
  }

  int port_;
  pid_t pid_ = 0;
};

}  // namespace strata::test
