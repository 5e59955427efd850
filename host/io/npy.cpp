// NumPy .npy, format versions 1-3: magic, version, header length, a Python
// dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (r, c), }.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <memory>
#include <regex>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "accel/error.hpp"
#include "accel/io.hpp"
#include "messages.hpp"
#include "spill_file.hpp"

namespace accel {
namespace {

std::string header_field(const std::string& header, const std::string& key, const std::string& path) {
  const std::regex re("'" + key + "'\\s*:\\s*('[^']*'|True|False|\\([^)]*\\))");
  std::smatch m;
  if (!std::regex_search(header, m, re)) throw InputError(path + ": .npy header has no '" + key + "'");
  return m[1].str();
}

}  // namespace

namespace {

// What the header says, and where the data starts.
struct NpyLayout {
  std::int64_t rows = 0, cols = 0, count = 0;
  int width = 4;            // bytes per value: 4 (float32) or 8 (float64)
  std::int64_t offset = 0;  // of the data in the file
};

NpyLayout read_layout(std::ifstream& in, const std::string& path, bool allow_1d) {
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw InputError(path + ": not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  std::uint32_t hlen = 0;
  if (major == 1) {
    unsigned char b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) throw InputError(path + ": truncated .npy header");
    hlen = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) throw InputError(path + ": truncated .npy header");
    hlen = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<std::uint32_t>(b[3]) << 24);
  } else {
    throw InputError(path + ": unsupported .npy version " + std::to_string(major));
  }
  if (hlen > (1u << 20)) throw InputError(path + ": .npy header too long");
  std::string header(hlen, '\0');
  if (!in.read(header.data(), hlen)) throw InputError(path + ": truncated .npy header");

  const std::string descr = header_field(header, "descr", path);
  const std::string order = header_field(header, "fortran_order", path);
  const std::string shape = header_field(header, "shape", path);
  if (order != "False") throw InputError(path + ": Fortran-order .npy is not supported; save it in C order");
  NpyLayout l;
  if (descr == "'<f4'") l.width = 4;
  else if (descr == "'<f8'") l.width = 8;
  else throw InputError(path + ": dtype " + descr + " is not supported (need float32 or float64)");

  std::vector<std::int64_t> dims;
  const std::regex num("-?\\d+");
  for (auto it = std::sregex_iterator(shape.begin(), shape.end(), num); it != std::sregex_iterator(); ++it) {
    const std::string t = it->str();
    std::int64_t d = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
    if (ec != std::errc() || end != t.data() + t.size() || d < 0)
      throw InputError(path + ": shape " + shape + ": dimension " + t + " is not a size");
    dims.push_back(d);
  }
  if (allow_1d && dims.size() == 1) dims.push_back(1);
  if (dims.size() != 2)
    throw InputError(path + ": shape " + shape + (allow_1d ? " is not 1-D or 2-D" : " is not 2-D (need rows x features)"));
  l.rows = dims[0];
  l.cols = dims[1];
  // The data the header promises must be in the file before anything is
  // allocated or mapped for it: a tiny file claiming a huge shape must not
  // make us allocate gigabytes.
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(l.rows, l.cols, &l.count) || __builtin_mul_overflow(l.count, std::int64_t{l.width}, &bytes))
    throw InputError(path + ": shape " + shape + " overflows");
  l.offset = static_cast<std::int64_t>(in.tellg());
  const std::int64_t left = bytes_left(in);
  if (bytes > left)
    throw InputError(path + ": shape " + shape + " needs " + std::to_string(bytes) + " bytes of data, the file holds " +
                     std::to_string(left));
  return l;
}

// The values into memory: float32 as they are; float64 converted a block at
// a time, so the file's doubles are never all in memory beside the floats.
Matrix read_values(std::ifstream& in, const NpyLayout& l, const std::string& path) {
  Matrix m;
  m.rows = l.rows;
  m.cols = l.cols;
  m.data.resize(l.count);
  if (l.width == 4) {
    if (!in.read(reinterpret_cast<char*>(m.data.data()), l.count * 4))
      throw InputError(path + ": truncated data (expected " + std::to_string(l.count) + " float32 values)");
    return m;
  }
  constexpr std::int64_t kBlock = std::int64_t{1} << 17;  // 1 MiB of doubles
  std::vector<double> block(static_cast<std::size_t>(std::min(kBlock, l.count)));
  for (std::int64_t at = 0; at < l.count; at += kBlock) {
    const std::int64_t c = std::min(kBlock, l.count - at);
    if (!in.read(reinterpret_cast<char*>(block.data()), c * 8))
      throw InputError(path + ": truncated data (expected " + std::to_string(l.count) + " float64 values)");
    for (std::int64_t i = 0; i < c; ++i) m.data[at + i] = static_cast<float>(block[i]);
  }
  return m;
}

// The file's float32 values mapped read-only: the rows are the page cache's
// pages, not a copy, so an input is not held twice in memory. The
// pointer's deleter unmaps. A file truncated while mapped would fault on
// access (SIGBUS); inputs are not expected to change under a run.
std::shared_ptr<const float> map_values(const std::string& path, const NpyLayout& l) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot open: " + std::strerror(errno));
  const std::size_t len = static_cast<std::size_t>(l.offset + l.count * 4);
  void* base = ::mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (base == MAP_FAILED) throw InputError(path + ": cannot map: " + std::strerror(err));
  ::madvise(base, len, MADV_WILLNEED);
  std::shared_ptr<const void> mapping(base, [len](const void* p) { ::munmap(const_cast<void*>(p), len); });
  return {mapping, reinterpret_cast<const float*>(static_cast<const char*>(base) + l.offset)};
}

}  // namespace

static Matrix read_npy_any(const std::string& path, bool allow_1d) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open: " + std::strerror(errno));
  return read_values(in, read_layout(in, path, allow_1d), path);
}

