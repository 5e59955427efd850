// LIBSVM text into CSR without densifying (Fashion-MNIST's 60,000 x 784 rows
// are half zeros; text data sets are far sparser). Errors name file:line and
// the offending token, as the CLI prints them.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <span>
#include <sstream>
#include <streambuf>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string_view>

#include <omp.h>

#include "accel/csr.hpp"
#include "accel/error.hpp"
#include "accel/io.hpp"
#include "messages.hpp"

namespace accel {

void CsrMatrix::add_row(std::vector<std::pair<std::int32_t, float>> entries) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t k = 0; k < entries.size(); ++k) {
    if (entries[k].first < 0) throw std::invalid_argument("negative column index " + std::to_string(entries[k].first));
    if (k > 0 && entries[k].first == entries[k - 1].first)
      throw std::invalid_argument("column " + std::to_string(entries[k].first) + " appears twice");
    col_idx.push_back(entries[k].first);
    values.push_back(entries[k].second);
    cols = std::max<std::int64_t>(cols, std::int64_t{entries[k].first} + 1);
  }
  row_ptr.push_back(static_cast<std::int64_t>(values.size()));
  ++rows;
}

void CsrMatrix::add_row_from(const CsrMatrix& other, std::int64_t i) {
  for (std::int64_t k = other.row_ptr[i]; k < other.row_ptr[i + 1]; ++k) {
    col_idx.push_back(other.col_idx[k]);
    values.push_back(other.values[k]);
    cols = std::max<std::int64_t>(cols, std::int64_t{other.col_idx[k]} + 1);
  }
  row_ptr.push_back(static_cast<std::int64_t>(values.size()));
  ++rows;
}

std::vector<double> CsrMatrix::sq_norms() const {
  std::vector<double> out(rows);
  for (std::int64_t i = 0; i < rows; ++i) {
    double s = 0;
    for (std::int64_t k = row_ptr[i]; k < row_ptr[i + 1]; ++k) s += double(values[k]) * double(values[k]);
    out[i] = s;
  }
  return out;
}

