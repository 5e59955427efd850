// IDX (the MNIST / Fashion-MNIST format), read through zlib so .gz and raw
// files both work: magic 0x0000TTNN (TT = type, NN = dimensions), big-endian
// dimension sizes, then the values. Dimensions past the first are flattened
// into features (28x28 images -> 784).
#include <zlib.h>

#include <cstring>

#include "accel/error.hpp"
#include "accel/io.hpp"

namespace accel {

Matrix read_idx(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw InputError(path + ": cannot open: " + std::strerror(errno));
  struct Close { gzFile f; ~Close() { gzclose(f); } } closer{f};
  auto read_exact = [&](void* dst, std::size_t bytes, const char* what) {
    std::size_t done = 0;
    while (done < bytes) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(bytes - done, 1u << 30));
      const int got = gzread(f, static_cast<char*>(dst) + done, chunk);
      if (got <= 0) throw InputError(path + ": truncated IDX file while reading " + what);
      done += static_cast<std::size_t>(got);
    }
  };
  unsigned char magic[4];
  read_exact(magic, 4, "the magic number");
  if (magic[0] != 0 || magic[1] != 0) throw InputError(path + ": not an IDX file (bad magic)");
  const int type = magic[2], ndim = magic[3];
  if (ndim < 1 || ndim > 4) throw InputError(path + ": IDX with " + std::to_string(ndim) + " dimensions");
  std::vector<std::int64_t> dims(ndim);
  for (int i = 0; i < ndim; ++i) {
    unsigned char b[4];
    read_exact(b, 4, "the dimensions");
    dims[i] = (std::int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
  }
  Matrix m;
  m.rows = dims[0];
  m.cols = 1;
  for (int i = 1; i < ndim; ++i) m.cols *= dims[i];
  const std::int64_t count = m.rows * m.cols;
  m.data.resize(count);
  if (type == 0x08) {  // unsigned byte
    std::vector<unsigned char> raw(count);
    read_exact(raw.data(), count, "the values");
    for (std::int64_t i = 0; i < count; ++i) m.data[i] = raw[i];
  } else if (type == 0x0D) {  // big-endian float32
    read_exact(m.data.data(), count * 4, "the values");
    for (auto& v : m.data) {
      std::uint32_t u;
      std::memcpy(&u, &v, 4);
      u = __builtin_bswap32(u);
      std::memcpy(&v, &u, 4);
    }
  } else {
    throw InputError(path + ": IDX value type 0x" + std::to_string(type) + " is not supported (need ubyte or float)");
  }
  return m;
}

}  // namespace accel
