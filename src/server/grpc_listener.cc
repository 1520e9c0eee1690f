#include "strata/server/grpc_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/server_builder.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "strata/common/logging.h"

namespace strata::server {
namespace {

constexpr int kListenBacklog = 4096;  // the kernel caps it at net.core.somaxconn
constexpr int kPollMs = 100;          // the loop's tick while no connection comes (pruning)
constexpr auto kPruneEvery = std::chrono::seconds(1);
// After accept() fails for want of descriptors or memory: the connection stays in the backlog
// and poll() would report it again at once.
constexpr auto kResourceBackoff = std::chrono::milliseconds(100);
constexpr auto kResourceLogEvery = std::chrono::seconds(10);

std::string Unbracketed(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

int PortOf(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return -1;
}

void SetPort(sockaddr* addr, int port) {
  if (addr->sa_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(addr)->sin_port = htons(static_cast<uint16_t>(port));
  } else if (addr->sa_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(addr)->sin6_port = htons(static_cast<uint16_t>(port));
  }
}

// A listening socket on `ai` (its port replaced by `port` when > 0), or -1 with errno set.
int Listen(const addrinfo& ai, int port, bool v6_only) {
  const int fd = socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_storage addr{};
  std::memcpy(&addr, ai.ai_addr, ai.ai_addrlen);
  if (port > 0) SetPort(reinterpret_cast<sockaddr*>(&addr), port);
  const int one = 1;
  const int v6 = v6_only ? 1 : 0;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      (ai.ai_family == AF_INET6 &&
       setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6, sizeof(v6)) != 0) ||
      bind(fd, reinterpret_cast<sockaddr*>(&addr), ai.ai_addrlen) != 0 ||
      listen(fd, kListenBacklog) != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

}  // namespace

StatusOr<std::unique_ptr<GrpcListener>> GrpcListener::Bind(const std::string& host, int port) {
  if (port < 0 || port > 65535) {
    return InvalidArgumentError("gRPC port " + std::to_string(port) + " is not 0-65535");
  }
  const std::string name = Unbracketed(host);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(name.empty() ? nullptr : name.c_str(), std::to_string(port).c_str(),
                             &hints, &found);
  if (rc != 0) {
    return UnavailableError("cannot resolve gRPC host '" + host + "': " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, &freeaddrinfo);
  bool has_v4 = false;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    has_v4 = has_v4 || ai->ai_family == AF_INET;
  }
  std::vector<int> fds;
  int bound_port = port;
  std::string first_error;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    // "::" alone serves IPv4 too; next to an IPv4 address (localhost) each family gets its own.
    const int fd = Listen(*ai, bound_port, /*v6_only=*/has_v4);
    if (fd < 0) {
      if (first_error.empty()) first_error = std::strerror(errno);
      continue;
    }
    if (bound_port == 0) bound_port = PortOf(fd);
    fds.push_back(fd);
  }
  if (fds.empty() || bound_port <= 0) {
    for (int fd : fds) close(fd);
    return UnavailableError("cannot listen for gRPC on " + host + ":" + std::to_string(port) +
                            " (" + (first_error.empty() ? "no address" : first_error) + ")");
  }
  const int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    const std::string error = std::strerror(errno);
    for (int fd : fds) close(fd);
    return UnavailableError("cannot create the gRPC listener's eventfd: " + error);
  }
  return std::unique_ptr<GrpcListener>(new GrpcListener(std::move(fds), bound_port, wake_fd));
}

GrpcListener::GrpcListener(std::vector<int> fds, int port, int wake_fd)
    : listen_fds_(std::move(fds)), port_(port), wake_fd_(wake_fd) {}

GrpcListener::~GrpcListener() { Stop(); }

void GrpcListener::Start(grpc::experimental::ExternalConnectionAcceptor* acceptor,
                         ConnectionGate* gate) {
  if (thread_.joinable() || listen_fds_.empty()) return;
  acceptor_ = acceptor;
  gate_ = gate;
  thread_ = std::thread([this] { AcceptLoop(); });
}

void GrpcListener::Stop() {
  stopping_.store(true);
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (gate_ != nullptr) gate_->Shut();
  if (thread_.joinable()) thread_.join();
  for (int fd : listen_fds_) close(fd);
  listen_fds_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
  wake_fd_ = -1;
}

void GrpcListener::Prune() {
  pruned_at_ = std::chrono::steady_clock::now();
  size_t kept = 0;
  for (const Handed& h : handed_) {
    struct stat st {};
    const bool same = fstat(h.fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == h.inode;
    if (same) {
      handed_[kept++] = h;
    } else {
      gate_->Release();
    }
  }
  handed_.resize(kept);
}

void GrpcListener::AcceptLoop() {
  std::vector<pollfd> polled;
  for (int fd : listen_fds_) polled.push_back({fd, POLLIN, 0});
  const size_t listeners = polled.size();
  polled.push_back({wake_fd_, POLLIN, 0});
  std::chrono::steady_clock::time_point logged_at{};
  while (!stopping_.load()) {
    if (std::chrono::steady_clock::now() - pruned_at_ >= kPruneEvery) Prune();
    for (pollfd& p : polled) p.revents = 0;
    const int ready = poll(polled.data(), polled.size(), kPollMs);
    if (ready <= 0) continue;
    if (polled.back().revents != 0) break;  // Stop()
    for (size_t i = 0; i < listeners; ++i) {
      const pollfd& p = polled[i];
      if ((p.revents & POLLIN) == 0 || stopping_.load()) continue;
      // A place first: while the port is full the connection waits in the backlog.
      gate_->Acquire([this] { Prune(); });
      if (stopping_.load()) {
        gate_->Release();
        break;
      }
      const int fd = accept4(p.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        const int error = errno;  // before Release, whose hooks may change it
        gate_->Release();
        if (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM) {
          const auto now = std::chrono::steady_clock::now();
          if (now - logged_at >= kResourceLogEvery) {
            logged_at = now;
            LogWarn("gRPC cannot accept a connection", {{"error", std::strerror(error)}});
          }
          std::this_thread::sleep_for(kResourceBackoff);
        }
        continue;  // EAGAIN, ECONNABORTED, EINTR: nothing to take now
      }
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      struct stat st {};
      if (fstat(fd, &st) != 0) {
        close(fd);
        gate_->Release();
        continue;
      }
      handed_.push_back({fd, st.st_ino});
      grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters params;
      params.listener_fd = p.fd;
      params.fd = fd;
      acceptor_->HandleNewConnection(&params);
    }
  }
}

}  // namespace strata::server
