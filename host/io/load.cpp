#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "accel/error.hpp"
#include "accel/io.hpp"

namespace accel {

static bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Matrix load_matrix(const std::string& path) {
  if (!std::filesystem::exists(path)) throw InputError(path + ": no such file");
  const std::string name = std::filesystem::path(path).filename().string();
  Matrix m;
  if (ends_with(name, ".npy")) m = read_npy(path);
  else if (ends_with(name, ".csv")) m = read_csv(path);
  else if (name.find("idx") != std::string::npos || name.find("-ubyte") != std::string::npos) m = read_idx(path);
  else m = read_libsvm_dense(path);
  if (m.rows == 0 || m.cols == 0) throw InputError(path + ": empty matrix");
  check_finite(m, path);
  return m;
}

void atomic_write(const std::string& path, const std::function<void(std::ostream&)>& fill) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) throw InputError(path + ": cannot write: " + std::strerror(errno));
      fill(out);
      out.flush();
      if (!out) throw InputError(path + ": write failed: " + std::strerror(errno));
    }
    std::filesystem::rename(tmp, path);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

}  // namespace accel
