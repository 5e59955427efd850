// CSV and (densified) LIBSVM text readers. Both report file:line for the
// first bad field.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <unistd.h>

#include "accel/error.hpp"
#include "accel/csr.hpp"
#include "accel/io.hpp"
#include "messages.hpp"
#include "text_rows.hpp"

namespace accel {
namespace {

std::string where(const std::string& path, std::int64_t line) { return path + ":" + std::to_string(line); }

bool parse_float(std::string_view s, float& v) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

std::ifstream open_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open: " + std::strerror(errno));
  return in;
}

}  // namespace

namespace io {

bool csv_fields(std::string_view line, std::vector<float>& row, std::string& bad) {
  row.clear();
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    const std::string_view field(line.data() + start, (comma == std::string_view::npos ? line.size() : comma) - start);
    float v;
    if (!parse_float(field, v)) {
      bad = std::string(field);
      return false;
    }
    row.push_back(v);
    if (comma == std::string_view::npos) return true;
    start = comma + 1;
  }
}

bool csv_header(const std::string& line) {
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    const std::string field = line.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const char* b = field.c_str();
    char* e = nullptr;
    (void)std::strtod(b, &e);
    if (e != b) return false;  // strtod read a number's start, in range or not
    if (comma == std::string::npos) return true;
    start = comma + 1;
  }
}

}  // namespace io

Matrix read_csv(const std::string& path) { return read_csv_rows(path, 0, -1, nullptr); }

// Every data line is counted, and the first (it sets the columns) and
// those of the range parsed and checked; the others are only counted, so a
// worker holds and parses its own rows (a header is line 1 alone).
Matrix read_csv_rows(const std::string& path, std::int64_t begin, std::int64_t count, std::int64_t* total) {
  auto in = open_text(path);
  Matrix m;
  std::string line;
  std::int64_t lineno = 0, seen = 0;  // data rows so far
  std::vector<float> row;
  while (std::getline(in, line)) {
    ++lineno;
    if (io::blank_line(line)) continue;
    const bool wanted = count < 0 || (seen >= begin && seen < begin + count);
    if (seen > 0 && !wanted) {
      ++seen;
      continue;
    }
    std::string bad;
    if (!io::csv_fields(line, row, bad)) {
      // The first line is a header only when none of its fields starts like
      // a number ('1e39' or '3x' there is bad data, not a header).
      if (m.rows == 0 && lineno == 1 && io::csv_header(line)) continue;
      throw InputError(where(path, lineno) + ": not a number: " + io::quoted(bad));
    }
    if (seen == 0) m.cols = static_cast<std::int64_t>(row.size());
    else if (static_cast<std::int64_t>(row.size()) != m.cols)
      throw InputError(where(path, lineno) + ": " + std::to_string(row.size()) + " fields, expected " +
                       std::to_string(m.cols));
    ++seen;
    if (!wanted) continue;
    m.data.insert(m.data.end(), row.begin(), row.end());
    ++m.rows;
  }
  if (seen == 0) throw InputError(path + ": no data rows");
  if (total) *total = seen;
  return m;
}

Matrix read_libsvm_dense(const std::string& path) { return read_libsvm_dense_rows(path, 0, -1, nullptr); }

Matrix read_libsvm_dense_rows(const std::string& path, std::int64_t begin, std::int64_t count, std::int64_t* total) {
  // One LIBSVM parser (the SVM's CSR reader, with its file:line errors),
  // densified; the labels are dropped: k-means ignores them. Rows outside
  // the range are checked but not kept.
  const LabeledCsr in =
      count < 0 ? read_libsvm_csr(path)
                : read_libsvm_rows(path, [&](std::int64_t r) { return r >= begin && r < begin + count; });
  if (total) *total = in.x.rows;
  const std::int64_t first = count < 0 ? 0 : std::clamp<std::int64_t>(begin, 0, in.x.rows);
  Matrix m;
  m.rows = count < 0 ? in.x.rows : std::clamp<std::int64_t>(count, 0, in.x.rows - first);
  m.cols = std::max<std::int64_t>(in.x.cols, 1);
  // A dense consumer gets rows x (largest index) floats. Refused: more than
  // half of this machine's memory, or over 256 MB and 64 times the file
  // itself (data that sparse is not for a dense consumer; a 14-byte
  // '1 200000000:1' would become 200M floats). Dense-ish data such as
  // Fashion-MNIST densifies to about 1.5 times its file.
  std::int64_t values = 0;
  const double budget = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE) / 2;
  const double file_bytes = static_cast<double>(std::filesystem::file_size(path));
  const bool overflow = __builtin_mul_overflow(m.rows, m.cols, &values);
  const double dense = 4.0 * static_cast<double>(values);
  if (overflow || dense > budget || (dense > 256e6 && dense > 64 * file_bytes))
    throw InputError(path + ": densifying " + std::to_string(m.rows) + " rows x " + std::to_string(m.cols) +
                     " columns (its largest index) needs " + std::to_string(4.0 * m.rows * m.cols / 1e9) +
                     " GB for a " + std::to_string(static_cast<std::int64_t>(file_bytes)) +
                     "-byte file: too sparse for a dense consumer (svm-train reads LIBSVM files sparse)");
  m.data.assign(values, 0.0f);
  for (std::int64_t i = 0; i < m.rows; ++i)
    for (std::int64_t e = in.x.row_ptr[first + i]; e < in.x.row_ptr[first + i + 1]; ++e)
      m.data[i * m.cols + in.x.col_idx[e]] = in.x.values[e];
  return m;
}

// A whole block is tested with one branch (the sum of x - x is NaN once any
// value is NaN or Inf), so the scan runs at memory speed; only a block
// with one is looked at value by value, for its row and column.
void check_finite(const Matrix& m, const std::string& path, std::int64_t first_row) {
  const float* v = m.values();
  const std::int64_t count = m.rows * m.cols;
  constexpr std::int64_t kBlock = 4096;
  std::int64_t released = 0;  // rows given back so far (streamed)
  for (std::int64_t at = 0; at < count; at += kBlock) {
    const std::int64_t end = std::min(count, at + kBlock);
    float z = 0;
#pragma omp simd reduction(+ : z)
    for (std::int64_t i = at; i < end; ++i) z += v[i] - v[i];
    if (z != 0)
      for (std::int64_t i = at; i < end; ++i)
        if (!std::isfinite(v[i]))
          throw InputError(path + ": row " + std::to_string(first_row + i / m.cols + 1) + ", column " +
                           std::to_string(i % m.cols + 1) + " is " + (std::isnan(v[i]) ? "NaN" : "Inf"));
    // A streamed matrix's pages go back every few MiB (one madvise a block
    // would be a system call per 16 KiB).
    if (m.streamed && (end == count || (at / kBlock) % 256 == 255)) {
      release_rows(m, released, end / m.cols);
      released = end / m.cols;
    }
  }
}

}  // namespace accel
