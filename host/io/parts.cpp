// Inputs of part files (--input 'data/part-*.npy', or a directory of
// them), as Hadoop and Spark write their outputs: one matrix whose rows
// are the parts' rows in name order. The parts are spilled into one file,
// so that the passes over the whole input (the checks, k-means++ seeding,
// a coordinator's pushes) see one matrix; each part's rows and marks are
// kept, so that a --pull member reads its rows from the parts alone.
#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "accel/error.hpp"
#include "accel/io.hpp"
#include "format.hpp"
#include "messages.hpp"
#include "spill_file.hpp"
#include "text_rows.hpp"

namespace accel {
namespace fs = std::filesystem;

bool names_parts(const std::string& spec) {
  std::error_code ec;
  const auto st = fs::status(spec, ec);
  if (!ec && fs::is_regular_file(st)) return false;
  if (!ec && fs::is_directory(st)) return true;
  return spec.find_first_of("*?[") != std::string::npos;
}

namespace {

std::vector<std::string> directory_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().front() != '.' && it->is_regular_file(ec))
      files.push_back(fs::absolute(it->path()).string());
  if (ec) throw InputError(dir + ": cannot list the directory: " + ec.message());
  return files;
}

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  const std::unique_ptr<glob_t, void (*)(glob_t*)> freer(&g, ::globfree);
  if (rc == GLOB_NOSPACE || rc == GLOB_ABORTED) throw InputError(pattern + ": cannot expand the glob");
  std::vector<std::string> files;
  std::error_code ec;
  for (std::size_t k = 0; rc == 0 && k < g.gl_pathc; ++k)
    if (fs::is_regular_file(g.gl_pathv[k], ec)) files.push_back(fs::absolute(g.gl_pathv[k]).string());
  return files;
}

}  // namespace

std::vector<std::string> input_files(const std::string& spec) {
  if (!names_parts(spec)) return {spec};
  std::error_code ec;
  const bool dir = fs::is_directory(spec, ec);
  std::vector<std::string> files = dir ? directory_files(spec) : glob_files(spec);
  std::sort(files.begin(), files.end());
  if (files.empty()) throw InputError(spec + (dir ? ": a directory with no files" : ": matches no file"));
  return files;
}

namespace io {
namespace {

std::int64_t size_of(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  if (ec) throw InputError(path + ": cannot read its size: " + ec.message());
  return static_cast<std::int64_t>(n);
}

void same_columns(const std::string& path, std::int64_t has, std::int64_t cols) {
  if (cols > 0 && has != cols)
    throw InputError(path + ": " + std::to_string(has) + " columns, the parts before it " + std::to_string(cols));
}

// One .npy part's rows into the spill, a block at a time.
InputPart spill_npy_part(const std::string& path, std::int64_t& cols, SpillFile& spill) {
  InputPart p{path, 0, size_of(path), {}};
  std::int64_t c = 0;
  npy_shape(path, &p.rows, &c);
  same_columns(path, c, cols);
  cols = c;
  const std::int64_t per_block = std::max<std::int64_t>(1, (std::int64_t{4} << 20) / (c * 4));
  std::vector<float> block(static_cast<std::size_t>(std::min(per_block, p.rows) * c));
  for (std::int64_t r = 0; r < p.rows; r += per_block) {
    const std::int64_t n = std::min(per_block, p.rows - r);
    read_npy_rows(path, p.rows, c, r, n, block.data());
    spill.write(block.data(), static_cast<std::size_t>(n * c));
  }
  return p;
}

InputPart spill_csv_part(const std::string& path, std::int64_t& cols, SpillFile& spill) {
  InputPart p{path, 0, size_of(path), {}};
  if (p.file_bytes == 0) return p;  // an empty part (Spark writes them)
  Matrix m = spill_csv(path, spill);
  same_columns(path, m.cols, cols);
  cols = m.cols;
  p.rows = m.rows;
  p.marks = std::move(m.marks);
  return p;
}

// Two passes, as for one LIBSVM file: every part scanned (the widest sets
// the columns), then each densified.
std::vector<InputPart> spill_libsvm_parts(const std::string& spec, const std::vector<std::string>& files,
                                          std::int64_t& cols, SpillFile& spill) {
  std::vector<InputPart> parts;
  std::int64_t rows = 0, bytes = 0;
  for (const auto& f : files) {
    InputPart p{f, 0, size_of(f), {}};
    if (p.file_bytes > 0) {
      Matrix m = scan_libsvm(f);
      cols = std::max(cols, m.cols);
      p.rows = m.rows;
      p.marks = std::move(m.marks);
    }
    rows += p.rows;
    bytes += p.file_bytes;
    parts.push_back(std::move(p));
  }
  check_densify(spec, rows, cols, bytes);
  for (const auto& p : parts)
    if (p.rows > 0) spill_libsvm_rows(p.path, p.marks, cols, spill);
  return parts;
}

// Every part the first's format (empty parts aside); IDX is not read in
// parts.
Format parts_format(const std::vector<std::string>& files) {
  std::string first;
  Format f = Format::Libsvm;
  for (const auto& g : files) {
    require_file(g);
    if (size_of(g) == 0) continue;
    const Format h = format_of(g);
    if (h == Format::Idx) throw InputError(g + ": IDX is read whole, not as part files");
    if (first.empty()) first = g, f = h;
    if (h != f) throw InputError(g + ": " + format_name(h) + ", the part " + first + " " + format_name(f));
  }
  return f;
}

}  // namespace

Matrix load_parts(const std::string& spec, bool streamed) {
  const std::vector<std::string> files = input_files(spec);
  const Format f = parts_format(files);
  SpillFile spill(spec);
  Matrix m;
  if (f == Format::Libsvm) {
    m.parts = spill_libsvm_parts(spec, files, m.cols, spill);
  } else {
    for (const auto& g : files)
      m.parts.push_back(f == Format::Npy ? spill_npy_part(g, m.cols, spill) : spill_csv_part(g, m.cols, spill));
  }
  for (const auto& p : m.parts) m.rows += p.rows;
  if (m.rows == 0 || m.cols == 0) throw InputError(spec + ": empty matrix");
  m.view = spill.map();
  m.streamed = streamed;
  // Each part checked as its own file: an error names it and its row.
  std::int64_t first = 0;
  for (const auto& p : m.parts) {
    Matrix slice;
    slice.rows = p.rows;
    slice.cols = m.cols;
    slice.view = std::shared_ptr<const float>(m.view, m.row(first));
    slice.streamed = streamed;
    check_finite(slice, p.path);
    first += p.rows;
  }
  return m;
}

}  // namespace io