namespace {

std::string where(const std::string& path, std::int64_t line) { return path + ":" + std::to_string(line); }

template <class T>
bool parse_number(std::string_view s, T& v) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

namespace {

// A read-only stream over bytes in memory.
struct SpanBuf : std::streambuf {
  explicit SpanBuf(std::span<const std::byte> b) {
    char* p = const_cast<char*>(reinterpret_cast<const char*>(b.data()));
    setg(p, p, p + b.size());
  }
};

// Lines from `in`, the first of them line first_line + 1 of the file; a
// piece with no data rows is empty (the callers say whether a file may be).
// offsets (optional): each data row's line's byte offset in the stream.
// max_rows >= 0: stop after that many data rows (the stream then stands
// right after the last one's line).
LabeledCsr parse(std::istream& in, const std::string& path, const std::function<bool(std::int64_t)>& keep,
                 std::int64_t* nonzeros, std::int64_t first_line = 0, std::vector<std::int64_t>* offsets = nullptr,
                 std::int64_t max_rows = -1) {
  LabeledCsr out;
  out.source = path;
  std::string line;
  std::int64_t lineno = first_line, nnz = 0, at = 0, line_at = 0;
  std::vector<std::pair<std::int32_t, float>> row;
  std::int64_t max_index = 0;  // counts explicit zeros too: LIBSVM's default gamma is 1/max_index
  while ((max_rows < 0 || out.x.rows < max_rows) && std::getline(in, line)) {
    ++lineno;
    line_at = at;
    at += static_cast<std::int64_t>(line.size()) + (in.eof() ? 0 : 1);
    std::string_view s(line);
    if (const auto hash = s.find('#'); hash != std::string_view::npos) s = s.substr(0, hash);
    std::size_t pos = s.find_first_not_of(" \t\r");
    if (pos == std::string_view::npos) continue;
    std::size_t end = s.find_first_of(" \t\r", pos);
    const std::string_view label_tok = s.substr(pos, end == std::string_view::npos ? s.size() - pos : end - pos);
    double label;
    if (!parse_number(label_tok, label) || !std::isfinite(label))
      throw InputError(where(path, lineno) + ": label " + io::quoted(label_tok) + " is not a number");
    row.clear();
    std::int64_t prev = 0;
    while (end != std::string_view::npos) {
      pos = s.find_first_not_of(" \t\r", end);
      if (pos == std::string_view::npos) break;
      end = s.find_first_of(" \t\r", pos);
      const std::string_view tok = s.substr(pos, end == std::string_view::npos ? s.size() - pos : end - pos);
      const std::size_t colon = tok.find(':');
      if (colon == std::string_view::npos)
        throw InputError(where(path, lineno) + ": " + io::quoted(tok) + " has no ':' (want index:value)");
      std::int64_t idx = 0;
      if (!parse_number(tok.substr(0, colon), idx) || idx < 1 || idx > std::numeric_limits<std::int32_t>::max())
        throw InputError(where(path, lineno) + ": bad feature index " + io::quoted(tok.substr(0, colon)));
      // LIBSVM requires ascending indices; a file that breaks this is more
      // likely corrupt than merely unsorted, so it is an error, not a sort.
      if (idx <= prev)
        throw InputError(where(path, lineno) + ": feature index " + std::to_string(idx) +
                         " does not increase (previous " + std::to_string(prev) + ")");
      float v;
      if (!parse_number(tok.substr(colon + 1), v) || !std::isfinite(v))
        throw InputError(where(path, lineno) + ": value " + io::quoted(tok.substr(colon + 1)) +
                         " is not a finite number");
      prev = idx;
      max_index = std::max(max_index, idx);
      // Explicit zeros carry no information for any of the four kernels.
      if (v != 0.0f) row.emplace_back(static_cast<std::int32_t>(idx - 1), v);
    }
    nnz += static_cast<std::int64_t>(row.size());
    if (!keep || keep(out.x.rows)) out.x.add_row(row);
    else out.x.add_row({});
    out.labels.push_back(label);
    out.lines.push_back(lineno);
    if (offsets) offsets->push_back(line_at);
  }
  out.x.cols = std::max(out.x.cols, max_index);
  if (nonzeros) *nonzeros = nnz;
  return out;
}

LabeledCsr whole(LabeledCsr out, const std::string& path) {
  if (out.x.rows == 0) throw InputError(path + ": no data rows");
  return out;
}

// Pieces parsed apart, appended in order.
LabeledCsr joined(std::vector<LabeledCsr>& parts, const std::string& source) {
  LabeledCsr out = std::move(parts[0]);
  for (std::size_t t = 1; t < parts.size(); ++t) {
    append_rows(out, parts[t]);
    parts[t] = LabeledCsr{};
  }
  return whole(std::move(out), source);
}

LabeledCsr read_file(const std::string& path, const std::function<bool(std::int64_t)>& keep, std::int64_t* nonzeros,
                     std::vector<std::int64_t>* offsets = nullptr) {
  io::require_file(path);
  std::ifstream in(path, std::ios::binary);  // byte offsets: no newline translation
  if (!in) throw InputError(path + ": cannot open: " + std::strerror(errno));
  return whole(parse(in, path, keep, nonzeros, 0, offsets), path);
}

// Part files (names_parts): each parsed alone, so that an error names the
// part and its line; their rows joined in name order. Empty parts are
// allowed, an input without rows is not.
LabeledCsr read_parts(const std::string& spec) {
  std::vector<LabeledCsr> parts;
  for (const auto& f : input_files(spec)) {
    io::require_file(f);
    std::ifstream in(f, std::ios::binary);
    if (!in) throw InputError(f + ": cannot open: " + std::strerror(errno));
    parts.push_back(parse(in, f, {}, nullptr));
  }
  return joined(parts, spec);
}

}  // namespace

void append_rows(LabeledCsr& to, const LabeledCsr& from) {
  const std::int64_t base = static_cast<std::int64_t>(to.x.values.size());
  for (std::int64_t r = 1; r <= from.x.rows; ++r) to.x.row_ptr.push_back(base + from.x.row_ptr[r]);
  to.x.col_idx.insert(to.x.col_idx.end(), from.x.col_idx.begin(), from.x.col_idx.end());
  to.x.values.insert(to.x.values.end(), from.x.values.begin(), from.x.values.end());
  to.x.rows += from.x.rows;
  to.x.cols = std::max(to.x.cols, from.x.cols);
  to.labels.insert(to.labels.end(), from.labels.begin(), from.labels.end());
  to.lines.insert(to.lines.end(), from.lines.begin(), from.lines.end());
}

LabeledCsr read_libsvm_csr(const std::string& path) {
  return names_parts(path) ? read_parts(path) : read_file(path, {}, nullptr);
}

LabeledCsr read_libsvm_rows(const std::string& path, const std::function<bool(std::int64_t)>& keep,
                           std::int64_t* nonzeros, std::vector<std::int64_t>* offsets) {
  return read_file(path, keep, nonzeros, offsets);
}

LabeledCsr read_libsvm_block(std::istream& in, const std::string& path, std::int64_t line, std::int64_t max_rows) {
  return parse(in, path, {}, nullptr, line, nullptr, max_rows);
}

LabeledCsr read_libsvm_lines(const std::string& path, const std::vector<std::int64_t>& offsets,
                             const std::vector<std::int64_t>& lines) {
  if (offsets.size() != lines.size()) throw std::invalid_argument("read_libsvm_lines: offsets and lines differ in size");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open: " + std::strerror(errno));
  LabeledCsr out;
  out.source = path;
  std::string line;
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    in.clear();
    in.seekg(offsets[i]);
    if (!std::getline(in, line)) throw InputError(path + ":" + std::to_string(lines[i]) + ": cut short since the job began");
    std::istringstream one(line);
    const LabeledCsr r = parse(one, path, {}, nullptr, lines[i] - 1);
    if (r.x.rows != 1) throw InputError(path + ":" + std::to_string(lines[i]) + ": no longer a data row");
    out.x.add_row_from(r.x, 0);
    out.labels.push_back(r.labels[0]);
    out.lines.push_back(lines[i]);
  }
  return out;
}

