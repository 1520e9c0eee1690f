// The gRPC port, bound and accepted here, each connection then handed to gRPC
// (grpc::experimental::ExternalConnectionAcceptor: the server's credentials, handshake timeout
// and other channel arguments apply as on a port gRPC binds itself).
//
// It exists for what gRPC 1.51 cannot do: hold at most a set number of connections. Every
// connection takes a place in a ConnectionGate before it is accepted; while the port is full it
// waits in the kernel's listen backlog. Once handed over, a connection is gRPC's: the listener
// sees it closed when the descriptor it handed over no longer names the same socket (its
// inode), checked while the port is full and once a second.
//
// Thread rules: Bind, Start and Stop from one thread; the accept loop runs on its own.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "strata/common/status.h"
#include "strata/server/connection_gate.h"

namespace grpc::experimental {
class ExternalConnectionAcceptor;
}  // namespace grpc::experimental

namespace strata::server {

class GrpcListener {
 public:
  // Listens on every address `host` resolves to (an IPv6 literal with or without brackets);
  // port 0: a free port, the same on every address. UNAVAILABLE when no address can be bound.
  static StatusOr<std::unique_ptr<GrpcListener>> Bind(const std::string& host, int port);
  ~GrpcListener();
  GrpcListener(const GrpcListener&) = delete;
  GrpcListener& operator=(const GrpcListener&) = delete;

  int port() const { return port_; }

  // Starts accepting: each connection takes a place in `gate`, then goes to `acceptor` (whose
  // server has started). Both outlive Stop().
  void Start(grpc::experimental::ExternalConnectionAcceptor* acceptor, ConnectionGate* gate);
  // Stops accepting and closes the listening sockets (new connections are refused), at once:
  // a drain calls it just before gRPC's own shutdown sends GOAWAY. The connections handed over
  // stay gRPC's. Idempotent.
  void Stop();

 private:
  struct Handed {
    int fd;
    ino_t inode;
  };

  GrpcListener(std::vector<int> fds, int port, int wake_fd);
  void AcceptLoop();
  // Gives back the places of handed-over connections gRPC has closed.
  void Prune();

  std::vector<int> listen_fds_;
  const int port_;
  int wake_fd_;  // an eventfd: Stop() wakes the accept loop's poll at once
  grpc::experimental::ExternalConnectionAcceptor* acceptor_ = nullptr;
  ConnectionGate* gate_ = nullptr;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::vector<Handed> handed_;  // the accept thread's
  std::chrono::steady_clock::time_point pruned_at_{};
};

}  // namespace strata::server
