// Text inputs without holding them: a streamed read parses CSV or LIBSVM
// text once into float32 rows in a spill file, maps it (Matrix::streamed:
// its pages go back as the passes over it go), and keeps the marks of
// where every kStride-th row starts; a reader of some rows (a cluster
// worker's partition) seeks to the mark before them and reads those lines
// alone.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "accel/csr.hpp"
#include "accel/error.hpp"
#include "accel/io.hpp"
#include "messages.hpp"
#include "spill_file.hpp"
#include "text_rows.hpp"

namespace accel::io {
namespace {

constexpr std::int64_t kStride = TextMarks::kStride;

std::string where(const std::string& path, std::int64_t line) { return path + ":" + std::to_string(line); }

std::int64_t file_bytes(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(path + ": cannot read its size: " + ec.message());
  return static_cast<std::int64_t>(n);
}

std::ifstream open_binary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);  // byte offsets: no newline translation
  if (!in) throw InputError(path + ": cannot open: " + std::strerror(errno));
  return in;
}

// Data rows of CSV text from `in` (at a line start after line `line`):
// `skip` of them passed over, then up to `count` (< 0: all) handed to
// `take` with their line's byte offset (`at`: the stream's). A header is
// line 1 alone. Returns the rows taken.
template <class Take>
std::int64_t csv_rows(std::istream& in, const std::string& path, std::int64_t line, std::int64_t at,
                      std::int64_t skip, std::int64_t count, std::int64_t cols, Take take) {
  std::string text, bad;
  std::vector<float> row;
  std::int64_t taken = 0;
  while ((count < 0 || taken < count) && std::getline(in, text)) {
    const std::int64_t line_at = at;
    at += static_cast<std::int64_t>(text.size()) + (in.eof() ? 0 : 1);
    ++line;
    if (blank_line(text)) continue;
    if (skip > 0) {
      --skip;
      continue;
    }
    if (!csv_fields(text, row, bad)) {
      if (line == 1 && csv_header(text)) continue;
      throw InputError(where(path, line) + ": not a number: " + io::quoted(bad));
    }
    if (cols > 0 && static_cast<std::int64_t>(row.size()) != cols)
      throw InputError(where(path, line) + ": " + std::to_string(row.size()) + " fields, expected " +
                       std::to_string(cols));
    cols = static_cast<std::int64_t>(row.size());
    take(row, line, line_at);
    ++taken;
  }
  return taken;
}

}  // namespace

Matrix spill_csv(const std::string& path, SpillFile& spill) {
  auto in = open_binary(path);
  Matrix m;
  m.marks.file_bytes = file_bytes(path);
  csv_rows(in, path, 0, 0, 0, -1, 0, [&](const std::vector<float>& row, std::int64_t line, std::int64_t at) {
    if (m.rows % kStride == 0) {
      m.marks.offset.push_back(at);
      m.marks.line.push_back(line - 1);
    }
    m.cols = static_cast<std::int64_t>(row.size());
    spill.write(row.data(), row.size());
    ++m.rows;
  });
  if (m.rows == 0) throw InputError(path + ": no data rows");
  return m;
}

namespace {

// A block's rows, densified to `cols` columns, into out.
void densify(const LabeledCsr& b, std::int64_t cols, float* out, const std::string& path) {
  std::fill(out, out + b.x.rows * cols, 0.0f);
  for (std::int64_t i = 0; i < b.x.rows; ++i)
    for (std::int64_t e = b.x.row_ptr[i]; e < b.x.row_ptr[i + 1]; ++e) {
      if (b.x.col_idx[e] >= cols)
        throw InputError(where(path, b.lines[i]) + ": feature " + std::to_string(b.x.col_idx[e] + 1) +
                         " past the job's " + std::to_string(cols) + " columns");
      out[i * cols + b.x.col_idx[e]] = b.x.values[e];
    }
}

}  // namespace

Matrix scan_libsvm(const std::string& path) {
  auto in = open_binary(path);
  Matrix m;
  m.marks.file_bytes = file_bytes(path);
  std::int64_t line = 0;
  for (;;) {
    const std::int64_t at = in.tellg();
    const LabeledCsr b = read_libsvm_block(in, path, line, kStride);
    if (b.x.rows == 0) break;
    m.marks.offset.push_back(at);
    m.marks.line.push_back(line);
    line = b.lines.back();
    m.rows += b.x.rows;
    m.cols = std::max(m.cols, b.x.cols);
    if (b.x.rows < kStride) break;
  }
  if (m.rows == 0) throw InputError(path + ": no data rows");
  m.cols = std::max<std::int64_t>(m.cols, 1);
  return m;
}

void check_densify(const std::string& path, std::int64_t rows, std::int64_t cols, std::int64_t file_bytes) {
  // Data that sparse is not for a dense consumer (read_libsvm_dense_rows).
  const double dense = 4.0 * static_cast<double>(rows) * static_cast<double>(cols);
  if (dense > 256e6 && dense > 64.0 * static_cast<double>(file_bytes))
    throw InputError(path + ": densifying " + std::to_string(rows) + " rows x " + std::to_string(cols) +
                     " columns needs " + std::to_string(dense / 1e9) + " GB for a " + std::to_string(file_bytes) +
                     "-byte file: too sparse for a dense consumer");
}