namespace {

// Text cut into pieces of whole lines, one per thread (one piece below
// 8 MiB): piece t is [cut[t], cut[t + 1]) and its lines are numbered after
// first[t], the lines of the pieces before it.
struct Pieces {
  std::vector<std::size_t> cut;
  std::vector<std::int64_t> first;
  explicit Pieces(std::span<const std::byte> text) {
    const char* b = reinterpret_cast<const char*>(text.data());
    const std::size_t n = text.size();
    const int pieces = n < (std::size_t{8} << 20) ? 1 : std::max(1, omp_get_max_threads());
    cut.assign(static_cast<std::size_t>(pieces) + 1, n);
    cut[0] = 0;
    for (int t = 1; t < pieces; ++t) {
      std::size_t at = std::max(cut[t - 1], n / pieces * t);
      const void* nl = at < n ? std::memchr(b + at, '\n', n - at) : nullptr;
      cut[t] = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - b) + 1 : n;
    }
    first.assign(static_cast<std::size_t>(pieces), 0);
    for (int t = 1; t < pieces; ++t) first[t] = first[t - 1] + std::count(b + cut[t - 1], b + cut[t], '\n');
  }
  int size() const { return static_cast<int>(first.size()); }
};

// parse() over every piece on its own thread, in blocks of whole lines of
// about `block` bytes (each block's offsets made the text's, and the
// block handed to done() once parsed), each piece's result handed to
// take(t, piece, nonzeros, offsets) there; the first error in file order is
// the one thrown.
template <class Take, class Done>
void parse_pieces(std::span<const std::byte> text, const Pieces& p, const std::string& source,
                  const std::function<bool(std::int64_t)>& keep, bool offsets, std::size_t block, Take take,
                  Done done) {
  const char* b = reinterpret_cast<const char*>(text.data());
  std::vector<std::exception_ptr> failed(static_cast<std::size_t>(p.size()));
#pragma omp parallel for schedule(static, 1) num_threads(p.size())
  for (int t = 0; t < p.size(); ++t) {
    try {
      LabeledCsr piece;
      std::int64_t nnz = 0, line = p.first[t];
      std::vector<std::int64_t> at;
      for (std::size_t from = p.cut[t]; from < p.cut[t + 1];) {
        std::size_t to = p.cut[t + 1];
        if (to - from > block) {
          const void* nl = std::memchr(b + from + block, '\n', to - from - block);
          if (nl) to = static_cast<std::size_t>(static_cast<const char*>(nl) - b) + 1;
        }
        SpanBuf buf(text.subspan(from, to - from));
        std::istream in(&buf);
        std::int64_t n = 0;
        std::vector<std::int64_t> here;
        LabeledCsr part = parse(in, source, keep, &n, line, offsets ? &here : nullptr);
        for (const auto o : here) at.push_back(o + static_cast<std::int64_t>(from));
        nnz += n;
        line += std::count(b + from, b + to, '\n');
        if (piece.x.rows == 0 && piece.labels.empty()) piece = std::move(part);
        else append_rows(piece, part);
        done(text.subspan(from, to - from));
        from = to;
      }
      take(t, std::move(piece), nnz, std::move(at));
    } catch (...) {
      failed[t] = std::current_exception();
    }
  }
  for (const auto& e : failed)
    if (e) std::rethrow_exception(e);
}

}  // namespace

