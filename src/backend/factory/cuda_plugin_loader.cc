#include "cuda_plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "strata/backend/cuda/cuda_backend_plugin.h"

namespace strata::backend::internal {
namespace {

struct Plugin {
  Status status = FailedPreconditionError("not loaded");
  StrataCudaPluginDeviceCountFn device_count = nullptr;
  StrataCudaPluginCreateFn create = nullptr;
};

std::string ExecutableDir() {
  std::vector<char> buf(4096);
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return "";
  std::string path(buf.data(), static_cast<size_t>(n));
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::vector<std::string> Candidates() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("STRATA_CUDA_BACKEND_LIBRARY"); env != nullptr && *env) {
    paths.emplace_back(env);
    return paths;  // an explicit choice is the only one tried
  }
  const std::string dir = ExecutableDir();
  if (!dir.empty()) {
    paths.push_back(dir + "/" + cuda::kCudaPluginFile);
    paths.push_back(dir + "/../lib/" + cuda::kCudaPluginFile);
  }
#ifdef STRATA_CUDA_PLUGIN_BUILD_PATH
  paths.emplace_back(STRATA_CUDA_PLUGIN_BUILD_PATH);
#endif
  return paths;
}

Plugin LoadOnce() {
  Plugin p;
  std::string tried;
  for (const std::string& path : Candidates()) {
    if (access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path + " (absent)";
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      tried += (tried.empty() ? "" : ", ") + path + " (" + (why ? why : "dlopen failed") + ")";
      continue;
    }
    auto abi = reinterpret_cast<StrataCudaPluginAbiFn>(dlsym(handle, "strata_cuda_plugin_abi"));
    p.device_count = reinterpret_cast<StrataCudaPluginDeviceCountFn>(
        dlsym(handle, "strata_cuda_plugin_device_count"));
    p.create =
        reinterpret_cast<StrataCudaPluginCreateFn>(dlsym(handle, "strata_cuda_plugin_create"));
    if (abi == nullptr || p.device_count == nullptr || p.create == nullptr) {
      tried += (tried.empty() ? "" : ", ") + path + " (not a Strata CUDA backend library)";
      dlclose(handle);
      continue;
    }
    if (abi() != cuda::kCudaPluginAbi) {
      tried += (tried.empty() ? "" : ", ") + path + " (from another build of Strata)";
      dlclose(handle);
      continue;
    }
    p.status = OkStatus();
    return p;
  }
  p.device_count = nullptr;
  p.create = nullptr;
  p.status = FailedPreconditionError("cannot load the CUDA backend library " +
                                     std::string(cuda::kCudaPluginFile) + ": tried " +
                                     (tried.empty() ? std::string("nothing") : tried));
  return p;
}

const Plugin& Get() {
  static const Plugin plugin = LoadOnce();
  return plugin;
}

}  // namespace

bool CudaDriverPresent() {
  static const bool present = [] {
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver == nullptr) return false;
    dlclose(driver);
    return true;
  }();
  return present;
}

Status LoadCudaPlugin() { return Get().status; }

int CudaPluginDeviceCount() {
  const Plugin& p = Get();
  return p.status.ok() ? p.device_count() : 0;
}

StatusOr<std::unique_ptr<Backend>> CreateCudaBackendFromPlugin(
    const model::GgufFile& file, const cuda::CudaBackendOptions& options) {
  const Plugin& p = Get();
  STRATA_RETURN_IF_ERROR(p.status);
  Status status;
  Backend* backend = p.create(&file, &options, &status);
  if (backend == nullptr) {
    if (status.ok()) return InternalError("the CUDA backend library returned no backend");
    return status;
  }
  return std::unique_ptr<Backend>(backend);
}

}  // namespace strata::backend::internal