void spill_libsvm_rows(const std::string& path, const TextMarks& marks, std::int64_t cols, SpillFile& spill) {
  auto in = open_binary(path);
  std::vector<float> block;
  for (std::size_t k = 0; k < marks.offset.size(); ++k) {
    in.clear();
    in.seekg(marks.offset[k]);
    const LabeledCsr b = read_libsvm_block(in, path, marks.line[k], kStride);
    block.resize(static_cast<std::size_t>(b.x.rows * cols));
    densify(b, cols, block.data(), path);
    spill.write(block.data(), block.size());
  }
}

namespace {

// Two passes: the rows, columns and marks, then each block densified.
Matrix spill_libsvm(const std::string& path) {
  Matrix m = scan_libsvm(path);
  check_densify(path, m.rows, m.cols, m.marks.file_bytes);
  SpillFile spill(path);
  spill_libsvm_rows(path, m.marks, m.cols, spill);
  m.view = spill.map();
  return m;
}

Matrix spill_csv(const std::string& path) {
  SpillFile spill(path);
  Matrix m = spill_csv(path, spill);
  m.view = spill.map();
  return m;
}

}  // namespace

Matrix spill_text(const std::string& path, bool csv) { return csv ? spill_csv(path) : spill_libsvm(path); }

namespace {

// The file opened at the mark before row `begin`: that mark's index.
std::size_t open_at_mark(std::ifstream& in, const std::string& path, const TextMarks& marks, std::int64_t begin) {
  check_marked_file(path, marks);
  const auto k = static_cast<std::size_t>(begin / kStride);
  if (begin < 0 || k >= marks.offset.size()) throw InputError(path + ": no row " + std::to_string(begin + 1));
  in = open_binary(path);
  in.seekg(marks.offset[k]);
  return k;
}

void expect_rows(const std::string& path, std::int64_t begin, std::int64_t count, std::int64_t got) {
  if (got != count)
    throw InputError(path + ": fewer rows than the job's (" + std::to_string(begin + got) + ", not " +
                     std::to_string(begin + count) + ")");
}

// LIBSVM rows [begin, begin + count), from the mark before them, handed
// to take(rows, first) in blocks of up to `per` rows (first: the block's
// first row, counted from begin).
template <class Take>
void libsvm_range(const std::string& path, const TextMarks& marks, std::int64_t begin, std::int64_t count,
                  std::int64_t per, Take take) {
  std::ifstream in;
  const std::size_t k = open_at_mark(in, path, marks, begin);
  const std::int64_t skip = begin - static_cast<std::int64_t>(k) * kStride;
  std::int64_t line = marks.line[k];
  if (skip > 0) {
    const LabeledCsr passed = read_libsvm_block(in, path, line, skip);
    if (passed.x.rows == skip) line = passed.lines.back();
  }
  for (std::int64_t done = 0; done < count;) {
    LabeledCsr b = read_libsvm_block(in, path, line, std::min(per, count - done));
    if (b.x.rows == 0) expect_rows(path, begin, count, done);
    line = b.lines.back();
    const std::int64_t n = b.x.rows;
    take(std::move(b), done);
    done += n;
  }
}

LabeledCsr libsvm_range(const std::string& path, const TextMarks& marks, std::int64_t begin, std::int64_t count) {
  LabeledCsr out;
  libsvm_range(path, marks, begin, count, count, [&](LabeledCsr b, std::int64_t) { out = std::move(b); });
  return out;
}

}  // namespace

void read_text_rows(const std::string& path, bool csv, const TextMarks& marks, std::int64_t begin, std::int64_t count,
                    std::int64_t cols, float* out) {
  if (count <= 0) return;
  // A block at a time: the rows' CSR is not held beside the dense rows.
  if (!csv)
    return libsvm_range(path, marks, begin, count, kStride, [&](const LabeledCsr& b, std::int64_t first) {
      densify(b, cols, out + first * cols, path);
    });
  std::ifstream in;
  const std::size_t k = open_at_mark(in, path, marks, begin);
  float* next = out;
  const std::int64_t got = csv_rows(in, path, marks.line[k], marks.offset[k], begin - static_cast<std::int64_t>(k) * kStride,
                                    count, cols, [&](const std::vector<float>& row, std::int64_t, std::int64_t) {
                                      next = std::copy(row.begin(), row.end(), next);
                                    });
  expect_rows(path, begin, count, got);
}

}  // namespace accel::io

namespace accel {

void check_file_bytes(const std::string& path, std::int64_t bytes) {
  if (const std::int64_t now = io::file_bytes(path); now != bytes)
    throw InputError(path + ": " + std::to_string(now) + " bytes, not the job's " + std::to_string(bytes) +
                     " (another file, or changed since the job began)");
}

void check_marked_file(const std::string& path, const TextMarks& marks) { check_file_bytes(path, marks.file_bytes); }

LabeledCsr read_libsvm_range(const std::string& path, const TextMarks& marks, std::int64_t begin, std::int64_t count) {
  if (count <= 0) return {};
  return io::libsvm_range(path, marks, begin, count);
}

}  // namespace accel