// A worker parses the 300 MB of Fashion-MNIST's LIBSVM text the
// coordinator pushed it before round 1 on every thread.
LabeledCsr parse_libsvm_csr(std::span<const std::byte> text, const std::string& source) {
  const Pieces p(text);
  std::vector<LabeledCsr> parts(static_cast<std::size_t>(p.size()));
  parse_pieces(
      text, p, source, {}, false, SIZE_MAX,
      [&](int t, LabeledCsr part, std::int64_t, std::vector<std::int64_t>) { parts[t] = std::move(part); },
      [](std::span<const std::byte>) {});
  return joined(parts, source);
}

LabeledCsr read_libsvm_labels(const std::string& path, std::int64_t* nonzeros, std::vector<std::int64_t>* offsets) {
  // Mapped, not read: the pieces' threads parse it in place.
  const MappedFile f(path);
  const auto text = f.bytes();
  const Pieces p(text);
  std::vector<LabeledCsr> parts(static_cast<std::size_t>(p.size()));
  std::vector<std::int64_t> nnz(parts.size(), 0);
  std::vector<std::vector<std::int64_t>> at(parts.size());
  // Blocks of 1 MiB, each one's pages given back once parsed: the
  // coordinator passes over the file without holding it.
  parse_pieces(
      text, p, path, [](std::int64_t) { return false; }, offsets != nullptr, std::size_t{1} << 20,
      [&](int t, LabeledCsr part, std::int64_t n, std::vector<std::int64_t> a) {
        parts[t] = std::move(part);
        nnz[t] = n;
        at[t] = std::move(a);
      },
      [&](std::span<const std::byte> parsed) { f.release(parsed); });
  if (nonzeros) *nonzeros = std::accumulate(nnz.begin(), nnz.end(), std::int64_t{0});
  if (offsets)
    for (const auto& a : at) offsets->insert(offsets->end(), a.begin(), a.end());
  return joined(parts, path);
}

}  // namespace accel