Matrix read_npy(const std::string& path) { return read_npy_any(path, false); }

Matrix map_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open: " + std::strerror(errno));
  const NpyLayout l = read_layout(in, path, false);
  // Mapped where the values are float32 and aligned for floats (numpy pads
  // its headers to 64 bytes; a hand-made file may not).
  if (l.width != 4 || l.count == 0 || l.offset % alignof(float) != 0) return read_values(in, l, path);
  Matrix m;
  m.rows = l.rows;
  m.cols = l.cols;
  m.view = map_values(path, l);
  return m;
}

Matrix io::stream_npy(const std::string& path) {
  NpyLayout l;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path + ": cannot open: " + std::strerror(errno));
    l = read_layout(in, path, false);
  }
  if (l.width == 4 && l.count > 0 && l.offset % alignof(float) == 0) return map_npy(path);
  Matrix m;
  m.rows = l.rows;
  m.cols = l.cols;
  if (l.count == 0) return m;
  io::SpillFile spill(path);
  const std::int64_t per_block = std::max<std::int64_t>(1, (std::int64_t{4} << 20) / (l.cols * 4));
  std::vector<float> block(static_cast<std::size_t>(std::min(per_block, l.rows) * l.cols));
  for (std::int64_t r = 0; r < l.rows; r += per_block) {
    const std::int64_t n = std::min(per_block, l.rows - r);
    read_npy_rows(path, l.rows, l.cols, r, n, block.data());
    spill.write(block.data(), static_cast<std::size_t>(n * l.cols));
  }
  m.view = spill.map();
  return m;
}

void io::npy_shape(const std::string& path, std::int64_t* rows, std::int64_t* cols) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open: " + std::strerror(errno));
  const NpyLayout l = read_layout(in, path, false);
  *rows = l.rows;
  *cols = l.cols;
}

std::vector<float> read_npy_vector(const std::string& path) { return read_npy_any(path, true).data; }

// pread of the rows' bytes alone: a worker reading its partition of a
// shared file touches no page of anyone else's rows.
void read_npy_rows(const std::string& path, std::int64_t rows, std::int64_t cols, std::int64_t begin,
                   std::int64_t count, float* out) {
  NpyLayout l;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path + ": cannot open: " + std::strerror(errno));
    l = read_layout(in, path, false);
  }
  io::require_rows(path, l.rows, l.cols, rows, cols, begin, count);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot open: " + std::strerror(errno));
  std::shared_ptr<void> closer(nullptr, [fd](void*) { ::close(fd); });
  // Whole blocks of rows at a time: float64 goes through a block of doubles.
  constexpr std::int64_t kBlockBytes = std::int64_t{4} << 20;
  const std::int64_t per_block = std::max<std::int64_t>(1, kBlockBytes / (cols * l.width));
  std::vector<double> doubles(l.width == 8 ? static_cast<std::size_t>(std::min(count, per_block) * cols) : 0);
  for (std::int64_t r = 0; r < count; r += per_block) {
    const std::int64_t n = std::min(per_block, count - r) * cols;
    char* dst = l.width == 4 ? reinterpret_cast<char*>(out + r * cols) : reinterpret_cast<char*>(doubles.data());
    std::int64_t done = 0;
    const std::int64_t want = n * l.width, at = l.offset + (begin + r) * cols * l.width;
    while (done < want) {
      const ssize_t got = ::pread(fd, dst + done, static_cast<std::size_t>(want - done), at + done);
      if (got <= 0)
        throw InputError(path + ": " + (got < 0 ? std::string("cannot read: ") + std::strerror(errno)
                                                : std::string("ended before its rows (changed since the job began?)")));
      done += got;
    }
    if (l.width == 8)
      for (std::int64_t i = 0; i < n; ++i) out[r * cols + i] = static_cast<float>(doubles[i]);
  }
}

std::string npy_header(const std::vector<std::int64_t>& shape, const char* descr) {
  std::string shp = "(";
  for (auto s : shape) shp += std::to_string(s) + ",";
  if (shape.size() > 1) shp.pop_back();
  shp += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shp + ", }";
  // Pad so the data starts on a 64-byte boundary, header ends with '\n'.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  const auto hl = static_cast<std::uint16_t>(header.size());
  return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(hl & 0xff) + static_cast<char>(hl >> 8) + header;
}

namespace {

template <class T>
void write_npy_impl(std::ostream& out, const T* data, const std::vector<std::int64_t>& shape, const char* descr) {
  std::int64_t count = 1;
  for (auto s : shape) count *= s;
  const std::string header = npy_header(shape, descr);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(T)));
}

}  // namespace

void write_npy(std::ostream& out, const float* data, const std::vector<std::int64_t>& shape) {
  write_npy_impl(out, data, shape, "<f4");
}
void write_npy(std::ostream& out, const std::int32_t* data, const std::vector<std::int64_t>& shape) {
  write_npy_impl(out, data, shape, "<i4");
}
void write_npy(std::ostream& out, const std::int64_t* data, const std::vector<std::int64_t>& shape) {
  write_npy_impl(out, data, shape, "<i8");
}
void write_npy(const std::string& path, const float* data, const std::vector<std::int64_t>& shape) {
  atomic_write(path, [&](std::ostream& out) { write_npy(out, data, shape); });
}
void write_npy(const std::string& path, const std::int32_t* data, const std::vector<std::int64_t>& shape) {
  atomic_write(path, [&](std::ostream& out) { write_npy(out, data, shape); });
}
void write_npy(const std::string& path, const std::int64_t* data, const std::vector<std::int64_t>& shape) {
  atomic_write(path, [&](std::ostream& out) { write_npy(out, data, shape); });
}

}  // namespace accel
