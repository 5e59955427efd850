// A text input counted in byte splits, as Hadoop's input splits divide a
// file: a split owns the lines that start in it, so splits cut anywhere
// never share or lose a line. Each cluster member counts its own split
// (the coordinator learns the counts and the marks, never the rows); the
// rows are then numbered from the splits before it, and a reader of some
// of them seeks to the mark before them (text_spill.cpp's read_text_rows).
//
// Counting only finds where the rows are: it does not parse the values.
// The member that reads a row parses it, and an error there names the
// file's line, which the marks carry once the coordinator has numbered them.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <string_view>

#include "accel/error.hpp"
#include "accel/io.hpp"
#include "format.hpp"
#include "messages.hpp"
#include "text_rows.hpp"

namespace accel {
namespace {

class Fd {
 public:
  explicit Fd(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw InputError(path + ": cannot open: " + std::strerror(errno));
  }
  ~Fd() { ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  // Up to n bytes at `at` (fewer only at the file's end).
  std::size_t read(char* to, std::size_t n, std::int64_t at) const {
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd_, to + got, n - got, at + static_cast<std::int64_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw InputError(path_ + ": cannot read: " + std::strerror(errno));
      if (r == 0) break;
      got += static_cast<std::size_t>(r);
    }
    return got;
  }

 private:
  std::string path_;
  int fd_;
};

// The offset just after the first newline at or after `at` (the file's
// size when none): the start of the line after the one holding `at`.
std::int64_t next_line_start(const Fd& f, std::int64_t at, std::int64_t size) {
  std::vector<char> buf(std::size_t{1} << 16);
  while (at < size) {
    const std::size_t got = f.read(buf.data(), std::min<std::int64_t>(buf.size(), size - at), at);
    if (got == 0) break;
    if (const void* nl = std::memchr(buf.data(), '\n', got)) return at + (static_cast<const char*>(nl) - buf.data()) + 1;
    at += static_cast<std::int64_t>(got);
  }
  return size;
}

// The lines that start in [first, stop) of a file, a buffer at a time;
// stop is a line start or the file's end, so no line is cut.
class Lines {
 public:
  Lines(const Fd& f, std::int64_t first, std::int64_t stop) : f_(f), base_(first), stop_(stop) {}
  // The next line without its newline, and its offset.
  bool next(std::string_view& line, std::int64_t& at) {
    if (base_ + static_cast<std::int64_t>(lo_) >= stop_) return false;
    const char* nl = nullptr;
    while (!(nl = static_cast<const char*>(std::memchr(buf_.data() + lo_, '\n', hi_ - lo_))) && fill()) {
    }
    at = base_ + static_cast<std::int64_t>(lo_);
    const std::size_t end = nl ? static_cast<std::size_t>(nl - buf_.data()) : hi_;
    line = std::string_view(buf_.data() + lo_, end - lo_);
    lo_ = nl ? end + 1 : hi_;
    return true;
  }

