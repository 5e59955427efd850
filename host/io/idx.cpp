// IDX (the MNIST / Fashion-MNIST format), read through zlib so .gz and raw
// files both work: magic 0x0000TTNN (TT = type, NN = dimensions), big-endian
// dimension sizes, then the values. Dimensions past the first are flattened
// into features (28x28 images -> 784).
#include <zlib.h>

#include <cstdio>
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
  if (type != 0x08 && type != 0x0D) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", type);
    throw InputError(path + ": IDX value type " + hex + " is not supported (need ubyte 0x08 or float 0x0D)");
  }
  Matrix m;
  m.rows = dims[0];
  m.cols = 1;
  std::int64_t count = m.rows;
  for (int i = 1; i < ndim; ++i)
    if (__builtin_mul_overflow(m.cols, dims[i], &m.cols) || __builtin_mul_overflow(count, dims[i], &count) ||
        count > (std::int64_t{1} << 40))
      throw InputError(path + ": IDX dimensions overflow");
  // Read as the values arrive (a gzip stream's length is not known ahead):
  // a header promising more than the file holds fails at its end, having
  // allocated only what was there.
  const int width = type == 0x08 ? 1 : 4;
  constexpr std::int64_t kChunk = std::int64_t{1} << 22;
  std::vector<unsigned char> raw(static_cast<std::size_t>(std::min(count, kChunk) * width));
  for (std::int64_t at = 0; at < count;) {
    const std::int64_t n = std::min(count - at, kChunk);
    read_exact(raw.data(), static_cast<std::size_t>(n * width), "the values");
    m.data.resize(static_cast<std::size_t>(at + n));
    for (std::int64_t i = 0; i < n; ++i) {
      if (width == 1) {
        m.data[at + i] = raw[i];
      } else {  // big-endian float32
        std::uint32_t u;
        std::memcpy(&u, raw.data() + 4 * i, 4);
        u = __builtin_bswap32(u);
        std::memcpy(&m.data[at + i], &u, 4);
      }
    }
    at += n;
  }
  return m;
}

}  // namespace accel
