// What the readers' error messages share: a bad value shown as text (a NUL
// byte inside one would cut the whole message short), and the one-line
// refusal of a path that is not a regular file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

#include "accel/error.hpp"

namespace accel::io {

// s between quotes, control bytes and bytes past ASCII as \xNN, at most
// 64 of its characters (the rest as "...").
inline std::string quoted(std::string_view s) {
  std::string out = "'";
  std::size_t shown = 0;
  for (const char ch : s) {
    if (++shown > 64) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += ch;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out + "'";
}

// InputError unless path names a file that exists and is not a directory.
inline void require_file(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) throw InputError(path + ": no such file");
  if (std::filesystem::is_directory(st)) throw InputError(path + ": is a directory, not a file");
}

// InputError unless the file holds the job's rows x cols values and
// [begin, begin + count) lies within its rows (load_matrix_rows).
inline void require_rows(const std::string& path, std::int64_t has_rows, std::int64_t has_cols, std::int64_t rows,
                         std::int64_t cols, std::int64_t begin, std::int64_t count) {
  if (has_rows != rows || has_cols != cols)
    throw InputError(path + ": holds " + std::to_string(has_rows) + " x " + std::to_string(has_cols) +
                     " values, the job's input " + std::to_string(rows) + " x " + std::to_string(cols));
  if (begin < 0 || count < 0 || begin > rows - count)
    throw InputError(path + ": rows [" + std::to_string(begin) + ", " + std::to_string(begin + count) + ") of " +
                     std::to_string(rows));
}

}  // namespace accel::io
