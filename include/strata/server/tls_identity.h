// TLS for the HTTP API: the server's certificate chain and key (and the client CA for mTLS),
// loaded from PEM files with OpenSSL and swapped in place when the files change.
//
// TlsIdentity::Load checks the files at start (a chain whose first certificate matches the key;
// a client CA file with at least one certificate) and fails with a message naming the file.
// Every new handshake asks Current() for the identity to present (SSL_CTX's certificate
// callback, InstallOn), and MaybeReload / Reload swap in the files' new contents: a connection
// keeps the identity it was made with, and a reload that fails keeps the old one (logged).
// The gRPC port watches the same files itself (gRPC's FileWatcherCertificateProvider).
//
// Thread rules: every method may be called from any thread.
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "strata/common/status.h"

namespace strata::server {

struct TlsFiles {
  std::string cert;          // PEM: the server's certificate, then any intermediates
  std::string key;           // PEM: its private key
  std::string client_ca;     // PEM: CAs whose client certificates are required (mTLS); "": none
  int refresh_seconds = 10;  // how often a handshake may look at the files' modification times
};

class TlsIdentity {
 public:
  // INVALID_ARGUMENT naming the file that is missing, unreadable or not what it should be.
  static StatusOr<std::shared_ptr<TlsIdentity>> Load(const TlsFiles& files);
  ~TlsIdentity();

  // Configures `ctx` (TLS 1.2 at least; client certificates required and verified against the
  // client CA when there is one) to present the current identity on every handshake.
  void InstallOn(SSL_CTX* ctx);

  // Rereads the files; OK (and the new identity in use) or the error (the old one kept).
  Status Reload();
  // Reload when the files' modification times changed, at most once per refresh_seconds.
  void MaybeReload();

  const TlsFiles& files() const { return files_; }
  int64_t reloads() const;

 private:
  struct Loaded;
  explicit TlsIdentity(TlsFiles files);
  std::shared_ptr<const Loaded> Current();
  static int OnCertificate(SSL* ssl, void* self);

  const TlsFiles files_;
  mutable std::mutex mutex_;  // guards the rest
  std::shared_ptr<const Loaded> loaded_;
  std::chrono::steady_clock::time_point checked_at_{};
  int64_t reloads_ = 0;
};

}  // namespace strata::server