void load_parts_rows(const std::vector<InputPart>& parts, std::int64_t cols, std::int64_t begin, std::int64_t count,
                     float* out) {
  std::int64_t first = 0;
  for (const auto& p : parts) {
    const std::int64_t lo = std::max(begin, first), hi = std::min(begin + count, first + p.rows);
    if (lo < hi) {
      io::require_file(p.path);
      check_file_bytes(p.path, p.file_bytes);
      if (p.sample != 0 && text_split_sample(p.path, p.first_byte, p.stop_byte) != p.sample)
        throw InputError(p.path + ": bytes " + std::to_string(p.first_byte) + "-" + std::to_string(p.stop_byte) +
                         " differ from the job's (another file, or changed since the job began)");
      load_matrix_rows(p.path, p.rows, cols, lo - first, hi - lo, out + (lo - begin) * cols,
                       p.marks.empty() ? nullptr : &p.marks);
    }
    first += p.rows;
  }
  if (begin < 0 || count < 0 || begin > first - count)
    throw InputError("rows [" + std::to_string(begin) + ", " + std::to_string(begin + count) + ") of part files of " +
                     std::to_string(first) + " rows");
}

Matrix stream_parts_rows(const std::vector<InputPart>& parts, std::int64_t cols, std::int64_t begin,
                         std::int64_t count) {
  io::SpillFile spill(parts.empty() ? std::string("the input") : parts.front().path);
  const std::int64_t per = std::max<std::int64_t>(1024, (std::int64_t{16} << 20) / (cols * 4));
  std::vector<float> block;
  for (std::int64_t at = 0; at < count; at += per) {
    const std::int64_t n = std::min(per, count - at);
    block.resize(static_cast<std::size_t>(n * cols));
    load_parts_rows(parts, cols, begin + at, n, block.data());
    spill.write(block.data(), block.size());
  }
  Matrix m;
  m.rows = count;
  m.cols = cols;
  m.view = spill.map();
  m.streamed = m.view != nullptr;
  return m;
}

bool text_file(const std::string& path) {
  if (names_parts(path)) return false;
  io::require_file(path);
  const io::Format f = io::format_of(path);
  return f == io::Format::Csv || f == io::Format::Libsvm;
}

}  // namespace accel