 private:
  // More bytes after the ones held (a line longer than the buffer grows it).
  bool fill() {
    const std::int64_t read_to = base_ + static_cast<std::int64_t>(hi_);
    if (read_to >= stop_) return false;
    std::copy(buf_.begin() + static_cast<std::ptrdiff_t>(lo_), buf_.begin() + static_cast<std::ptrdiff_t>(hi_),
              buf_.begin());
    base_ += static_cast<std::int64_t>(lo_);
    hi_ -= lo_;
    lo_ = 0;
    if (hi_ == buf_.size()) buf_.resize(buf_.size() * 2);
    const std::size_t want = static_cast<std::size_t>(std::min<std::int64_t>(buf_.size() - hi_, stop_ - read_to));
    const std::size_t got = f_.read(buf_.data() + hi_, want, read_to);
    hi_ += got;
    return got > 0;
  }
  const Fd& f_;
  std::int64_t base_, stop_;  // the buffer's first byte in the file; where the split ends
  std::vector<char> buf_ = std::vector<char>(std::size_t{4} << 20);
  std::size_t lo_ = 0, hi_ = 0;
};

bool blank(std::string_view s) { return s.empty() || s == "\r"; }

// A LIBSVM line's largest feature index (its last, as the format's indices
// ascend; the reader refuses a line where they do not): 0 when it has none
// or is not a data row (-1). Comments (#) and blanks are no rows.
std::int64_t libsvm_line(std::string_view s) {
  if (const auto hash = s.find('#'); hash != std::string_view::npos) s = s.substr(0, hash);
  if (s.find_first_not_of(" \t\r") == std::string_view::npos) return -1;
  const std::size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return 0;
  std::size_t from = colon;
  while (from > 0 && s[from - 1] >= '0' && s[from - 1] <= '9') --from;
  std::int64_t idx = 0;
  const auto [p, ec] = std::from_chars(s.data() + from, s.data() + colon, idx);
  // A malformed index is the reader's to name, with its line.
  if (ec != std::errc() || idx > std::numeric_limits<std::int32_t>::max()) return 0;
  return idx;
}

// CSV: whether line 1 is a header (as the readers decide), and a data
// row's fields.
bool csv_header_line(std::string_view s) {
  std::vector<float> row;
  std::string bad;
  return !io::csv_fields(s, row, bad) && io::csv_header(std::string(s));
}

std::int64_t csv_cols(std::string_view s) { return static_cast<std::int64_t>(std::count(s.begin(), s.end(), ',')) + 1; }

}  // namespace

TextSplit count_text_split(const std::string& path, std::int64_t file_bytes, std::int64_t begin, std::int64_t end) {
  io::require_file(path);
  check_file_bytes(path, file_bytes);
  const io::Format f = io::format_of(path);
  if (f != io::Format::Csv && f != io::Format::Libsvm)
    throw InputError(path + ": only CSV and LIBSVM text are counted in byte splits");
  if (begin < 0 || end < begin || end > file_bytes)
    throw InputError(path + ": no byte split [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
  const Fd fd(path);
  TextSplit s;
  s.first = begin == 0 ? 0 : next_line_start(fd, begin - 1, file_bytes);
  s.stop = end == 0 ? 0 : end >= file_bytes ? file_bytes : next_line_start(fd, end - 1, file_bytes);
  s.stop = std::max(s.stop, s.first);
  s.marks.file_bytes = file_bytes;
  Lines lines(fd, s.first, s.stop);
  std::string_view line;
  std::int64_t at = 0;
  while (lines.next(line, at)) {
    ++s.lines;
    if (f == io::Format::Csv) {
      if (blank(line) || (s.first == 0 && s.lines == 1 && csv_header_line(line))) continue;
      if (s.rows == 0) s.cols = csv_cols(line);
    } else {
      const std::int64_t idx = libsvm_line(line);
      if (idx < 0) continue;
      s.cols = std::max(s.cols, idx);
    }
    if (s.rows % TextMarks::kStride == 0) {
      s.marks.offset.push_back(at);
      s.marks.line.push_back(s.lines - 1);
    }
    ++s.rows;
  }
  s.sample = text_split_sample(path, s.first, s.stop);
  return s;
}

void check_densify_text(const std::string& path, std::int64_t rows, std::int64_t cols, std::int64_t file_bytes) {
  io::check_densify(path, rows, cols, file_bytes);
}

std::uint32_t text_split_sample(const std::string& path, std::int64_t first, std::int64_t stop) {
  constexpr std::int64_t kBlock = 4096, kBlocks = 16;
  const Fd fd(path);
  std::vector<char> buf(kBlock);
  uLong c = ::crc32(0, reinterpret_cast<const Bytef*>(&first), sizeof first);
  const std::int64_t n = std::max<std::int64_t>(stop - first, 0);
  const std::int64_t pitch = n <= kBlock * kBlocks ? kBlock : (n - kBlock) / (kBlocks - 1);
  for (std::int64_t at = first; at < stop; at += pitch) {
    const std::size_t got = fd.read(buf.data(), static_cast<std::size_t>(std::min(kBlock, stop - at)), at);
    c = ::crc32(c, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(got));
  }
  return c == 0 ? 1u : static_cast<std::uint32_t>(c);
}

}  // namespace accel
