#include "cublas_loader.hpp"

#include <dlfcn.h>

#include <mutex>
#include <stdexcept>
#include <string>

namespace accel::cuda {
namespace {

template <class F>
void bind(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr) throw std::runtime_error(std::string("cuBLAS: no symbol ") + name);
}

Cublas load() {
  void* lib = nullptr;
  for (const std::string name : {"libcublas.so." + std::to_string(CUBLAS_VER_MAJOR), std::string("libcublas.so")})
    if ((lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  if (lib == nullptr) throw std::runtime_error(std::string("cuBLAS: cannot open libcublas.so: ") + dlerror());
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
