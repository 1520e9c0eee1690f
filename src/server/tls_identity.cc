#include "strata/server/tls_identity.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cstdio>
#include <utility>
#include <vector>

#include "strata/common/logging.h"

namespace strata::server {
namespace {

struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "not PEM";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

// Every certificate of a PEM file, in order.
StatusOr<std::vector<X509Ptr>> ReadCertificates(const std::string& path, const char* what) {
  File f(std::fopen(path.c_str(), "rb"));
  if (f == nullptr) return InvalidArgumentError(std::string(what) + " " + path + " cannot be read");
  std::vector<X509Ptr> certs;
  while (X509* x = PEM_read_X509(f.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(x, &X509_free);
  }
  ERR_clear_error();  // the end of the file reads as an error
  if (certs.empty()) {
    return InvalidArgumentError(std::string(what) + " " + path + " holds no PEM certificate");
  }
  return certs;
}

int64_t ModifiedNanos(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return -1;
  return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

struct TlsIdentity::Loaded {
  std::vector<X509Ptr> chain;  // [0] is the server's certificate
  KeyPtr key{nullptr, &EVP_PKEY_free};
  X509_STORE* client_ca = nullptr;  // owned; null without mTLS
  int64_t cert_time = -1, key_time = -1, ca_time = -1;
  ~Loaded() {
    if (client_ca != nullptr) X509_STORE_free(client_ca);
  }
};

TlsIdentity::TlsIdentity(TlsFiles files) : files_(std::move(files)) {}
TlsIdentity::~TlsIdentity() = default;

StatusOr<std::shared_ptr<TlsIdentity>> TlsIdentity::Load(const TlsFiles& files) {
  if (files.cert.empty() || files.key.empty()) {
    return InvalidArgumentError("TLS needs both a certificate and a key file");
  }
  auto identity = std::shared_ptr<TlsIdentity>(new TlsIdentity(files));
  STRATA_RETURN_IF_ERROR(identity->Reload());
  return identity;
}

Status TlsIdentity::Reload() {
  auto fresh = std::make_shared<Loaded>();
  fresh->cert_time = ModifiedNanos(files_.cert);
  fresh->key_time = ModifiedNanos(files_.key);
  fresh->ca_time = ModifiedNanos(files_.client_ca);
  STRATA_ASSIGN_OR_RETURN(fresh->chain, ReadCertificates(files_.cert, "the TLS certificate file"));
  {
    File f(std::fopen(files_.key.c_str(), "rb"));
    if (f == nullptr)
      return InvalidArgumentError("the TLS key file " + files_.key + " cannot be read");
    fresh->key.reset(PEM_read_PrivateKey(f.get(), nullptr, nullptr, nullptr));
    if (fresh->key == nullptr) {
      return InvalidArgumentError("the TLS key file " + files_.key + " holds no PEM private key (" +
                                  OpenSslError() + ")");
    }
  }
  if (X509_check_private_key(fresh->chain[0].get(), fresh->key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgumentError("the TLS key file " + files_.key +
                                " does not match the certificate of " + files_.cert);
  }
  if (!files_.client_ca.empty()) {
    STRATA_ASSIGN_OR_RETURN(std::vector<X509Ptr> cas,
                            ReadCertificates(files_.client_ca, "the TLS client CA file"));
    fresh->client_ca = X509_STORE_new();
    for (const X509Ptr& ca : cas) X509_STORE_add_cert(fresh->client_ca, ca.get());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (loaded_ != nullptr) ++reloads_;
  loaded_ = std::move(fresh);
  checked_at_ = std::chrono::steady_clock::now();
  return OkStatus();
}

void TlsIdentity::MaybeReload() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (now - checked_at_ < std::chrono::seconds(files_.refresh_seconds)) return;
    checked_at_ = now;
    if (ModifiedNanos(files_.cert) == loaded_->cert_time &&
        ModifiedNanos(files_.key) == loaded_->key_time &&
        ModifiedNanos(files_.client_ca) == loaded_->ca_time) {
      return;
    }
  }
  const Status status = Reload();
  Log(status.ok() ? LogLevel::kInfo : LogLevel::kWarn,
      status.ok() ? "TLS certificate reloaded"
                  : "TLS certificate reload failed; keeping the old one",
      {{"cert", files_.cert}, {"error", status.ok() ? "" : status.message()}});
}

int64_t TlsIdentity::reloads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reloads_;
}

std::shared_ptr<const TlsIdentity::Loaded> TlsIdentity::Current() {
  std::lock_guard<std::mutex> lock(mutex_);
  return loaded_;
}

int TlsIdentity::OnCertificate(SSL* ssl, void* self) {
  auto* identity = static_cast<TlsIdentity*>(self);
  identity->MaybeReload();
  const std::shared_ptr<const Loaded> current = identity->Current();
  STACK_OF(X509)* chain = sk_X509_new_null();
  for (size_t i = 1; i < current->chain.size(); ++i) sk_X509_push(chain, current->chain[i].get());
  const int ok = SSL_use_cert_and_key(ssl, current->chain[0].get(), current->key.get(), chain,
                                      /*override=*/1);
  sk_X509_free(chain);
  if (ok != 1) return 0;
  if (current->client_ca != nullptr && SSL_set1_verify_cert_store(ssl, current->client_ca) != 1) {
    return 0;
  }
  return 1;
}

void TlsIdentity::InstallOn(SSL_CTX* ctx) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_cert_cb(ctx, &TlsIdentity::OnCertificate, this);
  if (!files_.client_ca.empty()) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
}

}  // namespace strata::server
