#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <zlib.h>

#include <csignal>
#include "accel/error.hpp"
#include "accel/io.hpp"
#include "format.hpp"
#include "messages.hpp"
#include "spill_file.hpp"
#include "text_rows.hpp"

namespace accel {

static bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

namespace {

// The first bytes of the file, through gzip when it is compressed.
std::string head_bytes(const std::string& path, int n) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files as they are
  if (!f) return {};
  std::string b(static_cast<std::size_t>(n), '\0');
  const int got = gzread(f, b.data(), static_cast<unsigned>(n));
  gzclose(f);
  b.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  return b;
}

bool is_idx(const std::string& h) {
  if (h.size() < 4 || h[0] != 0 || h[1] != 0) return false;
  const int type = static_cast<unsigned char>(h[2]), ndim = static_cast<unsigned char>(h[3]);
  return (type == 0x08 || type == 0x09 || (type >= 0x0B && type <= 0x0E)) && ndim >= 1 && ndim <= 4;
}

// Text is CSV when its name ends in .csv or its first line has a comma.
bool is_csv(const std::string& path, const std::string& head) {
  return ends_with(std::filesystem::path(path).filename().string(), ".csv") ||
         head.substr(0, head.find('\n')).find(',') != std::string::npos;
}

}  // namespace

namespace io {

Format format_of(const std::string& path) {
  const std::string head = head_bytes(path, 256);
  if (head.rfind("\x93NUMPY", 0) == 0) return Format::Npy;
  if (is_idx(head)) return Format::Idx;
  return is_csv(path, head) ? Format::Csv : Format::Libsvm;
}

const char* format_name(Format f) {
  switch (f) {
    case Format::Npy: return ".npy";
    case Format::Idx: return "IDX";
    case Format::Csv: return "CSV";
    case Format::Libsvm: return "LIBSVM text";
  }
  return "?";
}

}  // namespace io

namespace {

Matrix load_any(const std::string& path, bool streamed, bool check = true) {
  if (names_parts(path)) return io::load_parts(path, streamed);
  io::require_file(path);
  const io::Format f = io::format_of(path);
  Matrix m;
  if (f == io::Format::Npy) m = streamed ? io::stream_npy(path) : map_npy(path);
  else if (f == io::Format::Idx) m = read_idx(path);
  else if (streamed) m = io::spill_text(path, f == io::Format::Csv);
  else m = f == io::Format::Csv ? read_csv(path) : read_libsvm_dense(path);
  if (m.rows == 0 || m.cols == 0) throw InputError(path + ": empty matrix");
  m.streamed = streamed && m.view != nullptr;
  if (check) check_finite(m, path);
  return m;
}

}  // namespace

Matrix load_matrix(const std::string& path) { return load_any(path, false); }
Matrix load_matrix_streamed(const std::string& path) { return load_any(path, true); }

Matrix load_matrix_streamed_unchecked(const std::string& path) { return load_any(path, true, false); }

void release_rows(const Matrix& m, std::int64_t begin, std::int64_t end) {
  if (!m.streamed || !m.view || end <= begin) return;
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<std::uintptr_t>(m.row(begin));
  const auto last = reinterpret_cast<std::uintptr_t>(m.row(end));
  const std::uintptr_t from = (first + page - 1) / page * page, to = last / page * page;
  // Read-only private pages never written: dropping them loses nothing.
  if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

void load_matrix_rows(const std::string& path, std::int64_t rows, std::int64_t cols, std::int64_t begin,
                      std::int64_t count, float* out, const TextMarks* marks) {
  io::require_file(path);
  const io::Format f = io::format_of(path);
  if (f == io::Format::Npy) {
    read_npy_rows(path, rows, cols, begin, count, out);
  } else if (marks && !marks->empty()) {
    io::require_rows(path, rows, cols, rows, cols, begin, count);  // the range within the job's shape
    io::read_text_rows(path, f == io::Format::Csv, *marks, begin, count, cols, out);
  } else {
    // Text: only these rows kept (and checked finite below); the file's
    // rows counted, its shape checked against the job's.
    if (f == io::Format::Idx) {
      const Matrix all = load_matrix(path);  // checked whole, finite
      io::require_rows(path, all.rows, all.cols, rows, cols, begin, count);
      std::copy(all.row(begin), all.row(begin) + count * cols, out);
      return;
    }
    std::int64_t total = 0;
    const Matrix some = f == io::Format::Csv ? read_csv_rows(path, begin, count, &total)
                                             : read_libsvm_dense_rows(path, begin, count, &total);
    io::require_rows(path, total, some.cols, rows, cols, begin, count);
    if (some.rows != count) throw InputError(path + ": fewer rows than the job's");
    std::copy(some.values(), some.values() + count * cols, out);
  }
  Matrix slice;
  slice.rows = count;
  slice.cols = cols;
  slice.view = std::shared_ptr<const float>(out, [](const float*) {});  // the caller's buffer
  check_finite(slice, path, begin);
}

namespace {

// `path.tmp.<pid>` files whose process is gone (a kill mid-write).
void remove_stale_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string prefix = p.filename().string() + ".tmp.";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) == -1 && errno == ESRCH) fs::remove(e.path(), ec);
  }
}

}  // namespace

std::int64_t bytes_left(std::istream& in) {
  const auto here = in.tellg();
  if (here < 0) return 0;
  in.seekg(0, std::ios::end);
  const std::int64_t left = static_cast<std::int64_t>(in.tellg() - here);
  in.seekg(here);
  return left;
}

void OutputSet::add(const std::string& path, const std::function<void(std::ostream&)>& fill) {
  remove_stale_temporaries(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  files_.emplace_back(path, tmp);  // removed by the destructor unless committed
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(path + ": cannot write: " + std::strerror(errno));
  fill(out);
  out.flush();
  if (!out) throw InputError(path + ": write failed: " + std::strerror(errno));
}

void OutputSet::commit() {
  for (const auto& [path, tmp] : files_) std::filesystem::rename(tmp, path);
  committed_ = true;
}

OutputSet::~OutputSet() {
  if (committed_) return;
  for (const auto& [path, tmp] : files_) std::remove(tmp.c_str());
}

void atomic_write(const std::string& path, const std::function<void(std::ostream&)>& fill) {
  OutputSet set;
  set.add(path, fill);
  set.commit();
}

}  // namespace accel
