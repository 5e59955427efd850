// CSV and LIBSVM text readers. Both report file:line for the first bad
// field; LIBSVM rows are densified (labels dropped: k-means ignores them).
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string_view>

#include "accel/error.hpp"
#include "accel/io.hpp"

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

Matrix read_csv(const std::string& path) {
  auto in = open_text(path);
  Matrix m;
  std::string line;
  std::int64_t lineno = 0;
  std::vector<float> row;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    row.clear();
    std::size_t start = 0;
    bool ok = true;
    std::string bad;
    for (;;) {
      const std::size_t comma = line.find(',', start);
      const std::string_view field(line.data() + start, (comma == std::string::npos ? line.size() : comma) - start);
      float v;
      if (!parse_float(field, v)) {
        ok = false;
        bad = std::string(field);
        break;
      }
      row.push_back(v);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (!ok) {
      // A first line that is not numeric is a header.
      if (m.rows == 0 && lineno == 1) continue;
      throw InputError(where(path, lineno) + ": not a number: '" + bad + "'");
    }
    if (m.rows == 0) m.cols = static_cast<std::int64_t>(row.size());
    else if (static_cast<std::int64_t>(row.size()) != m.cols)
      throw InputError(where(path, lineno) + ": " + std::to_string(row.size()) + " fields, expected " +
                       std::to_string(m.cols));
    m.data.insert(m.data.end(), row.begin(), row.end());
    ++m.rows;
  }
  if (m.rows == 0) throw InputError(path + ": no data rows");
  return m;
}

Matrix read_libsvm_dense(const std::string& path) {
  auto in = open_text(path);
  struct Entry { std::int64_t row, col; float v; };
  std::vector<Entry> entries;
  std::int64_t rows = 0, maxcol = 0, lineno = 0;
  std::string line;
  while (std::getline(in, line)) {
    ++lineno;
    std::string_view s(line);
    if (const auto hash = s.find('#'); hash != std::string_view::npos) s = s.substr(0, hash);
    std::size_t pos = s.find_first_not_of(" \t\r");
    if (pos == std::string_view::npos) continue;
    // label
    std::size_t end = s.find_first_of(" \t\r", pos);
    float label;
    if (!parse_float(s.substr(pos, end == std::string_view::npos ? s.size() - pos : end - pos), label))
      throw InputError(where(path, lineno) + ": label '" + std::string(s.substr(pos, end - pos)) +
                       "' is not a number");
    std::int64_t prev = 0;
    while (end != std::string_view::npos) {
      pos = s.find_first_not_of(" \t\r", end);
      if (pos == std::string_view::npos) break;
      end = s.find_first_of(" \t\r", pos);
      const std::string_view tok = s.substr(pos, end == std::string_view::npos ? s.size() - pos : end - pos);
      const std::size_t colon = tok.find(':');
      if (colon == std::string_view::npos)
        throw InputError(where(path, lineno) + ": '" + std::string(tok) + "' has no ':' (want index:value)");
      std::int64_t idx = 0;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + colon, idx);
      if (ec != std::errc() || p != tok.data() + colon || idx < 1)
        throw InputError(where(path, lineno) + ": bad feature index '" + std::string(tok.substr(0, colon)) + "'");
      if (idx <= prev)
        throw InputError(where(path, lineno) + ": feature index " + std::to_string(idx) +
                         " does not increase (previous " + std::to_string(prev) + ")");
      float v;
      if (!parse_float(tok.substr(colon + 1), v))
        throw InputError(where(path, lineno) + ": value '" + std::string(tok.substr(colon + 1)) +
                         "' is not a number");
      prev = idx;
      maxcol = std::max(maxcol, idx);
      entries.push_back({rows, idx - 1, v});
    }
    ++rows;
  }
  if (rows == 0) throw InputError(path + ": no data rows");
  Matrix m;
  m.rows = rows;
  m.cols = std::max<std::int64_t>(maxcol, 1);
  m.data.assign(m.rows * m.cols, 0.0f);
  for (const auto& e : entries) m.data[e.row * m.cols + e.col] = e.v;
  return m;
}

void check_finite(const Matrix& m, const std::string& path) {
  for (std::int64_t i = 0; i < m.rows * m.cols; ++i)
    if (!std::isfinite(m.data[i]))
      throw InputError(path + ": row " + std::to_string(i / m.cols + 1) + ", column " +
                       std::to_string(i % m.cols + 1) + " is " + (std::isnan(m.data[i]) ? "NaN" : "Inf"));
}

}  // namespace accel
