#include "cublas_loader.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace accel::cuda {
namespace {

template <class F>
void bind(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr) throw std::runtime_error(std::string("cuBLAS: no symbol ") + name);
}

// ACCEL_CUBLAS names the library to open (a path or a soname); else the
// toolkit's own major version, then any libcublas.so the loader finds. The
// few entry points used here have kept their signatures across majors.
Cublas load() {
  void* lib = nullptr;
  std::vector<std::string> names;
  if (const char* env = std::getenv("ACCEL_CUBLAS"); env != nullptr && *env != 0) names.emplace_back(env);
  names.push_back("libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  names.emplace_back("libcublas.so");
  std::string tried;
  for (const auto& name : names) {
    if ((lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    tried += (tried.empty() ? "" : "; ") + std::string(dlerror());
  }
  if (lib == nullptr) throw std::runtime_error("cuBLAS: cannot open it (" + tried + ")");
  Cublas c{};
  bind(lib, "cublasCreate_v2", c.create);
  bind(lib, "cublasDestroy_v2", c.destroy);
  bind(lib, "cublasSetStream_v2", c.set_stream);
  bind(lib, "cublasSetMathMode", c.set_math_mode);
  bind(lib, "cublasSgemm_v2", c.sgemm);
  bind(lib, "cublasGetStatusString", c.status_string);
  return c;  // the library stays open for the process
}

}  // namespace

const Cublas& cublas() {
  static std::once_flag once;
  static Cublas c;
  std::call_once(once, [] { c = load(); });
  return c;
}

}  // namespace accel::cuda
